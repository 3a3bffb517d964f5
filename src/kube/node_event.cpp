#include "hoist/kube/node_event.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <ctime>

#include "hoist/sys/sha256.hpp"

namespace hoist {

namespace {

// The API server's limits (k8s.io/kubernetes pkg/apis/core/validation/events.go).
constexpr std::size_t k_max_note_bytes = 1024;
constexpr std::size_t k_max_reporting_instance = 128;
constexpr std::size_t k_max_name = 253;

// How often a series' count is tried again after a conflict (another writer between our GET and PATCH).
constexpr int k_series_attempts = 3;

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
  const std::string note = cut_utf8(event.note, k_max_note_bytes);
  std::string suffix;
  if (event.series.empty()) {
    // client-go's recorder names events "<object>.<unix nanoseconds in hex>": unique enough, and sorted by time.
    char hex[24];
    std::snprintf(hex, sizeof hex, ".%llx",
                  static_cast<unsigned long long>(
                      std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count()));
    suffix = hex;
  } else {
    // The same name for the same series saying the same: a repeat finds the Event to count on.
    Sha256 digest;
    for (const std::string_view part : {std::string_view(event.series), std::string_view(event.reason),
                                        std::string_view(event.action), std::string_view(note)}) {
      digest.update(part);
      digest.update(std::string_view("\n", 1));
    }
    digest.update(std::string_view(event.type == NodeEvent::Type::warning ? "Warning" : "Normal"));
    suffix = "." + digest.final_hex().substr(0, 16);
  }
  const std::string name = node.substr(0, k_max_name - suffix.size()) + suffix;
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
      {"note", note},
  };
}

nlohmann::json node_event_series_patch(const nlohmann::json& existing, std::chrono::system_clock::time_point now) {
  std::int64_t count = 1;  // an Event without a series is its first occurrence
  if (const auto series = existing.find("series"); series != existing.end() && series->is_object()) {
    if (const auto seen = series->find("count"); seen != series->end() && seen->is_number_integer()) {
      count = std::max<std::int64_t>(seen->get<std::int64_t>(), 1);
    }
  }
  nlohmann::json patch{{"series", {{"count", count + 1}, {"lastObservedTime", micro_time(now)}}}};
  if (const auto metadata = existing.find("metadata"); metadata != existing.end() && metadata->is_object()) {
    if (const auto version = metadata->find("resourceVersion"); version != metadata->end() && version->is_string()) {
      patch["metadata"]["resourceVersion"] = *version;
    }
  }
  return patch;
}

void post_node_event(const KubeClient& client, const std::string& node, const NodeEvent& event, Deadline deadline) {
  const KubeResource events = KubeResource::events(k_node_event_namespace);
  const auto object = node_event_object(node, event, std::chrono::system_clock::now());
  const std::string name = object["metadata"]["name"].get<std::string>();
  for (int attempt = 1;; ++attempt) {
    try {
      client.create(events, object, deadline);
      return;
    } catch (const KubeError& e) {
      // 409: the series' Event exists (a pod SUC retried said the same before).
      if (event.series.empty() || e.status() != 409 || attempt >= k_series_attempts) {
        throw;
      }
    }
    nlohmann::json existing;
    try {
      existing = client.get(events, name, deadline);
    } catch (const KubeError& e) {
      if (e.kind() == KubeError::Kind::not_found) {
        continue;  // expired (the API server's event TTL) since: create it again
      }
      throw;
    }
    try {
      client.patch(events, name, node_event_series_patch(existing, std::chrono::system_clock::now()), deadline);
      return;
    } catch (const KubeError& e) {
      // 409 Conflict: counted by someone else meanwhile; 404: expired meanwhile. Either way, once more.
      const bool again = e.status() == 409 || e.kind() == KubeError::Kind::not_found;
      if (!again || attempt >= k_series_attempts) {
        throw;
      }
    }
  }
}

}  // namespace hoist
