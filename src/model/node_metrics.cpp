#include "hoist/model/node_metrics.hpp"

#include <fcntl.h>

#include "hoist/model/state_update.hpp"
#include "hoist/util/error.hpp"

namespace hoist {

std::string prometheus_label_value(std::string_view value) {
  std::string out;
  for (const char c : value) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      default: out += c;
    }
  }
  return out;
}

std::string node_metrics_text(const std::vector<ComponentState>& states, const RunMetrics& run) {
  std::string text =
      "# HELP hoist_component_info The version of each component hoist manages that is current on this node.\n"
      "# TYPE hoist_component_info gauge\n";
  for (const ComponentState& state : states) {
    if (!state.current.empty()) {
      text += "hoist_component_info{component=\"" + prometheus_label_value(state.component) + "\",kind=\"" +
              prometheus_label_value(state.kind) + "\",version=\"" + prometheus_label_value(state.current) + "\"} 1\n";
    }
  }
  const std::string command = "{command=\"" + prometheus_label_value(run.command) + "\"}";
  text +=
      "# HELP hoist_last_run_timestamp_seconds When hoist's last upgrade or rollback on this node ended, in Unix "
      "time.\n"
      "# TYPE hoist_last_run_timestamp_seconds gauge\n"
      "hoist_last_run_timestamp_seconds" +
      command + " " + std::to_string(run.ended_at) +
      "\n"
      "# HELP hoist_last_run_success Whether that run succeeded (1) or failed (0).\n"
      "# TYPE hoist_last_run_success gauge\n"
      "hoist_last_run_success" +
      command + " " + (run.succeeded ? "1" : "0") + "\n";
  // One family per gauge, each component a line: (name, help, value of a state).
  struct Gauge {
    const char* name;
    const char* type;
    const char* help;
    std::string (*value)(const ComponentState&);
    bool by_command = false;  ///< also labelled with the command of the component's last result
  };
  static const Gauge k_gauges[] = {
      {"hoist_rollbacks_total", "counter", "Rollbacks that switched a component back, per component.",
       [](const ComponentState& s) { return std::to_string(s.rollbacks); }},
      {"hoist_component_last_success", "gauge",
       "Whether the last command on a component succeeded (1: succeeded, unchanged or rebooting) or not (0: failed, "
       "refused, rolled back).",
       [](const ComponentState& s) {
         const std::string& outcome = s.last_result ? s.last_result->outcome : std::string(outcome::k_succeeded);
         return std::string(outcome == outcome::k_succeeded || outcome == outcome::k_unchanged ||
                                    outcome == outcome::k_rebooting
                                ? "1"
                                : "0");
       },
       true},
      {"hoist_component_quarantined_versions", "gauge",
       "Versions of a component that a rollback left, which upgrade refuses.",
       [](const ComponentState& s) { return std::to_string(s.quarantined.size()); }},
      {"hoist_component_pending_reboot", "gauge",
       "Whether a reboot hoist asked for has not been seen yet (1), for a component.",
       [](const ComponentState& s) { return std::string(s.pending_reboot ? "1" : "0"); }},
      {"hoist_component_owed_restarts", "gauge", "Restarts an earlier run of a component owes, done by the next.",
       [](const ComponentState& s) { return std::to_string(s.owed_restarts.size()); }},
      {"hoist_component_owed_health_checks", "gauge",
       "Health checks a component's switch owes that have not passed yet.",
       [](const ComponentState& s) { return std::to_string(s.owed_health_checks.size()); }},
  };
  for (const Gauge& gauge : k_gauges) {
    text += std::string("# HELP ") + gauge.name + " " + gauge.help + "\n# TYPE " + gauge.name + " " + gauge.type + "\n";
    for (const ComponentState& state : states) {
      std::string labels = "component=\"" + prometheus_label_value(state.component) + "\"";
      if (gauge.by_command && state.last_result) {
        labels += ",command=\"" + prometheus_label_value(state.last_result->command) + "\"";
      }
      text += std::string(gauge.name) + "{" + labels + "} " + gauge.value(state) + "\n";
    }
  }
  return text;
}

void write_node_metrics(const HostRoot& root, const std::string& host_path, std::string_view text) {
  // No sweep of stale temporaries here: the directory is shared with other writers, and this write happens after
  // the run's lock is released. A temporary a killed run left is not named *.prom, so the collector ignores it.
  if (auto written = root.replace_file(host_path, text, 0644); !written) {
    throw Failure("failed to write the metrics file: " + written.error().message);
  }
}

}  // namespace hoist
