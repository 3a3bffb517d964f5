#include "hoist/kube/node_event.hpp"

#include <cstdio>
#include <ctime>

namespace hoist {

namespace {

// The API server's limits (k8s.io/kubernetes pkg/apis/core/validation/events.go).
constexpr std::size_t k_max_note_bytes = 1024;
constexpr std::size_t k_max_reporting_instance = 128;
constexpr std::size_t k_max_name = 253;

// A MicroTime as the API writes it: RFC 3339 in UTC with microseconds.
std::string micro_time(std::chrono::system_clock::time_point now) {
  const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count();
  const std::time_t seconds = static_cast<std::time_t>(micros / 1000000);
  std::tm utc{};
  ::gmtime_r(&seconds, &utc);
  char text[40];
  const std::size_t n = std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
  std::snprintf(text + n, sizeof text - n, ".%06dZ", static_cast<int>(micros % 1000000));
  return text;
}

// `text` cut to at most `limit` bytes without splitting a UTF-8 sequence.
std::string cut_utf8(const std::string& text, std::size_t limit) {
  if (text.size() <= limit) {
    return text;
  }
  std::size_t end = limit;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0U) == 0x80U) {
    --end;  // text[end] continues a sequence: cut before the sequence's lead byte
  }
  return text.substr(0, end);
}

}  // namespace

nlohmann::json node_event_object(const std::string& node, const NodeEvent& event,
                                 std::chrono::system_clock::time_point now) {
  // client-go's recorder names events "<object>.<unix nanoseconds in hex>": unique enough, and sorted by time.
  char suffix[24];
  std::snprintf(suffix, sizeof suffix, ".%llx",
                static_cast<unsigned long long>(
                    std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count()));
  const std::string name = node.substr(0, k_max_name - std::string_view(suffix).size()) + suffix;
  return nlohmann::json{
      {"apiVersion", "events.k8s.io/v1"},
      {"kind", "Event"},
      {"metadata", {{"name", name}, {"namespace", k_node_event_namespace}}},
      {"eventTime", micro_time(now)},
      {"reportingController", "hoist"},
      {"reportingInstance", node.substr(0, k_max_reporting_instance)},
      {"action", event.action},
      {"reason", event.reason},
      {"type", event.type == NodeEvent::Type::warning ? "Warning" : "Normal"},
      {"regarding", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}, {"uid", node}}},
      {"note", cut_utf8(event.note, k_max_note_bytes)},
  };
}

void post_node_event(const KubeClient& client, const std::string& node, const NodeEvent& event, Deadline deadline) {
  client.create(KubeResource::events(k_node_event_namespace),
                node_event_object(node, event, std::chrono::system_clock::now()), deadline);
}

}  // namespace hoist
