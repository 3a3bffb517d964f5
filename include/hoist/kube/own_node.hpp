#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "hoist/kube/kube_client.hpp"

namespace hoist {

struct SucContext;

/// The Node this SUC Job runs on (SYSTEM_UPGRADE_NODE_NAME), read through the pod's service account (the
/// in-cluster config) with one GET of /api/v1/nodes/NAME: RBAC `get` on nodes, nothing more. The one way hoist
/// reads its own Node.
class OwnNode {
 public:
  /// Throws UsageError beginning with `needed_by` (the flag or manifest key that wants the Node) and naming what
  /// is missing, SYSTEM_UPGRADE_NODE_NAME or the in-cluster config (KUBERNETES_SERVICE_HOST and _PORT, the
  /// service account): outside a Job, what asked could never be answered. Reads the service account's token and
  /// CA (hoist::Failure when they cannot be read); connects to nothing yet.
  OwnNode(const SucContext& suc, const std::string& needed_by);

  /// SYSTEM_UPGRADE_NODE_NAME, as given.
  [[nodiscard]] const std::string& name() const noexcept { return m_name; }

  /// The Node object as the API server has it now. Throws KubeError (its message names the verb, the resource,
  /// the server and the HTTP status, never the token); `not_found` when there is no such Node.
  [[nodiscard]] nlohmann::json read(Deadline deadline) const;

 private:
  std::string m_name;
  KubeClient m_client;
};

}  // namespace hoist
