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

TEST_CASE("the metrics text lists each component, the last run by command, and each component's standing") {
  ComponentState k3s = component("k3s", "file", "v1.30.1+k3s1", 2);
  k3s.last_result = hoist::LastResult{"upgrade", "rolled-back", "v1.31.0+k3s1", "2026-01-02T03:04:05Z", "failed"};
  k3s.quarantined.push_back(hoist::QuarantinedVersion{"v1.31.0+k3s1", "2026-01-02T03:04:05Z", "health"});
  k3s.owed_restarts = {"k3s.service"};
  ComponentState fresh = component("new", "tree", "", 0);
  fresh.pending_reboot = hoist::PendingReboot{"1.0.0", "b00t", "2026-01-02T03:04:05Z"};
  fresh.owed_health_checks = {"node-ready", "unit:k3s.service"};
  const std::string text = node_metrics_text({k3s, fresh}, {1767323045, false, "rollback"});
  CHECK(text ==
        "# HELP hoist_component_info The version of each component hoist manages that is current on this node.\n"
        "# TYPE hoist_component_info gauge\n"
        "hoist_component_info{component=\"k3s\",kind=\"file\",version=\"v1.30.1+k3s1\"} 1\n"
        "# HELP hoist_last_run_timestamp_seconds When hoist's last upgrade or rollback on this node ended, in Unix "
        "time.\n"
        "# TYPE hoist_last_run_timestamp_seconds gauge\n"
        "hoist_last_run_timestamp_seconds{command=\"rollback\"} 1767323045\n"
        "# HELP hoist_last_run_success Whether that run succeeded (1) or failed (0).\n"
        "# TYPE hoist_last_run_success gauge\n"
        "hoist_last_run_success{command=\"rollback\"} 0\n"
        "# HELP hoist_rollbacks_total Rollbacks that switched a component back, per component.\n"
        "# TYPE hoist_rollbacks_total counter\n"
        "hoist_rollbacks_total{component=\"k3s\"} 2\n"
        "hoist_rollbacks_total{component=\"new\"} 0\n"
        "# HELP hoist_component_last_success Whether the last command on a component succeeded (1: succeeded, "
        "unchanged or rebooting) or not (0: failed, refused, rolled back).\n"
        "# TYPE hoist_component_last_success gauge\n"
        "hoist_component_last_success{component=\"k3s\",command=\"upgrade\"} 0\n"
        "hoist_component_last_success{component=\"new\"} 1\n"
        "# HELP hoist_component_quarantined_versions Versions of a component that a rollback left, which upgrade "
        "refuses.\n"
        "# TYPE hoist_component_quarantined_versions gauge\n"
        "hoist_component_quarantined_versions{component=\"k3s\"} 1\n"
        "hoist_component_quarantined_versions{component=\"new\"} 0\n"
        "# HELP hoist_component_pending_reboot Whether a reboot hoist asked for has not been seen yet (1), for a "
        "component.\n"
        "# TYPE hoist_component_pending_reboot gauge\n"
        "hoist_component_pending_reboot{component=\"k3s\"} 0\n"
        "hoist_component_pending_reboot{component=\"new\"} 1\n"
        "# HELP hoist_component_owed_restarts Restarts an earlier run of a component owes, done by the next.\n"
        "# TYPE hoist_component_owed_restarts gauge\n"
        "hoist_component_owed_restarts{component=\"k3s\"} 1\n"
        "hoist_component_owed_restarts{component=\"new\"} 0\n"
        "# HELP hoist_component_owed_health_checks Health checks a component's switch owes that have not passed "
        "yet.\n"
        "# TYPE hoist_component_owed_health_checks gauge\n"
        "hoist_component_owed_health_checks{component=\"k3s\"} 0\n"
        "hoist_component_owed_health_checks{component=\"new\"} 2\n");
}
