#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hoist/kube/node_event.hpp"
#include "hoist/model/context.hpp"
#include "hoist/util/exit_code.hpp"

namespace hoist::cli {

/// Posts `event` about the Job's node (SYSTEM_UPGRADE_NODE_NAME) with the pod's service account, the in-cluster
/// config prepare uses; in a SUC Job, the same event for the same Plan hash is one series (post_node_event()),
/// however many pods SUC retries. Outside a pod (no node name, no KUBERNETES_SERVICE_HOST or no service account) it
/// does nothing and says nothing above debug. Never throws and never fails a run: an event that cannot be posted is a
/// warning line, and that line never holds the token.
void tell_node(const Context& context, const NodeEvent& event);

/// The event for the outcome of `command` ("upgrade", "stage" or "rollback"): HoistUpgraded, HoistStaged or
/// HoistRolledBack when `code` is ok, else HoistUpgradeFailed, HoistStageFailed or HoistRollbackFailed (Warning)
/// with the error; the note ends with `summary`.
/// An upgrade that switched back by itself (`rolled_back`: a failed health check) is HoistRolledBack (Warning)
/// naming what it switched back, from which version to which, and why, in place of the error. None for another
/// command.
std::optional<NodeEvent> outcome_event(const std::string& command, ExitCode code, const std::string& error,
                                       const std::vector<std::string>& summary,
                                       const std::vector<std::string>& rolled_back);

/// HoistRebooting: the reboot about to be asked for, for `what` ("app 2.0.0").
NodeEvent rebooting_event(const std::string& what);

}  // namespace hoist::cli
