#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hoist/model/state.hpp"
#include "hoist/sys/host_root.hpp"

namespace hoist {

/// How the run that writes the metrics ended.
struct RunMetrics {
  std::int64_t ended_at = 0;  ///< Unix time, seconds
  bool succeeded = false;
  std::string command;  ///< upgrade | rollback
};

/// The node's metrics in Prometheus' text exposition format (version 0.0.4), for node-exporter's textfile
/// collector: `hoist_component_info{component,kind,version} 1` for each component with a current version,
/// `hoist_last_run_timestamp_seconds{command}`, `hoist_last_run_success{command}` (1 or 0) and, per component,
/// `hoist_rollbacks_total`, `hoist_component_last_success{component,command}` (its last result: 1 for succeeded,
/// unchanged or rebooting), `hoist_component_quarantined_versions`, `hoist_component_pending_reboot` (1 or 0),
/// `hoist_component_owed_restarts` and `hoist_component_owed_health_checks` (docs/observability.md).
/// Label values are escaped as the format requires (`\\`, `\"`, `\n`).
std::string node_metrics_text(const std::vector<ComponentState>& states, const RunMetrics& run);

/// Quotes `value` as a label value of the text format (without the surrounding quotes).
std::string prometheus_label_value(std::string_view value);

/// Replaces the file at `host_path` inside `root` with `text` atomically (write_file_atomic: node-exporter never
/// reads half a file), making its directory when missing. Throws hoist::Failure naming the path.
void write_node_metrics(const HostRoot& root, const std::string& host_path, std::string_view text);

}  // namespace hoist
