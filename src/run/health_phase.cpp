#include "health_phase.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "datastore_snapshot.hpp"
#include "hoist/host/boot_id.hpp"
#include "hoist/host/interrupted.hpp"
#include "hoist/host/server_datastore.hpp"
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
    keep,         ///< a server whose datastore cannot follow a switch back: it stays on the failed version
  };
  ComponentState state;
  How how = How::stay;
  std::vector<std::string> owed_restarts;    ///< what going back owes: the units that ran the version left
  std::optional<ServerDatastore> server;     ///< the k3s or RKE2 server that runs it
  std::optional<DatastoreSnapshot> restore;  ///< switch_back: the snapshot put back before the switch
  std::string kept_why;                      ///< keep: why not, the snapshot and the steps
};

// "1.30" of "v1.30.1+k3s1": Kubernetes migrates its stored objects between minor versions, not within one.
std::string minor_of(const std::string& version) {
  std::string text = version;
  if (!text.empty() && (text.front() == 'v' || text.front() == 'V')) {
    text.erase(0, 1);
  }
  const size_t first = text.find('.');
  if (first == std::string::npos) {
    return text;
  }
  return text.substr(0, text.find_first_of(".-+", first + 1));
}

// How far a server's datastore lets `retreat` go back (docs/datastore.md, "When hoist switches back"): a restore
// of its snapshot first, a plain switch back, or none (How::keep). `ran`: whether the failed version was started.
void plan_datastore(const Context& context, const StateStore& store, HostSteps& host, Retreat& retreat, bool ran,
                    const DatastoreOptions& options) {
  ComponentState& state = retreat.state;
  if (retreat.how != Retreat::How::switch_back || state.kind != to_string(ComponentKind::file)) {
    return;
  }
  const std::string from = state.previous;
  const std::string to = state.current;
  try {
    retreat.server =
        find_server_datastore(context.root(), state.destination, host.restarts_owed_by(ComponentKind::file));
  } catch (const Failure& e) {
    retreat.how = Retreat::How::keep;
    retreat.kept_why = "cannot tell what its server's datastore is (" + std::string(e.what()) + ")";
    return;
  }
  if (!retreat.server) {
    return;
  }
  const ServerDatastore& server = *retreat.server;
  const DatastoreSnapshot* snapshot = nullptr;
  for (const auto& taken : state.datastore_snapshots) {
    if (taken.from == from && taken.to == to) {
      snapshot = &taken;
    }
  }
  if (!ran) {
    spdlog::info("{}: {} was never started, so the {} datastore is as {} left it", state.component, to,
                 to_string(server.kind), from);
    return;
  }
  const int members = etcd_member_count(options, server, snapshot);
  if (snapshot != nullptr && (snapshot->kind == "sqlite" || members == 1)) {
    retreat.restore = *snapshot;
    return;
  }
  if (minor_of(from) == minor_of(to) && server.kind != DatastoreKind::etcd) {
    spdlog::info("{}: {} and {} are one Kubernetes minor: the {} datastore needs no restore", state.component, from, to,
                 to_string(server.kind));
    return;
  }
  std::string why;
  if (server.kind == DatastoreKind::etcd && snapshot != nullptr) {
    why = members > 1 ? "etcd has " + std::to_string(members) + " members, and restoring it takes every server"
                      : "hoist cannot tell how many members etcd has, and a restore on one of several would split "
                        "the cluster";
  } else if (server.kind == DatastoreKind::etcd) {
    why = "there is no snapshot, and hoist cannot tell whether " + to + " moved etcd's data";
  } else {
    why = to + " is another Kubernetes minor than " + from + " and may have migrated the " +
          std::string(to_string(server.kind)) + " datastore, and there is no snapshot";
  }
  why += " (" + std::string(to_string(server.kind)) + ": " + server.location + ")";
  if (snapshot != nullptr) {
    why += "; the snapshot " + snapshot->path + " holds " + from + "'s datastore";
  }
  why += "; to go back: " + restore_steps(server, snapshot, from, state.component,
                                          kept_binary(store.state_dir(), state.component, from, state.destination),
                                          members == 1);
  retreat.how = Retreat::How::keep;
  retreat.kept_why = why;
}

// Takes every component of `retreats` back as its How says, records `why` (rolled-back, or failed for one that
// stays), does the restarts going back owes (and, with AfterRestarts::reboot_per_policy, the reboot --reboot asks
// for), and throws hoist::Failure naming what went back, what was withdrawn and what stays.
[[noreturn]] void go_back(const Context& context, const StateStore& store, HostSteps& host,
                          std::vector<Retreat> retreats, const std::string& why, Quarantine quarantine,
                          Durability durability, Remount remount, AfterRestarts after, const char* command,
                          RunSummary* summary, const DatastoreOptions& datastore,
                          const std::function<std::string(const std::string&)>& recheck = {}) {
  if (remount == Remount::yes) {
    // after_switch() made the mounts read-only again.
    std::vector<std::string> paths;
    for (const auto& retreat : retreats) {
      if (retreat.how != Retreat::How::stay && retreat.how != Retreat::How::keep) {
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
  std::string kept;
  std::string unswitched;   // components whose switch back failed: they stay on the failed version
  std::string restored_to;  // the version a restored datastore runs again, checked once more below
  for (auto& retreat : retreats) {
    ComponentState& state = retreat.state;
    const std::string failed = state.current;
    if (retreat.restore) {
      // The datastore first, with the server stopped: a switch back before it would start the old version on
      // what the new one wrote. A run killed here finds the link unchanged and goes back again.
      const ServerDatastore& server = *retreat.server;
      try {
        host.stop_unit(server.unit);
        if (retreat.restore->kind == "sqlite") {
          restore_sqlite(context.root(), server, *retreat.restore);
        } else {
          restore_etcd(context.root(), server, *retreat.restore,
                       kept_binary(store.state_dir(), state.component, state.previous, state.destination),
                       datastore.timeout);
        }
      } catch (const Failure& e) {
        retreat.how = Retreat::How::keep;
        retreat.kept_why =
            "restoring the snapshot " + retreat.restore->path + " failed: " + e.what() + "; to go back: " +
            restore_steps(server, &*retreat.restore, state.previous, state.component,
                          kept_binary(store.state_dir(), state.component, state.previous, state.destination),
                          retreat.restore->kind == "etcd");
        owe_restarts(state, {server.unit});  // stopped: it runs the kept version again
        switched.push_back(SwitchedComponent{state.component, ComponentKind::file, failed, false});
      }
    }
    if (retreat.how == Retreat::How::keep) {
      spdlog::error("{}: {}; not switching back to {}: {}", state.component, why, state.previous, retreat.kept_why);
      state.kept_for_datastore = KeptForDatastore{failed, now_rfc3339(), retreat.kept_why};
      set_last_result(state, command, outcome::k_failed, failed,
                      why + "; not switched back to " + state.previous + ": " + retreat.kept_why);
      store.save(state);
      kept += (kept.empty() ? "" : "; ") + state.component + " stays on " + failed + ", not switched back to " +
              state.previous + ": " + retreat.kept_why;
      continue;
    }
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
        try {
          switch_back(context.root(), store, state, target, durability, why, retreat.owed_restarts, quarantine);
        } catch (const Error& e) {
          // The previous version cannot be switched to (removed or damaged since): the failed one stays current,
          // its checks still owed, and the error names both failures. Not a usage error, whatever refused it.
          const std::string unable = "could not switch back to " + target + ": " + e.what();
          spdlog::error("{}: {}", state.component, unable);
          set_last_result(state, command, outcome::k_failed, failed, why + "; " + unable);
          store.save(state);
          unswitched += (unswitched.empty() ? "" : "; ") + state.component + " stays on " + failed + ", " + unable;
          break;
        }
        switched.push_back(SwitchedComponent{state.component, parse_component_kind(state.kind), target, true});
        back += (back.empty() ? "" : ", ") + state.component + " " + target +
                (retreat.restore ? " with its datastore restored from " + retreat.restore->path : "");
        if (retreat.restore) {
          restored_to = target;
        }
        if (summary != nullptr) {
          summary->rolled_back.push_back(state.component + " " + failed + " -> " + target + ": " + why);
        }
        break;
      }
      case Retreat::How::keep: break;  // handled above: it stays on the failed version
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
  // A restored datastore is checked once more on the version switched back to (docs/datastore.md).
  std::string rechecked;
  if (!restored_to.empty() && restarting.empty() && recheck) {
    const std::string failed_check = recheck(restored_to);
    rechecked = failed_check.empty() ? "; " + restored_to + " is healthy again"
                                     : "; " + restored_to + " did not pass its checks either: " + failed_check;
    if (failed_check.empty()) {
      spdlog::info("health: {} healthy again on its restored datastore", restored_to);
    } else {
      spdlog::error("health: {} did not pass its checks either: {}", restored_to, failed_check);
    }
  }
  throw Failure(why + (back.empty() ? "" : "; switched back to " + back) + rechecked +
                (kept.empty() ? "" : "; " + kept) + (unswitched.empty() ? "" : "; " + unswitched) +
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
                      Durability durability, Remount remount, const char* command, RunSummary* summary,
                      const DatastoreOptions& datastore) {
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
      state.kept_for_datastore.reset();  // kept on a version that now passes: nothing to wait for
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
    Retreat retreat{std::move(state), how, host.restarts_owed_by(kind), std::nullopt, std::nullopt, ""};
    plan_datastore(context, store, host, retreat, true, datastore);
    retreats.push_back(std::move(retreat));
  }
  const auto recheck = [&owed, &probes](const std::string& version) {
    HealthProbes again = probes;
    again.kubelet_version = version;
    const HealthVerdict again_verdict = wait_until_healthy(owed, again);
    return again_verdict.healthy ? std::string() : again_verdict.failed_check + ": " + again_verdict.detail;
  };
  go_back(context, store, host, std::move(retreats), why, Quarantine::yes, durability, remount,
          AfterRestarts::reboot_per_policy, command, summary, datastore, recheck);
}

[[noreturn]] void give_up_after_switch(const Context& context, const StateStore& store, HostSteps& host,
                                       const std::vector<BeforeHostSteps>& components,
                                       const AfterSwitchFailure& failure, Durability durability, Remount remount,
                                       const char* command, RunSummary* summary, const DatastoreOptions& datastore) {
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
    Retreat retreat{std::move(*state), how, std::move(restarted), std::nullopt, std::nullopt, ""};
    plan_datastore(context, store, host, retreat, failure.unit_failed(), datastore);
    retreats.push_back(std::move(retreat));
  }
  if (retreats.empty()) {
    throw failure;
  }
  // Nothing booted the versions left, so going back needs no reboot; only the units restarted run them.
  go_back(context, store, host, std::move(retreats), failure.what(),
          failure.unit_failed() ? Quarantine::yes : Quarantine::no, durability, remount, AfterRestarts::no_reboot,
          command, summary, datastore);
}

}  // namespace hoist
