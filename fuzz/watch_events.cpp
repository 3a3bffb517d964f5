// libFuzzer target: a watch response body from the API server, cut into chunks
// at places the input chooses, decoded into events, and each event's object
// taken as prepare takes it: as a Node (trimmed, then read) and as a Plan
// judged against the nodes seen so far. Any input decodes or is refused with
// hoist::Error; nothing else may escape (a nlohmann type_error would).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "hoist/kube/kube_client.hpp"
#include "hoist/kube/plan_progress.hpp"
#include "hoist/sys/library_versions.hpp"
#include "hoist/util/error.hpp"

// KubeClient::request() puts it in the User-Agent; the decoder never sends a
// request, and library_versions.cpp would pull in every library hoist reports.
std::string hoist::hoist_version() {
  return "fuzz";
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) {
    return 0;
  }
  // The first byte sets the chunk size (1-256 bytes), as a TCP read would cut the body.
  const std::size_t chunk = std::size_t{data[0]} + 1;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  hoist::NodeMap nodes;
  hoist::WatchDecoder decoder(hoist::KubeResource::nodes(), "https://fuzz.invalid:6443");
  const auto on_event = [&](hoist::WatchEvent&& event) {
    const nlohmann::json plan = event.object;
    (void)hoist::evaluate_plan("fuzz", &plan, nodes, std::optional<std::string>("v1.30.1+k3s1"));
    (void)hoist::evaluate_plan("fuzz", &plan, nodes, std::nullopt);
    const nlohmann::json trimmed = hoist::trim_node(std::move(event.object));
    try {
      hoist::NodeView node = hoist::NodeView::from_json(trimmed);
      std::string name = node.name;
      nodes.insert_or_assign(std::move(name), std::move(node));
    } catch (const hoist::Error&) {
      // a node without a name: refused
    }
  };
  try {
    for (std::size_t at = 0; at < body.size(); at += chunk) {
      decoder.feed(body.substr(at, chunk), on_event);
    }
  } catch (const hoist::Error&) {
    // a malformed event or an ERROR event: refused
  }
  return 0;
}
