// libFuzzer target: the pages of a LIST response as the API server sends them,
// decoded as prepare decodes them (decode_list), followed through their continue
// tokens (list_pages), and each item taken as prepare takes a Node: trimmed, with
// and without the label keys of a Plan, and read. The input is the bodies of the
// pages, separated by NUL bytes. Any input decodes or is refused with hoist::Error;
// nothing else may escape (a nlohmann type_error would).

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "hoist/kube/kube_client.hpp"
#include "hoist/kube/list_pager.hpp"
#include "hoist/kube/plan_progress.hpp"
#include "hoist/sys/library_versions.hpp"
#include "hoist/util/error.hpp"

// KubeClient::request() puts it in the User-Agent; nothing here sends a request,
// and library_versions.cpp would pull in every library hoist reports.
std::string hoist::hoist_version() {
  return "fuzz";
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> bodies;
  for (std::size_t start = 0;;) {
    const std::size_t end = input.find('\0', start);
    bodies.push_back(input.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) {
      break;
    }
    start = end + 1;
  }
  const std::set<std::string> keys{"kubernetes.io/hostname", "plan.upgrade.cattle.io/fuzz"};
  std::size_t next = 0;
  try {
    (void)hoist::list_pages(
        [&](const std::string&) {
          // Past the last body the server answers an empty last page.
          return next < bodies.size() ? hoist::decode_list(bodies[next++], "failed to list nodes")
                                      : hoist::ObjectList{};
        },
        [&](std::vector<nlohmann::json>&& items) {
          for (std::size_t i = 0; i < items.size(); ++i) {
            const nlohmann::json trimmed =
                i % 2 == 0 ? hoist::trim_node(std::move(items[i]), &keys) : hoist::trim_node(std::move(items[i]));
            try {
              (void)hoist::NodeView::from_json(trimmed);
            } catch (const hoist::Error&) {
              // a node without a name: refused
            }
          }
        },
        [](const hoist::KubeError&) {}, "failed to list nodes");
  } catch (const hoist::Error&) {
    // not a list, a field of the wrong type, a repeated continue token: refused
  }
  return 0;
}
