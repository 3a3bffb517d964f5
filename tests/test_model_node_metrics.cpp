#include <catch2/catch.hpp>

#include "hoist/model/node_metrics.hpp"

using hoist::ComponentState;
using hoist::node_metrics_text;
using hoist::prometheus_label_value;

namespace {

ComponentState component(std::string name, std::string kind, std::string current, std::uint64_t rollbacks) {
  ComponentState state;
  state.component = std::move(name);
  state.kind = std::move(kind);
  state.current = std::move(current);
  state.rollbacks = rollbacks;
  return state;
}

}  // namespace

TEST_CASE("label values escape backslash, double quote and newline, and nothing else") {
  CHECK(prometheus_label_value("v1.2.3+k3s1") == "v1.2.3+k3s1");
  CHECK(prometheus_label_value("a\\b\"c\nd\te") == "a\\\\b\\\"c\\nd\te");
}

TEST_CASE("the metrics text lists each component, the last run and the rollbacks") {
  const std::string text = node_metrics_text(
      {component("k3s", "file", "v1.30.1+k3s1", 2), component("new", "tree", "", 0)}, {1767323045, false});
  CHECK(text ==
        "# HELP hoist_component_info The version of each component hoist manages that is current on this node.\n"
        "# TYPE hoist_component_info gauge\n"
        "hoist_component_info{component=\"k3s\",kind=\"file\",version=\"v1.30.1+k3s1\"} 1\n"
        "# HELP hoist_last_run_timestamp_seconds When hoist's last upgrade or rollback on this node ended, in Unix "
        "time.\n"
        "# TYPE hoist_last_run_timestamp_seconds gauge\n"
        "hoist_last_run_timestamp_seconds 1767323045\n"
        "# HELP hoist_last_run_success Whether that run succeeded (1) or failed (0).\n"
        "# TYPE hoist_last_run_success gauge\n"
        "hoist_last_run_success 0\n"
        "# HELP hoist_rollbacks_total Rollbacks that switched a component back, per component.\n"
        "# TYPE hoist_rollbacks_total counter\n"
        "hoist_rollbacks_total{component=\"k3s\"} 2\n"
        "hoist_rollbacks_total{component=\"new\"} 0\n");
}
