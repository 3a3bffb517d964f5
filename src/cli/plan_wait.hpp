#pragma once

#include <string>

#include "hoist/kube/kube_config.hpp"
#include "hoist/model/context.hpp"

namespace hoist::cli {

/// The cluster of `hoist prepare` and of `hoist stage --wait-for-plan`, found as kubectl finds it: `kubeconfig`
/// (--kubeconfig), else KUBECONFIG (a ':'-separated list, merged), else ~/.kube/config, else the pod's service
/// account. `kube_context` (--context) picks a kubeconfig's context. Throws UsageError for what cannot be used.
KubeConfig load_kube_config(const Context& context, const std::string& kubeconfig, const std::string& kube_context);

/// What `hoist prepare PLAN` waits for, and `hoist stage --wait-for-plan PLAN` before it stages.
struct PlanWait {
  std::string plan;
  std::string namespace_;  ///< "" for the kubeconfig context's, or the service account's
  double timeout_seconds = 840;
  std::string node_version;  ///< "" for none
  std::string kubeconfig;
  std::string kube_context;
};

/// Refuses a Plan name that Kubernetes would (UsageError), then waits until the Plan is complete
/// (wait_for_plan(): its status.applying empty and every node its selector picks labelled with its latest hash,
/// and with `node_version`, running that kubelet); a Plan that SUC marked failed fails at once (hoist::Failure),
/// the timeout too. Returns the line the termination message carries ("plan 'k3s-server': 3/3 nodes done at ...").
std::string wait_for_plan_of_job(const Context& context, const PlanWait& wait);

}  // namespace hoist::cli
