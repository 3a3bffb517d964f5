#include "node_ready.hpp"

#include <memory>
#include <nlohmann/json.hpp>

#include "hoist/kube/kube_client.hpp"
#include "hoist/kube/plan_progress.hpp"
#include "hoist/util/error.hpp"
#include "hoist/util/text.hpp"

namespace hoist::cli {

namespace {

constexpr std::chrono::seconds k_request_timeout{15};

// The Ready condition of a Node object: "True", "False", "Unknown", or "" when it has none.
std::string ready_status(const nlohmann::json& node, std::string& reason) {
  const auto status = node.find("status");
  if (status == node.end() || !status->is_object()) {
    return {};
  }
  const auto conditions = status->find("conditions");
  if (conditions == status->end() || !conditions->is_array()) {
    return {};
  }
  for (const auto& condition : *conditions) {
    if (condition.is_object() && condition.value("type", "") == "Ready") {
      reason = condition.value("reason", "");
      return condition.value("status", "");
    }
  }
  return {};
}

}  // namespace

std::function<HealthLook(const std::string& kubelet_version)> node_ready_probe(const Context& context) {
  const std::string node = context.suc.node_name;
  if (node.empty()) {
    throw UsageError("--health-check node-ready needs SYSTEM_UPGRADE_NODE_NAME (set in every SUC Job) to know its "
                     "Node");
  }
  auto client = std::make_shared<std::unique_ptr<KubeClient>>();
  const SucContext suc = context.suc;
  return [client, suc, node](const std::string& kubelet_version) -> HealthLook {
    try {
      if (!*client) {
        *client = std::make_unique<KubeClient>(KubeConfig::in_cluster(suc));
      }
      ListQuery query;
      query.field_selector = "metadata.name=" + node;
      const ObjectList list = (*client)->list(KubeResource::nodes(), query,
                                              std::chrono::steady_clock::now() + k_request_timeout);
      if (list.items.empty()) {
        return {false, "node " + in_quotes(node) + " does not exist"};
      }
      const nlohmann::json& object = list.items.front();
      std::string reason;
      const std::string ready = ready_status(object, reason);
      const NodeView view = NodeView::from_json(object);
      const std::string kubelet = "kubelet " + escaped(view.kubelet_version);
      if (ready != "True") {
        return {false, "node " + in_quotes(node) + " is not Ready (" + (ready.empty() ? "no Ready condition" :
                       "Ready=" + escaped(ready) + (reason.empty() ? "" : ", " + escaped(reason))) + "; " + kubelet + ")"};
      }
      if (!kubelet_version.empty() && munge_version(view.kubelet_version) != munge_version(kubelet_version)) {
        return {false, "node " + in_quotes(node) + " is Ready but its " + kubelet + " is not " + kubelet_version};
      }
      return {true, "node " + in_quotes(node) + " is Ready (" + kubelet + ")"};
    } catch (const Error& e) {
      return {false, e.what()};
    }
  };
}

}  // namespace hoist::cli
