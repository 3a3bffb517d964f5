#include "health_phase.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "hoist/host/boot_id.hpp"
#include "hoist/host/interrupted.hpp"
#include "hoist/host/writable_mounts.hpp"
#include "hoist/install/installer.hpp"
#include "hoist/model/component.hpp"
#include "hoist/model/state_update.hpp"
#include "hoist/run/rollback_run.hpp"
#include "hoist/util/error.hpp"
#include "sysext_merge.hpp"

namespace hoist {

namespace {

// A first install of a sysext that systemd did not merge: nothing to go back to, and an extension left linked would
// be merged by the next refresh or boot, unchecked. Its link is removed (the kept image stays), then the state records
// no current version, the version quarantined with `why`, and the refresh owed, as a switch back does.
void withdraw(const HostRoot& root, const StateStore& store, HostSteps& host, ComponentState& state,
              Durability durability, const std::string& why) {
  const ComponentKind kind = parse_component_kind(state.kind);
  auto installer =
      make_installer(root, InstallTarget{state.component, kind, state.destination, store.state_dir()}, durability);
  // The link first: a run killed before the save below finds the version recorded but not linked, repairs it,
  // checks it again and withdraws it again; the other order could leave it linked and recorded as not current.
  installer->withdraw();
  spdlog::info("{}: removed the link {} to {}", state.component, root.display(state.destination), state.current);
  std::erase_if(state.quarantined, [&](const QuarantinedVersion& q) { return q.version == state.current; });
  state.quarantined.push_back(QuarantinedVersion{state.current, now_rfc3339(), why});
  state.current.clear();
  state.boot_id = read_boot_id(root);
  for (const auto& unit : host.restarts_owed_by(kind)) {
    if (std::find(state.owed_restarts.begin(), state.owed_restarts.end(), unit) == state.owed_restarts.end()) {
      state.owed_restarts.push_back(unit);
    }
  }
  store.save(state);
}

// Whether the failed checks withdraw `state`'s version: a first install whose own sysext did not merge.
bool withdraws(const ComponentState& state, const HealthVerdict& verdict) {
  return state.previous.empty() && state.kind == "sysext" &&
         verdict.failed_check == sysext_merge_check(state.destination).spec;
}

}  // namespace

std::vector<std::string> specs_of(const std::vector<HealthCheck>& checks) {
  std::vector<std::string> specs;
  for (const auto& check : checks) {
    if (std::find(specs.begin(), specs.end(), check.spec) == specs.end()) {
      specs.push_back(check.spec);
    }
  }
  return specs;
}

void run_health_phase(const Context& context, const StateStore& store, HostSteps& host,
                      const std::vector<std::string>& names, const HealthPolicy& policy, HealthProbes probes,
                      Durability durability, Remount remount, const char* command, RunSummary* summary) {
  std::vector<ComponentState> owing;
  HealthPolicy owed = policy;
  owed.checks.clear();
  for (const auto& name : names) {
    auto state = store.load(name);
    if (!state || state->owed_health_checks.empty()) {
      continue;
    }
    for (const auto& spec : state->owed_health_checks) {
      HealthCheck check;
      try {
        check = parse_health_check(spec);
      } catch (const UsageError& e) {
        throw Failure("corrupt state of " + name + ": an owed health check is not one: " + e.what());
      }
      if (std::none_of(owed.checks.begin(), owed.checks.end(), [&](const HealthCheck& c) { return c.spec == spec; })) {
        owed.checks.push_back(std::move(check));
      }
    }
    if (probes.kubelet_version.empty() && state->version_scheme == "k3s") {
      probes.kubelet_version = state->current;  // node-ready: the kubelet must be the k3s just installed
    }
    owing.push_back(std::move(*state));
  }
  if (owing.empty()) {
    return;
  }
  std::string targets;
  for (const auto& state : owing) {
    targets += (targets.empty() ? "" : ", ") + state.component + " " + state.current;
  }
  throw_if_interrupted("checking the health of " + targets);
  probes.bus = [&host]() -> SystemBus& { return host.bus(); };
  if (!probes.sysext_merged) {
    probes.sysext_merged = [&context, namespace_path = host.mount_namespace_path()](const std::string& destination) {
      return look_at_sysext_merge(context.root(), namespace_path, destination);
    };
  }
  const HealthVerdict verdict = wait_until_healthy(owed, probes);
  const std::string now = now_rfc3339();

  if (verdict.healthy) {
    for (auto& state : owing) {
      state.owed_health_checks.clear();
      state.health = HealthRecord{state.current, "passed", "", describe(owed.checks), now};
      store.save(state);
    }
    spdlog::info("health: {} healthy", targets);
    return;
  }

  const std::string why =
      "health check " + verdict.failed_check +
      (verdict.final ? " failed: " : " did not pass within " + std::to_string(policy.timeout.count()) + " s: ") +
      verdict.detail;
  std::vector<SwitchedComponent> switched;
  std::string stuck;
  std::string withdrawn;
  if (remount == Remount::yes) {
    std::vector<std::string> paths;
    for (const auto& state : owing) {
      if (!state.previous.empty() || withdraws(state, verdict)) {
        const auto written =
            paths_written(parse_component_kind(state.kind), state.destination, store.component_dir(state.component));
        paths.insert(paths.end(), written.begin(), written.end());
      }
    }
    host.make_writable(paths);
  }
  host.forget_confirmed_reboot();
  for (auto& state : owing) {
    const std::string failed = state.current;
    state.health = HealthRecord{failed, "failed", verdict.failed_check, verdict.detail, now};
    if (withdraws(state, verdict)) {
      spdlog::error("{}: {}; no previous version: withdrawing {}", state.component, why, failed);
      state.owed_health_checks.clear();
      set_last_result(state, command, outcome::k_rolled_back, failed, why + "; withdrawn, no previous version");
      withdraw(context.root(), store, host, state, durability, why);
      switched.push_back(SwitchedComponent{state.component, parse_component_kind(state.kind), "", true});
      withdrawn += (withdrawn.empty() ? "" : ", ") + state.component + " " + failed;
      continue;
    }
    if (state.previous.empty()) {
      // Nothing to go back to: the debt stays, so every run checks again and fails until the version is healthy.
      set_last_result(state, command, outcome::k_failed, failed, why + "; no previous version to switch back to");
      store.save(state);
      stuck += (stuck.empty() ? "" : ", ") + state.component + " " + failed;
      continue;
    }
    const std::string target = state.previous;
    spdlog::error("{}: {}; switching back to {}", state.component, why, target);
    set_last_result(state, command, outcome::k_rolled_back, failed, why + "; switched back to " + target);
    switch_back(context.root(), store, host, state, target, durability, why);
    switched.push_back(SwitchedComponent{state.component, parse_component_kind(state.kind), target, true});
    if (summary != nullptr) {
      summary->rolled_back.push_back(state.component + " " + failed + " -> " + target + ": " + why);
    }
  }
  if (!switched.empty()) {
    host.after_switch(store, switched);
  }
  std::string back;
  for (const auto& component : switched) {
    if (!component.version.empty()) {
      back += (back.empty() ? "" : ", ") + component.name + " " + component.version;
    }
  }
  throw Failure(why + (back.empty() ? "" : "; switched back to " + back) +
                (withdrawn.empty() ? "" : "; withdrew " + withdrawn + ", which had no previous version") +
                (stuck.empty() ? "" : "; " + stuck + " stays, with no previous version"));
}

}  // namespace hoist
