#include "node_events.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <exception>

#include "hoist/kube/kube_client.hpp"
#include "hoist/kube/kube_config.hpp"
#include "hoist/util/text.hpp"

namespace hoist::cli {

namespace {

// An event is a courtesy to the operator: it must not hold up a run that is done, nor the reboot after it.
constexpr std::chrono::seconds k_event_timeout{10};

}  // namespace

void tell_node(const Context& context, const NodeEvent& event) {
  const SucContext& suc = context.suc;
  if (suc.node_name.empty()) {
    return;  // not a SUC Job: no node to tell
  }
  if (suc.kubernetes_service_host.empty() || suc.service_account_dir.empty()) {
    spdlog::debug("no event {} on node '{}': no service account or KUBERNETES_SERVICE_HOST", event.reason,
                  escaped(suc.node_name));
    return;
  }
  // SUC retries a failed pod until the Job's backoff limit or deadline: each says the same for the same Plan
  // version, which one Event counts (series.count) instead of one Event a pod.
  NodeEvent counted = event;
  if (!suc.plan_latest_hash.empty()) {
    counted.series = suc.plan_name + "@" + suc.plan_latest_hash;
  }
  try {
    const KubeClient client(KubeConfig::in_cluster(suc));
    post_node_event(client, suc.node_name, counted, std::chrono::steady_clock::now() + k_event_timeout);
    spdlog::debug("posted event {} on node '{}'", event.reason, escaped(suc.node_name));
  } catch (const std::exception& e) {
    spdlog::warn("could not post event {} on node '{}' (the run's outcome stands): {}", event.reason,
                 escaped(suc.node_name), e.what());
  }
}

std::optional<NodeEvent> outcome_event(const std::string& command, ExitCode code, const std::string& error,
                                       const std::vector<std::string>& summary,
                                       const std::vector<std::string>& rolled_back) {
  NodeEvent event;
  const bool ok = code == ExitCode::ok;
  if (command == "upgrade" && !rolled_back.empty()) {
    // `kubectl describe node` must say that the node is back on its old version, and why, not only that the
    // upgrade failed.
    event = NodeEvent{NodeEvent::Type::warning, "HoistRolledBack", "Rollback",
                      "hoist upgrade: rolled back (exit " + std::to_string(static_cast<int>(code)) + "):", ""};
    std::string separator = " ";
    for (const std::string& line : rolled_back) {
      event.note += separator + escaped(line);
      separator = "; ";
    }
    for (const std::string& line : summary) {
      event.note += "; " + escaped(line);
    }
    return event;
  }
  if (command == "upgrade") {
    event.action = "Upgrade";
    event.reason = ok ? "HoistUpgraded" : "HoistUpgradeFailed";
  } else if (command == "rollback") {
    event.action = "Rollback";
    event.reason = ok ? "HoistRolledBack" : "HoistRollbackFailed";
  } else if (command == "stage") {
    // A Plan's prepare step: a refusal here is one before SUC cordons the node, which says so.
    event.action = "Stage";
    event.reason = ok ? "HoistStaged" : "HoistStageFailed";
  } else {
    return std::nullopt;
  }
  event.type = ok ? NodeEvent::Type::normal : NodeEvent::Type::warning;
  event.note = "hoist " + command + ": " +
               (ok ? std::string("succeeded")
                   : "failed (exit " + std::to_string(static_cast<int>(code)) + "): " + escaped(error));
  for (const std::string& line : summary) {
    event.note += "; " + escaped(line);
  }
  return event;
}

NodeEvent rebooting_event(const std::string& what) {
  return NodeEvent{NodeEvent::Type::normal, "HoistRebooting", "Reboot", "hoist: rebooting for " + escaped(what), ""};
}

}  // namespace hoist::cli
