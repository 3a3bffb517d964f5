#include <catch2/catch.hpp>

#include <chrono>

#include "hoist/kube/node_event.hpp"

using hoist::node_event_object;
using hoist::NodeEvent;

namespace {

// 2026-01-02T03:04:05.678901Z
const auto k_when = std::chrono::system_clock::time_point(std::chrono::microseconds(1767323045678901LL));

}  // namespace

TEST_CASE("a node event is an events.k8s.io/v1 Event regarding the node, in namespace default") {
  const auto event = node_event_object(
      "node-1", NodeEvent{NodeEvent::Type::warning, "HoistUpgradeFailed", "Upgrade", "it failed", ""}, k_when);
  CHECK(event["apiVersion"] == "events.k8s.io/v1");
  CHECK(event["kind"] == "Event");
  CHECK(event["metadata"]["namespace"] == "default");
  CHECK(event["metadata"]["name"] == "node-1.1886caf2450d6708");
  CHECK(event["eventTime"] == "2026-01-02T03:04:05.678901Z");
  CHECK(event["reportingController"] == "hoist");
  CHECK(event["reportingInstance"] == "node-1");
  CHECK(event["type"] == "Warning");
  CHECK(event["reason"] == "HoistUpgradeFailed");
  CHECK(event["action"] == "Upgrade");
  CHECK(event["note"] == "it failed");
  CHECK(event["regarding"] ==
        nlohmann::json{{"apiVersion", "v1"}, {"kind", "Node"}, {"name", "node-1"}, {"uid", "node-1"}});
}

TEST_CASE("a node event's note is cut to 1024 bytes at a character boundary") {
  std::string note(1023, 'a');
  note += "\xc3\xa9";  // é: two bytes, the second past the limit
  const auto event =
      node_event_object("n", NodeEvent{NodeEvent::Type::normal, "HoistUpgraded", "Upgrade", note, ""}, k_when);
  CHECK(event["note"] == std::string(1023, 'a'));
  CHECK(event["type"] == "Normal");
}

TEST_CASE("a node event's name and reporting instance stay within the API's limits for a long node name") {
  const std::string node(253, 'n');
  const auto event =
      node_event_object(node, NodeEvent{NodeEvent::Type::normal, "HoistUpgraded", "Upgrade", "", ""}, k_when);
  CHECK(event["metadata"]["name"].get<std::string>().size() == 253);
  CHECK(event["reportingInstance"].get<std::string>() == std::string(128, 'n'));
  CHECK(event["regarding"]["name"] == node);
}

TEST_CASE("an event of a series is named by its series and what it says, not by the time") {
  NodeEvent refused{NodeEvent::Type::warning, "HoistUpgradeFailed", "Upgrade", "refused", "os-tree@h1"};
  const auto first = node_event_object("node-1", refused, k_when);
  const auto again = node_event_object("node-1", refused, k_when + std::chrono::minutes(3));
  CHECK(first["metadata"]["name"] == again["metadata"]["name"]);
  CHECK(first["metadata"]["name"].get<std::string>().starts_with("node-1."));
  CHECK(first["metadata"]["name"].get<std::string>().size() == std::string("node-1.").size() + 16);
  CHECK(again["eventTime"] == "2026-01-02T03:07:05.678901Z");
  // Another Plan hash, note, reason or type is another series.
  for (auto other : {NodeEvent{NodeEvent::Type::warning, "HoistUpgradeFailed", "Upgrade", "refused", "os-tree@h2"},
                     NodeEvent{NodeEvent::Type::warning, "HoistUpgradeFailed", "Upgrade", "other", "os-tree@h1"},
                     NodeEvent{NodeEvent::Type::warning, "HoistRolledBack", "Upgrade", "refused", "os-tree@h1"},
                     NodeEvent{NodeEvent::Type::normal, "HoistUpgradeFailed", "Upgrade", "refused", "os-tree@h1"}}) {
    CHECK(node_event_object("node-1", other, k_when)["metadata"]["name"] != first["metadata"]["name"]);
  }
  // A long node name leaves room for the digest.
  CHECK(node_event_object(std::string(253, 'n'), refused, k_when)["metadata"]["name"].get<std::string>().size() == 253);
}

TEST_CASE("a repeat counts on the series as events.k8s.io/v1 does: 2 for the first repeat, then one more each") {
  const nlohmann::json first = nlohmann::json::parse(R"({"metadata": {"name": "n.x", "resourceVersion": "41"}})");
  CHECK(hoist::node_event_series_patch(first, k_when) ==
        nlohmann::json::parse(R"({"metadata": {"resourceVersion": "41"},
                                  "series": {"count": 2, "lastObservedTime": "2026-01-02T03:04:05.678901Z"}})"));
  const nlohmann::json counted = nlohmann::json::parse(
      R"({"metadata": {"resourceVersion": "57"}, "series": {"count": 6, "lastObservedTime": "2026-01-02T03:00:00.000000Z"}})");
  const auto patch = hoist::node_event_series_patch(counted, k_when);
  CHECK(patch["series"]["count"] == 7);
  CHECK(patch["metadata"]["resourceVersion"] == "57");
  // A series of another shape counts from the first occurrence.
  CHECK(hoist::node_event_series_patch(nlohmann::json::parse(R"({"series": {"count": "x"}})"),
                                       k_when)["series"]["count"] == 2);
}
