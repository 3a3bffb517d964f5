#include "hoist/kube/plan_progress.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "hoist/util/error.hpp"

namespace hoist {

namespace {

// A nested string field, or "" when any step is missing or of another type:
// objects from the API omit empty fields.
std::string string_at(const nlohmann::json& object, std::initializer_list<const char*> path) {
  const nlohmann::json* at = &object;
  for (const char* key : path) {
    if (!at->is_object()) {
      return {};
    }
    const auto it = at->find(key);
    if (it == at->end()) {
      return {};
    }
    at = &*it;
  }
  return at->is_string() ? at->get<std::string>() : std::string();
}

// The first k_summary_names names joined, and how many more there are: a progress line is logged at every
// change, and one that named all of 5,000 pending nodes each time would be most of prepare's work.
constexpr std::size_t k_summary_names = 10;

std::string join_first_names(const std::vector<std::string>& names) {
  if (names.size() <= k_summary_names) {
    return join_names(names);
  }
  return join_names({names.begin(), names.begin() + k_summary_names}) + " and " +
         std::to_string(names.size() - k_summary_names) + " more";
}

// A Job of the Plan that failed, as system-upgrade-controller records it (pkg/upgrade/handle_batch.go of
// rancher/system-upgrade-controller, v0.15.3 to v0.20.1 alike): when a Job's own Failed condition is true
// (its backoffLimit spent, or its activeDeadlineSeconds passed), SUC sets the Plan's condition of type
// "Complete" to status "False", reason "JobFailed", message "Job <namespace>/<job> failed on Node <node>:
// <the Job condition's reason>: <its message>" (PlanComplete.SetError in pkg/apis/condition/condition.go).
// SUC clears it when the Plan resolves a new version (reason "Resolved", pkg/upgrade/handle_upgrade.go) or
// its applying list changes (reason "SyncJob"), and sets it True, reason "Complete", when no node is left.
// The condition fields are wrangler's GenericCondition: type, status, reason, message, lastUpdateTime.
std::optional<std::string> failed_job(const nlohmann::json& plan) {
  const auto status = plan.find("status");
  if (status == plan.end() || !status->is_object()) {
    return std::nullopt;
  }
  const auto conditions = status->find("conditions");
  if (conditions == status->end() || !conditions->is_array()) {
    return std::nullopt;
  }
  for (const auto& condition : *conditions) {
    if (string_at(condition, {"type"}) == "Complete" && string_at(condition, {"status"}) == "False" &&
        string_at(condition, {"reason"}) == "JobFailed") {
      const std::string message = string_at(condition, {"message"});
      return message.empty() ? std::string("a Job failed (no message)") : message;
    }
  }
  return std::nullopt;
}

}  // namespace

nlohmann::json trim_node(nlohmann::json&& node, const std::set<std::string>* label_keys) {
  nlohmann::json trimmed = nlohmann::json::object();
  trimmed["metadata"]["name"] = string_at(node, {"metadata", "name"});
  if (node.is_object()) {
    if (const auto metadata = node.find("metadata"); metadata != node.end() && metadata->is_object()) {
      if (const auto labels = metadata->find("labels"); labels != metadata->end() && labels->is_object()) {
        if (label_keys == nullptr) {
          trimmed["metadata"]["labels"] = std::move(*labels);
        } else {
          auto& kept = trimmed["metadata"]["labels"] = nlohmann::json::object();
          for (const auto& key : *label_keys) {
            if (const auto label = labels->find(key); label != labels->end()) {
              kept[key] = std::move(*label);
            }
          }
        }
      }
    }
  }
  trimmed["status"]["nodeInfo"]["kubeletVersion"] = string_at(node, {"status", "nodeInfo", "kubeletVersion"});
  return trimmed;
}

std::set<std::string> node_label_keys(const LabelSelector& selector, const std::string& plan) {
  std::set<std::string> keys{plan_label(plan)};
  for (const auto& requirement : selector.requirements()) {
    keys.insert(requirement.key);
  }
  return keys;
}

NodeView NodeView::from_json(const nlohmann::json& node) {
  NodeView view;
  view.name = string_at(node, {"metadata", "name"});
  if (view.name.empty()) {
    throw Failure("a node from the API has no metadata.name");
  }
  if (const auto& metadata = node.at("metadata"); metadata.contains("labels") && metadata["labels"].is_object()) {
    for (const auto& [key, value] : metadata["labels"].items()) {
      if (value.is_string()) {
        view.labels.emplace(key, value.get<std::string>());
      }
    }
  }
  view.kubelet_version = string_at(node, {"status", "nodeInfo", "kubeletVersion"});
  return view;
}

std::string join_names(const std::vector<std::string>& names) {
  std::string text;
  for (const auto& name : names) {
    if (!text.empty()) {
      text += ", ";
    }
    text += name;
  }
  return text;
}

std::string munge_version(std::string version) {
  std::replace(version.begin(), version.end(), '+', '-');
  return version;
}

PlanProgress evaluate_plan(const std::string& plan_name, const nlohmann::json* plan, const NodeMap& nodes,
                           const std::optional<std::string>& node_version) {
  PlanProgress progress;
  if (plan == nullptr) {
    progress.state = PlanProgress::State::missing;
    return progress;
  }
  try {
    progress.selector = plan_node_selector(*plan);
  } catch (const UsageError& error) {
    progress.state = PlanProgress::State::invalid;
    progress.detail = error.what();
    return progress;
  }
  progress.latest_hash = string_at(*plan, {"status", "latestHash"});
  if (const auto status = plan->find("status"); status != plan->end() && status->is_object()) {
    if (const auto applying = status->find("applying"); applying != status->end() && applying->is_array()) {
      for (const auto& host : *applying) {
        if (host.is_string()) {
          progress.applying.push_back(host.get<std::string>());
        }
      }
    }
  }
  std::sort(progress.applying.begin(), progress.applying.end());

  const std::string spec_version = string_at(*plan, {"spec", "version"});
  const std::string latest_version = string_at(*plan, {"status", "latestVersion"});
  if (progress.latest_hash.empty()) {
    progress.state = PlanProgress::State::unresolved;
    progress.detail = "no status.latestHash yet";
    return progress;
  }
  // Right after the spec changes, the status still describes the old version and
  // every node may carry the old hash: that must not read as "complete".
  if (!spec_version.empty() && latest_version != munge_version(spec_version)) {
    progress.state = PlanProgress::State::unresolved;
    progress.detail =
        "status.latestVersion '" + latest_version + "' does not match spec.version '" + spec_version + "' yet";
    return progress;
  }

  // The status describes the latest version (checked above): a Job of it failed, and SUC starts it no more.
  if (auto failure = failed_job(*plan)) {
    progress.state = PlanProgress::State::failed;
    progress.detail = std::move(*failure);
  }

  const std::string label = plan_label(plan_name);
  const std::optional<std::string> target = node_version ? std::optional(munge_version(*node_version)) : std::nullopt;
  for (const auto& [name, node] : nodes) {
    if (!progress.selector->matches(node.labels)) {
      continue;
    }
    const auto it = node.labels.find(label);
    const bool labeled = it != node.labels.end() && it->second == progress.latest_hash;
    const bool right_version = !target || munge_version(node.kubelet_version) == *target;
    if (labeled && right_version) {
      progress.done.push_back(name);
    } else {
      progress.pending.push_back(name);
      if (labeled) {
        progress.wrong_version.push_back(name);
      }
    }
  }
  if (progress.state == PlanProgress::State::failed) {
    return progress;
  }
  progress.state = progress.applying.empty() && progress.pending.empty() ? PlanProgress::State::complete
                                                                         : PlanProgress::State::waiting;
  return progress;
}

std::string PlanProgress::summary(const std::string& plan) const {
  const std::string name = "plan '" + plan + "'";
  switch (state) {
    case State::missing: return name + " does not exist yet; waiting for it to be created";
    case State::unresolved: return name + " is not resolved by system-upgrade-controller yet (" + detail + ")";
    case State::invalid: return name + " has an invalid node selector, waiting for it to be fixed: " + detail;
    case State::failed:
      return name + " has failed: system-upgrade-controller says: " + detail +
             (pending.empty() ? std::string() : " (nodes not done: " + join_first_names(pending) + ")");
    case State::waiting:
    case State::complete: break;
  }
  const size_t selected = done.size() + pending.size();
  std::string text = name + ": " + std::to_string(done.size()) + "/" + std::to_string(selected) + " nodes done";
  if (state == State::complete) {
    return text + " at hash " + latest_hash + "; complete";
  }
  if (!applying.empty()) {
    text += "; applying: " + join_first_names(applying);
  }
  if (!pending.empty()) {
    text += "; waiting for: " + join_first_names(pending);
  }
  if (!wrong_version.empty()) {
    text += "; labeled but on another kubelet version: " + join_first_names(wrong_version);
  }
  return text;
}

}  // namespace hoist
