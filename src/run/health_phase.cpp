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

// A first install of a sysext that systemd did not merge (or whose refresh failed): nothing to go back to, and an
// extension left linked would be merged by the next refresh or boot, unchecked. Its link is removed (the kept image
// stays), then the state records no current version, the version quarantined with `why`, and `owed_restarts` (the
// refresh, when one was done) owed, as a switch back does.
void withdraw(const HostRoot& root, const StateStore& store, ComponentState& state, Durability durability,
              const std::string& why, const std::vector<std::string>& owed_restarts) {
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
  state.owed_restarts = owed_restarts;
  store.save(state);
}

// Whether the failed checks withdraw `state`'s version: a first install whose own sysext did not merge.
bool withdraws(const ComponentState& state, const HealthVerdict& verdict) {
  return state.previous.empty() && state.kind == "sysext" &&
         verdict.failed_check == sysext_merge_check(state.destination).spec;
}

// One component that a failure after its switch leaves, and how it goes back.
struct Retreat {
  enum class How {
    switch_back,  ///< to its previous version (switch_back(), as `hoist rollback`)
    withdraw,     ///< a first install of a sysext: its link removed (withdraw())
    stay,         ///< a first install of another kind: nothing to go back to; it keeps what it owes
  };
  ComponentState state;
  How how = How::stay;
  std::vector<std::string> owed_restarts;  ///< what going back owes: the units that ran the version left
};

// Takes every component of `retreats` back as its How says, records `why` (rolled-back, or failed for one that
// stays), does the restarts going back owes (and, with AfterRestarts::reboot_per_policy, the reboot --reboot asks
// for), and throws hoist::Failure naming what went back, what was withdrawn and what stays.
[[noreturn]] void go_back(const Context& context, const StateStore& store, HostSteps& host,
                          std::vector<Retreat> retreats, const std::string& why, Quarantine quarantine,
                          Durability durability, Remount remount, AfterRestarts after, const char* command,
                          RunSummary* summary) {
  if (remount == Remount::yes) {
    // after_switch() made the mounts read-only again.
    std::vector<std::string> paths;
    for (const auto& retreat : retreats) {
      if (retreat.how != Retreat::How::stay) {
        const auto& state = retreat.state;
        const auto written =
            paths_written(parse_component_kind(state.kind), state.destination, store.component_dir(state.component));
        paths.insert(paths.end(), written.begin(), written.end());
      }
    }
    host.make_writable(paths);
  }
  std::vector<SwitchedComponent> switched;
  std::string back;
  std::string stuck;
  std::string withdrawn;
  for (auto& retreat : retreats) {
    ComponentState& state = retreat.state;
    const std::string failed = state.current;
    if (retreat.how != Retreat::How::stay) {
      state.pending_reboot.reset();  // a reboot into the version left is owed no more
    }
    switch (retreat.how) {
      case Retreat::How::withdraw:
        spdlog::error("{}: {}; no previous version: withdrawing {}", state.component, why, failed);
        state.owed_health_checks.clear();
        set_last_result(state, command, outcome::k_rolled_back, failed, why + "; withdrawn, no previous version");
        withdraw(context.root(), store, state, durability, why, retreat.owed_restarts);
        if (quarantine == Quarantine::no) {
          std::erase_if(state.quarantined, [&](const QuarantinedVersion& q) { return q.version == failed; });
          store.save(state);
        }
        switched.push_back(SwitchedComponent{state.component, parse_component_kind(state.kind), "", true});
        withdrawn += (withdrawn.empty() ? "" : ", ") + state.component + " " + failed;
        break;
      case Retreat::How::stay:
        // Nothing to go back to: what it owes stays owed, so every run tries again and fails until it passes.
        set_last_result(state, command, outcome::k_failed, failed, why + "; no previous version to switch back to");
        store.save(state);
        stuck += (stuck.empty() ? "" : ", ") + state.component + " " + failed;
        break;
      case Retreat::How::switch_back: {
        const std::string target = state.previous;
        spdlog::error("{}: {}; switching back to {}", state.component, why, target);
        set_last_result(state, command, outcome::k_rolled_back, failed, why + "; switched back to " + target);
        switch_back(context.root(), store, state, target, durability, why, retreat.owed_restarts, quarantine);
        switched.push_back(SwitchedComponent{state.component, parse_component_kind(state.kind), target, true});
        back += (back.empty() ? "" : ", ") + state.component + " " + target;
        if (summary != nullptr) {
          summary->rolled_back.push_back(state.component + " " + failed + " -> " + target + ": " + why);
        }
        break;
      }
    }
  }
  std::string restarting;
  if (!switched.empty()) {
    try {
      host.after_switch(store, switched, after);
    } catch (const AfterSwitchFailure& e) {
      // The versions went back on disk; what runs them could not be restarted: owed to the next run.
      restarting = "; then " + std::string(e.what());
    }
  }
  throw Failure(why + (back.empty() ? "" : "; switched back to " + back) +
                (withdrawn.empty() ? "" : "; withdrew " + withdrawn + ", which had no previous version") +
                (stuck.empty() ? "" : "; " + stuck + " stays, with no previous version") + restarting);
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
  // The checks ran after the restarts (or the boot): the version was started, so going back restarts (or reboots)
  // again, and --reboot always needs a boot of its own even after a confirmed one.
  host.forget_confirmed_reboot();
  std::vector<Retreat> retreats;
  for (auto& state : owing) {
    state.health = HealthRecord{state.current, "failed", verdict.failed_check, verdict.detail, now};
    const ComponentKind kind = parse_component_kind(state.kind);
    const Retreat::How how = withdraws(state, verdict) ? Retreat::How::withdraw
                             : state.previous.empty()  ? Retreat::How::stay
                                                       : Retreat::How::switch_back;
    retreats.push_back(Retreat{std::move(state), how, host.restarts_owed_by(kind)});
  }
  go_back(context, store, host, std::move(retreats), why, Quarantine::yes, durability, remount,
          AfterRestarts::reboot_per_policy, command, summary);
}

[[noreturn]] void give_up_after_switch(const Context& context, const StateStore& store, HostSteps& host,
                                       const std::vector<BeforeHostSteps>& components,
                                       const AfterSwitchFailure& failure, Durability durability, Remount remount,
                                       const char* command, RunSummary* summary) {
  std::vector<Retreat> retreats;
  for (const auto& before : components) {
    auto state = store.load(before.name);
    if (!state || (!before.changed && before.owed_restarts.empty())) {
      continue;  // not touched by the failure
    }
    // What the component owed and the failed call asked systemd for runs something else now than before.
    std::vector<std::string> restarted;
    for (const auto& unit : before.owed_restarts) {
      if (std::find(failure.restarted().begin(), failure.restarted().end(), unit) != failure.restarted().end()) {
        restarted.push_back(unit);
      }
    }
    Retreat::How how = Retreat::How::stay;
    if (!state->previous.empty()) {
      // A previous version that a rollback left (quarantined) means the current one came from a switch back:
      // going "back" would go forward to what failed. It stays, with its restarts owed.
      if (find_quarantined(*state, state->previous) != nullptr) {
        continue;
      }
      how = Retreat::How::switch_back;
    } else if (before.changed && state->kind == to_string(ComponentKind::sysext)) {
      how = Retreat::How::withdraw;
    }
    retreats.push_back(Retreat{std::move(*state), how, std::move(restarted)});
  }
  if (retreats.empty()) {
    throw failure;
  }
  // Nothing booted the versions left, so going back needs no reboot; only the units restarted run them.
  go_back(context, store, host, std::move(retreats), failure.what(),
          failure.unit_failed() ? Quarantine::yes : Quarantine::no, durability, remount, AfterRestarts::no_reboot,
          command, summary);
}

}  // namespace hoist
