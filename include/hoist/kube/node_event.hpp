#pragma once

#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

#include "hoist/kube/kube_client.hpp"

namespace hoist {

/// What hoist tells the cluster about the node it ran on: an Event that `kubectl describe node` and
/// `kubectl get events` list, kept by the API server after SUC has collected the Job, its pod and its logs.
struct NodeEvent {
  enum class Type { normal, warning };
  Type type = Type::normal;
  std::string reason;  ///< UpperCamelCase, e.g. "HoistUpgraded"
  std::string action;  ///< what hoist did, e.g. "Upgrade"
  std::string note;    ///< for people; cut to the API's 1 KiB
};

/// The namespace of events about cluster-scoped objects such as Nodes: the API server refuses any other for them,
/// and the kubelet posts its own Node events there.
inline constexpr const char* k_node_event_namespace = "default";

/// The events.k8s.io/v1 Event about Node `node`: `regarding` the Node (its uid given as its name, as the kubelet
/// gives it: `kubectl describe node` looks events up by either), reportingController "hoist", reportingInstance
/// the node's name, eventTime `now`, the note cut at a character boundary to 1024 bytes.
nlohmann::json node_event_object(const std::string& node, const NodeEvent& event,
                                 std::chrono::system_clock::time_point now);

/// Creates that Event in k_node_event_namespace. Throws KubeError (never naming the token).
void post_node_event(const KubeClient& client, const std::string& node, const NodeEvent& event, Deadline deadline);

}  // namespace hoist
