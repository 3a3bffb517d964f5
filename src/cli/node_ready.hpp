#pragma once

#include <functional>
#include <memory>
#include <string>

#include "hoist/host/health_check.hpp"
#include "hoist/kube/own_node.hpp"

namespace hoist::cli {

/// The `node-ready` health check's look at the cluster: `own_node` is Ready, and reports `kubelet_version` when
/// one is given (compared with '+' as '-', as SUC munges). Any API error is a look that did not pass, with the
/// error (never the token) as its detail.
std::function<HealthLook(const std::string& kubelet_version)> node_ready_probe(std::shared_ptr<const OwnNode> own_node);

}  // namespace hoist::cli
