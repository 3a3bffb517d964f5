#include "node_ready.hpp"

#include <memory>
#include <nlohmann/json.hpp>

#include "hoist/kube/own_node.hpp"
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

std::function<HealthLook(const std::string& kubelet_version)> node_ready_probe(
    std::shared_ptr<const OwnNode> own_node) {
  return [own_node = std::move(own_node)](const std::string& kubelet_version) -> HealthLook {
    const std::string node = in_quotes(own_node->name());
    try {
      const nlohmann::json object = own_node->read(std::chrono::steady_clock::now() + k_request_timeout);
      std::string reason;
      const std::string ready = ready_status(object, reason);
      const NodeView view = NodeView::from_json(object);
      const std::string kubelet = "kubelet " + escaped(view.kubelet_version);
      if (ready != "True") {
        return {false,
                "node " + node + " is not Ready (" +
                    (ready.empty() ? "no Ready condition"
                                   : "Ready=" + escaped(ready) + (reason.empty() ? "" : ", " + escaped(reason))) +
                    "; " + kubelet + ")"};
      }
      if (!kubelet_version.empty() && munge_version(view.kubelet_version) != munge_version(kubelet_version)) {
        return {false, "node " + node + " is Ready but its " + kubelet + " is not " + kubelet_version};
      }
      return {true, "node " + node + " is Ready (" + kubelet + ")"};
    } catch (const KubeError& e) {
      return {false, e.kind() == KubeError::Kind::not_found ? "node " + node + " does not exist" : e.what()};
    } catch (const Error& e) {
      return {false, e.what()};
    }
  };
}

}  // namespace hoist::cli
