#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "hoist/kube/label_selector.hpp"

namespace hoist {

/// What `prepare` needs to know of a Node.
struct NodeView {
  std::string name;
  Labels labels;
  std::string kubelet_version;  ///< status.nodeInfo.kubeletVersion

  /// Reads a Node object; throws hoist::Failure when it has no metadata.name.
  static NodeView from_json(const nlohmann::json& node);
};

/// Only what prepare reads of a Node (name, labels, kubelet version): in a big
/// cluster the full objects (images, conditions) are most of the memory. With
/// `label_keys`, only the labels with those keys are kept (those a Plan's selector
/// and its label read: a dozen labels a node cost more than the rest of it). Any
/// JSON value is taken; what is not there, or of another type, is left out.
nlohmann::json trim_node(nlohmann::json&& node, const std::set<std::string>* label_keys = nullptr);

/// The label keys prepare reads of a node for a Plan with `selector`: the keys of its
/// requirements, and the Plan's label.
std::set<std::string> node_label_keys(const LabelSelector& selector, const std::string& plan);

/// The nodes known from the API, by name.
using NodeMap = std::map<std::string, NodeView>;

/// How far a Plan is, as `hoist prepare` judges it. The Plan is complete when SUC
/// resolved it (status.latestHash set, and status.latestVersion matching
/// spec.version when one is set), status.applying is empty, and every node its
/// selector picks carries `plan.upgrade.cattle.io/<plan>=<latestHash>` (and, when a
/// node version is asked for, reports that kubelet version). It has failed when SUC
/// says that one of its Jobs failed (its Complete condition False, reason JobFailed).
struct PlanProgress {
  enum class State {
    missing,     ///< no such Plan (yet): wait
    unresolved,  ///< SUC has not digested the current spec yet: wait
    invalid,     ///< the Plan's nodeSelector is invalid, SUC will not apply it: wait for a fix
    waiting,     ///< resolved, but nodes are applying or not yet labeled
    failed,      ///< resolved, and a Job of its latest version failed: SUC runs it no more until the Plan changes
    complete,
  };

  State state = State::missing;
  std::string detail;                      ///< why unresolved, invalid or failed (failed: SUC's message)
  std::string latest_hash;                 ///< status.latestHash
  std::vector<std::string> applying;       ///< status.applying (hostnames), as SUC wrote it
  std::vector<std::string> done;           ///< selected nodes at the latest hash (and version), sorted
  std::vector<std::string> pending;        ///< selected nodes not done yet, sorted
  std::vector<std::string> wrong_version;  ///< pending nodes labeled but on another kubelet version
  std::optional<LabelSelector> selector;   ///< the node selector, when the Plan exists and is valid

  [[nodiscard]] bool complete() const { return state == State::complete; }

  /// One progress line, e.g. "plan 'k3s-server': 1/3 nodes done; applying: b; waiting for: b, c"; a list of
  /// more than 10 nodes is cut to its first 10 and "and N more".
  [[nodiscard]] std::string summary(const std::string& plan) const;

  friend bool operator==(const PlanProgress&, const PlanProgress&) = default;
};

/// Names joined with ", ", as progress lines list nodes.
std::string join_names(const std::vector<std::string>& names);

/// SUC's munging of versions for labels and env: every '+' becomes '-'.
std::string munge_version(std::string version);

/// Judges `plan` (nullptr: it does not exist) against `nodes`. `node_version`, when
/// set, is compared with each selected node's kubelet version, both munged.
PlanProgress evaluate_plan(const std::string& plan_name, const nlohmann::json* plan, const NodeMap& nodes,
                           const std::optional<std::string>& node_version);

}  // namespace hoist
