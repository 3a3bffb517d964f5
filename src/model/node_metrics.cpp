#include "hoist/model/node_metrics.hpp"

#include <fcntl.h>

#include "hoist/sys/atomic_file.hpp"
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
  text +=
      "# HELP hoist_last_run_timestamp_seconds When hoist's last upgrade or rollback on this node ended, in Unix "
      "time.\n"
      "# TYPE hoist_last_run_timestamp_seconds gauge\n"
      "hoist_last_run_timestamp_seconds " +
      std::to_string(run.ended_at) +
      "\n"
      "# HELP hoist_last_run_success Whether that run succeeded (1) or failed (0).\n"
      "# TYPE hoist_last_run_success gauge\n"
      "hoist_last_run_success " +
      (run.succeeded ? "1" : "0") +
      "\n"
      "# HELP hoist_rollbacks_total Rollbacks that switched a component back, per component.\n"
      "# TYPE hoist_rollbacks_total counter\n";
  for (const ComponentState& state : states) {
    text += "hoist_rollbacks_total{component=\"" + prometheus_label_value(state.component) + "\"} " +
            std::to_string(state.rollbacks) + "\n";
  }
  return text;
}

void write_node_metrics(const HostRoot& root, const std::string& host_path, std::string_view text) {
  const auto slash = host_path.rfind('/');
  const std::string dir = slash == 0 ? "/" : host_path.substr(0, slash);
  const std::string name = host_path.substr(slash + 1);
  auto made = root.make_directories(dir, 0755);
  if (!made) {
    throw Failure("failed to write the metrics file: " + made.error().message);
  }
  // O_PATH descriptors cannot be fsynced; reopen the directory for the write (as StateStore::save).
  auto dirfd = root.open(dir, O_RDONLY | O_DIRECTORY);
  if (!dirfd) {
    throw Failure("failed to write the metrics file: " + dirfd.error().message);
  }
  // No sweep of stale temporaries here: the directory is shared with other writers, and this write happens after
  // the run's lock is released. A temporary a killed run left is not named *.prom, so the collector ignores it.
  if (auto written = write_file_atomic(dirfd->get(), name, text, 0644, root.display(host_path)); !written) {
    throw Failure("failed to write the metrics file: " + written.error().message);
  }
}

}  // namespace hoist
