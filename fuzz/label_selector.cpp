// libFuzzer target: label selectors from Kubernetes JSON. The input is a JSON
// selector, NUL, a JSON object of labels. Malformed JSON and bad selectors are
// refused (nlohmann's parse_error, hoist::Error); a selector that parses can be
// printed and matched against any labels without anything else escaping.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "hoist/kube/label_selector.hpp"
#include "hoist/util/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::size_t nul = text.find('\0');
  const std::string_view selector_text = text.substr(0, nul);
  const std::string_view labels_text = nul == std::string_view::npos ? std::string_view("{}") : text.substr(nul + 1);
  const nlohmann::json selector_json = nlohmann::json::parse(selector_text, nullptr, false);
  if (selector_json.is_discarded()) {
    return 0;
  }
  try {
    const hoist::LabelSelector selector = hoist::LabelSelector::from_json(selector_json, "fuzz");
    for (const hoist::LabelRequirement& requirement : selector.requirements()) {
      (void)requirement.to_string();
    }
    hoist::Labels labels;
    const nlohmann::json labels_json = nlohmann::json::parse(labels_text, nullptr, false);
    if (labels_json.is_object()) {
      for (const auto& [key, value] : labels_json.items()) {
        if (value.is_string()) {
          labels[key] = value.get<std::string>();
        }
      }
    }
    (void)selector.matches(labels);
  } catch (const hoist::Error&) {
    // refused: fine
  }
  return 0;
}
