#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "hoist/kube/kube_client.hpp"
#include "hoist/kube/plan_progress.hpp"
#include "hoist/kube/resource_mirror.hpp"

namespace hoist {

/// What `hoist prepare` waits for, and how.
struct PlanWaitOptions {
  std::string plan;
  std::string namespace_;
  /// Under the 900 s Job deadline of SUC's stock ConfigMap (its code's own default is 600 s, so a Plan passes
  /// --timeout derived from its jobActiveDeadlineSecs), so that prepare fails with a message that names the
  /// missing nodes rather than being killed without one.
  std::chrono::milliseconds timeout{std::chrono::seconds(840)};
  std::optional<std::string> node_version;  ///< kubelet version the selected nodes must report
  MirrorTiming timing;
};

/// Waits until `options.plan` is complete (see PlanProgress), watching the Plan
/// and the nodes its selector picks, and returns the final progress. Logs a
/// progress line whenever the progress changes, from the calling thread only.
/// Throws hoist::Failure on timeout, naming the nodes still missing; at once when the
/// Plan has failed (PlanProgress::State::failed), naming SUC's message; and
/// KubeError for what retrying cannot fix (401, 403, an untrusted certificate).
PlanProgress wait_for_plan(const KubeClient& client, const PlanWaitOptions& options);

}  // namespace hoist
