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
  /// What makes repeats of this event one series ("" for none): in a SUC Job, the Plan and its hash, so that
  /// the same outcome of every pod SUC retries for one Plan version is counted on one Event.
  std::string series;
};

/// The namespace of events about cluster-scoped objects such as Nodes: the API server refuses any other for them,
/// and the kubelet posts its own Node events there.
inline constexpr const char* k_node_event_namespace = "default";

/// The events.k8s.io/v1 Event about Node `node`: `regarding` the Node (its uid given as its name, as the kubelet
/// gives it: `kubectl describe node` looks events up by either), reportingController "hoist", reportingInstance
/// the node's name, eventTime `now`, the note cut at a character boundary to 1024 bytes. Its name is the node's
/// and `now` in hex nanoseconds, or, for an event of a series, the node's and a digest of the series and of what
/// the event says: the name a repeat finds.
nlohmann::json node_event_object(const std::string& node, const NodeEvent& event,
                                 std::chrono::system_clock::time_point now);

/// The JSON merge patch that counts one more occurrence of the series Event `existing` at `now`, as
/// events.k8s.io/v1 counts repeats: series.count 2 for the first repeat (a first occurrence carries no series),
/// one more for each after it, and series.lastObservedTime `now`; metadata.resourceVersion `existing`'s, so that
/// a change made meanwhile is a conflict rather than a lost count.
nlohmann::json node_event_series_patch(const nlohmann::json& existing, std::chrono::system_clock::time_point now);

/// Creates that Event in k_node_event_namespace; when the event belongs to a series whose Event exists already,
/// counts this occurrence on it instead (GET, then a PATCH of node_event_series_patch(), again after a conflict).
/// Throws KubeError (never naming the token).
void post_node_event(const KubeClient& client, const std::string& node, const NodeEvent& event, Deadline deadline);

}  // namespace hoist
