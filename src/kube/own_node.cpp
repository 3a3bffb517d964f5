#include "hoist/kube/own_node.hpp"

#include "hoist/model/suc_context.hpp"
#include "hoist/util/error.hpp"

namespace hoist {

namespace {

// The node's name, checked before anything else is read: without it there is no Node to ask for.
std::string node_name(const SucContext& suc, const std::string& needed_by) {
  if (suc.node_name.empty()) {
    throw UsageError(needed_by + " needs SYSTEM_UPGRADE_NODE_NAME (set in every SUC Job) to know its Node");
  }
  std::string missing;
  const auto note = [&missing](bool absent, const char* what) {
    if (absent) {
      missing += (missing.empty() ? "" : ", ") + std::string(what);
    }
  };
  note(suc.kubernetes_service_host.empty(), "KUBERNETES_SERVICE_HOST");
  note(suc.kubernetes_service_port.empty(), "KUBERNETES_SERVICE_PORT");
  note(suc.service_account_dir.empty(), "the service account at /var/run/secrets/kubernetes.io/serviceaccount");
  if (!missing.empty()) {
    throw UsageError(needed_by + " needs the Kubernetes API as a pod sees it, and " + missing +
                     (missing.find(", ") == std::string::npos ? " is" : " are") + " missing");
  }
  return suc.node_name;
}

}  // namespace

OwnNode::OwnNode(const SucContext& suc, const std::string& needed_by)
    : m_name(node_name(suc, needed_by)), m_client(KubeConfig::in_cluster(suc)) {}

nlohmann::json OwnNode::read(Deadline deadline) const {
  return m_client.get(KubeResource::nodes(), m_name, deadline);
}

}  // namespace hoist
