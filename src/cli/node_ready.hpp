#pragma once

#include <functional>
#include <string>

#include "hoist/host/health_check.hpp"
#include "hoist/model/context.hpp"

namespace hoist::cli {

/// The `node-ready` health check's look at the cluster: the Node named by SYSTEM_UPGRADE_NODE_NAME, through the
/// Job's service account (RBAC `get`/`list` on nodes), is Ready, and reports `kubelet_version` when one is given
/// (compared with '+' as '-', as SUC munges). The client is made at the first look; any API error is a look that
/// did not pass, with the error (never the token) as its detail. Throws UsageError when the node name is unset,
/// since the check could never pass.
std::function<HealthLook(const std::string& kubelet_version)> node_ready_probe(const Context& context);

}  // namespace hoist::cli
