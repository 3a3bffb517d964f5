#include "hoist/run/rollback_run.hpp"

#include <fcntl.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>

#include "datastore_snapshot.hpp"
#include "hoist/host/boot_id.hpp"
#include "hoist/host/host_steps.hpp"
#include "hoist/host/server_datastore.hpp"
#include "hoist/install/installer.hpp"
#include "hoist/model/state_update.hpp"
#include "hoist/run/host_truth.hpp"
#include "hoist/sys/stop_signals.hpp"
#include "hoist/util/error.hpp"
#include "hoist/util/log_fields.hpp"
#include "run_lock.hpp"

namespace hoist {

namespace {

constexpr const char* k_command = "rollback";

std::string kept_list(const ComponentState& state) {
  std::string kept;
  for (const auto& record : state.versions) {
    kept += (kept.empty() ? "" : ", ") + record.version;
  }
  return kept.empty() ? "none" : kept;
}

// Which version to go back to: walk_back_target(), or `--to`, which must be kept. Throws UsageError when there is
// none, Error(refused) for a quarantined `--to` without --allow-quarantined.
std::string choose_target(const ComponentState& state, const RollbackOptions& options) {
  if (options.to.empty()) {
    return walk_back_target(state);
  }
  const std::string& target = options.to;
  if (target == state.current) {
    return target;
  }
  const bool kept = std::any_of(state.versions.begin(), state.versions.end(),
                                [&](const VersionRecord& record) { return record.version == target; });
  if (!kept) {
    throw UsageError("cannot roll back " + state.component + " to " + target +
                     ": it is not kept on the host (kept: " + kept_list(state) + ")");
  }
  if (state.kind == to_string(ComponentKind::sync) && target != state.previous) {
    throw UsageError("cannot roll back " + state.component + " to " + target +
                     ": a sync component keeps one backup, of the version before " + state.current + " (" +
                     (state.previous.empty() ? std::string("none left") : state.previous) + ")");
  }
  // As upgrade's gate: a version a rollback left comes back only when the operator says so.
  if (const QuarantinedVersion* quarantined = find_quarantined(state, target)) {
    if (options.allow_quarantined == AllowQuarantined::no) {
      throw Error(ExitCode::refused, state.component + ": refusing to roll back to " + target +
                                         ": it is quarantined since " + quarantined->since + " (" +
                                         quarantined->reason + "); pass --allow-quarantined to go back to it");
    }
    spdlog::info("{}: {} leaves the quarantine (--allow-quarantined)", state.component, target);
  }
  return target;
}

// --restore-snapshot: the snapshot that an upgrade from `target` took is put back, with the server stopped, before
// the switch. Refused (UsageError, exit 2) when this node alone cannot do it.
//
// A restore that fails exits 1 on the version it started from. A SQLite server is started on it again: each file of
// the database is renamed into place whole, so what is there is the current version's or the snapshot's, which the
// current version reads as it read the old version's when it was upgraded. An etcd server stays stopped: a cluster
// reset that failed may have left etcd's data directory half restored, on which a server must not start.
void restore_datastore(const HostRoot& root, const StateStore& store, HostSteps& host, ComponentState& state,
                       const std::string& target, const RollbackOptions& options) {
  const auto server = find_server_datastore(root, state.destination, host.restarts_owed_by(ComponentKind::file));
  if (!server) {
    throw UsageError("--restore-snapshot: no unit given with --restart runs " + state.destination +
                     " as a k3s or RKE2 server");
  }
  const DatastoreSnapshot* snapshot = nullptr;
  for (const auto& taken : state.datastore_snapshots) {
    if (taken.from == target && (snapshot == nullptr || taken.to == state.current)) {
      snapshot = &taken;
    }
  }
  if (snapshot == nullptr) {
    throw UsageError("--restore-snapshot: no datastore snapshot of " + target + " is kept for " + state.component);
  }
  const std::string binary = kept_binary(store.state_dir(), state.component, target, state.destination);
  if (snapshot->kind == "etcd") {
    const int members = etcd_member_count(options.datastore, *server, snapshot);
    if (members != 1) {
      throw UsageError("--restore-snapshot: " +
                       std::string(members > 1 ? "etcd has " + std::to_string(members) + " members"
                                               : "hoist cannot tell how many members etcd has") +
                       ", and restoring it takes every server, which one node cannot do: " +
                       restore_steps(*server, snapshot, target, state.component, binary, false));
    }
  }
  // A snapshot removed or emptied by hand is refused before the server is stopped.
  if (auto found = root.open(snapshot_main_file(*server, *snapshot), O_PATH | O_NOFOLLOW); !found) {
    throw Failure("--restore-snapshot: the datastore snapshot of " + target +
                  " is not whole: " + found.error().message + "; nothing was changed");
  }
  host.stop_unit(server->unit);
  try {
    if (snapshot->kind == "sqlite") {
      restore_sqlite(root, *server, *snapshot);
    } else {
      restore_etcd(root, *server, *snapshot, binary, options.datastore.timeout);
    }
  } catch (const Failure& e) {
    std::string message = "--restore-snapshot: restoring " + snapshot->path + " failed: " + e.what() + "; " +
                          state.component + " stays on " + state.current;
    if (snapshot->kind == "sqlite") {
      owe_restarts(state, {server->unit});  // stopped: until it runs again, the start is owed
      store.save(state);
      try {
        host.after_switch(store, {SwitchedComponent{state.component, ComponentKind::file, state.current, false}},
                          AfterRestarts::no_reboot);
        message += ", " + server->unit + " started again on it";
      } catch (const std::exception& again) {
        message += ", and starting " + server->unit + " again failed too (owed to the next run): " + again.what();
      }
      message += "; re-run the rollback once the cause is fixed";
    } else {
      message += "; " + server->unit +
                 " stays stopped: the cluster reset may have left etcd's data directory half restored, on which it "
                 "must not start; once the cause is fixed, " +
                 restore_steps(*server, snapshot, target, state.component, binary, true);
    }
    if (auto saved = store.load(state.component)) {
      state = std::move(*saved);
    }
    set_last_result(state, k_command, outcome::k_failed, target, message);
    save_failure_record(store, state);
    throw Failure(message);
  }
}

// Saves the rollback that `state` now holds with the restarts it makes owed (upgrade does the same).
void save_with_owed_restarts(const HostRoot& root, const StateStore& store, const HostSteps& host,
                             ComponentState& state, ComponentKind kind) {
  state.boot_id = read_boot_id(root);
  owe_restarts(state, host.restarts_owed_by(kind));
  store.save(state);
}

// Records the rollback that `state` now holds, with the restarts it owes, and does them.
void finish(const HostRoot& root, const StateStore& store, HostSteps& host, ComponentState& state, ComponentKind kind) {
  save_with_owed_restarts(root, store, host, state, kind);
  const LogFields host_phase{{"phase", "host"}};
  host.after_switch(store, {SwitchedComponent{state.component, kind, state.current, true}});
}

// `rollback --to` the current version: the operator keeps it, so what earlier runs left owed is settled here, and
// nothing is left that only deleting the state could clear. The owed restarts this rollback names (--restart, a
// sysext's refresh) are done; the others are dropped, and so are the owed health checks. So does a rollback that
// its Plan already took (`why` says so in the last result): the same Job, run again, names the same restarts.
void keep_current(const StateStore& store, HostSteps& host, ComponentState& state, ComponentKind kind,
                  const std::string& why = {}) {
  const auto asked = host.restarts_owed_by(kind);
  std::string dropped;
  std::vector<std::string> kept;
  for (const auto& unit : state.owed_restarts) {
    if (std::find(asked.begin(), asked.end(), unit) != asked.end()) {
      kept.push_back(unit);
    } else {
      dropped += (dropped.empty() ? "" : ", ") + unit;
    }
  }
  std::string note;
  if (!dropped.empty()) {
    note = "dropped the owed restarts of " + dropped;
  }
  if (!state.owed_health_checks.empty()) {
    std::string checks;
    for (const auto& spec : state.owed_health_checks) {
      checks += (checks.empty() ? "" : ", ") + spec;
    }
    note += (note.empty() ? "" : "; ") + std::string("dropped the owed health checks ") + checks;
  }
  if (!note.empty()) {
    spdlog::warn("{}: keeping {}: {}", state.component, state.current, note);
  }
  state.owed_restarts = std::move(kept);
  state.owed_health_checks.clear();
  set_last_result(state, k_command, outcome::k_unchanged, state.current,
                  why.empty() || note.empty() ? why + note : why + "; " + note);
  store.save(state);
  if (!state.owed_restarts.empty()) {
    const LogFields host_phase{{"phase", "host"}};
    host.after_switch(store, {SwitchedComponent{state.component, kind, state.current, false}},
                      AfterRestarts::no_reboot);
  }
}

}  // namespace

ExitCode run_rollback(const Context& context, const RollbackOptions& options) {
  validate_component_name(options.component);
  const LogFields fields{{"component", options.component}, {"phase", "rollback"}};
  const HostRoot& root = context.root();
  const SucContext& suc = context.suc;
  const StateStore store(root, context.options.state_dir);
  // SIGTERM/SIGINT stop the run at its safe points (sys/stop_signals.hpp).
  stop_signals::install();

  const Lock lock = take_run_lock(context);
  // The host steps (reboot handshake, remount, restarts, reboot); declared
  // after the lock so that its remounts are put back before the lock is released.
  HostSteps host(context, k_command, options.host, DryRun::no);

  auto loaded = store.load(options.component);
  if (!loaded) {
    throw UsageError("component '" + options.component + "' has no state under '" + root.display(store.state_dir()) +
                     "': nothing to roll back");
  }
  ComponentState state = std::move(*loaded);
  // The run after the reboot a rollback asked for confirms it and stops: a
  // second rollback would go back again.
  const bool rollback_rebooting = state.pending_reboot && state.last_result && state.last_result->command == k_command;
  // --to another version than a reboot was pending for drops that reboot's record when the host came back on
  // another version (the handshake's failure): `rollback --to CURRENT` keeps what the host came back on.
  if (host.settle_pending_reboot(store, state, options.to) == Handshake::completed && rollback_rebooting) {
    return ExitCode::ok;
  }
  const ComponentKind kind = parse_component_kind(state.kind);
  auto installer = make_installer(root, InstallTarget{state.component, kind, state.destination, store.state_dir()},
                                  options.durability);
  if (options.host.remount == Remount::yes) {
    host.make_writable(paths_written(kind, state.destination, store.component_dir(state.component)));
  }

  // A rollback that a killed run began is finished here, or found never to have switched.
  const std::optional<RollbackIntent> interrupted = state.rollback;
  std::string target;
  std::optional<LogFields> target_field;
  try {
    const bool reconciled = agree_with_host(*installer, state);
    if (installer->clean_leftovers(&state) || reconciled) {
      store.save(state);
    }
    if (interrupted && !state.rollback && state.current == interrupted->to &&
        (options.to.empty() || options.to == interrupted->to)) {
      spdlog::info("{}: finished the interrupted rollback from {} to {}", state.component, interrupted->from,
                   interrupted->to);
      finish(root, store, host, state, kind);
      return ExitCode::ok;
    }
    // Without --to, a rollback is a step back, not a place: the Job of the Plan that took it, run again, must not
    // take another (nor the toggle back that a rollback to `previous` was).
    if (options.to.empty() && rolled_back_by_plan(state, suc.plan_name, suc.plan_latest_hash)) {
      const RollbackRecord& done = *state.last_rollback;
      const std::string message = "Plan " + suc.plan_name + " (hash " + suc.plan_latest_hash +
                                  ") already rolled back from " + done.from + " to " + done.to + " at " + done.time;
      spdlog::info("{}: {}; nothing to do", state.component, message);
      keep_current(store, host, state, kind, message);
      return ExitCode::ok;
    }
    target = choose_target(state, options);
    target_field.emplace(std::initializer_list<LogField>{{"version", target}});
    if (target == state.current && installer->integrity(target, nullptr) == Integrity::intact) {
      spdlog::info("{}: already at {}, nothing to switch", state.component, target);
      keep_current(store, host, state, kind);
      return ExitCode::ok;
    }
    installer->check_rollback(target, state.current);
    if (options.restore_snapshot) {
      restore_datastore(root, store, host, state, target, options);
    }
  } catch (const Error& e) {
    if (e.code() != ExitCode::usage && e.code() != ExitCode::refused) {
      throw;
    }
    set_last_result(state, k_command, outcome::k_refused, target.empty() ? options.to : target, e.what());
    save_failure_record(store, state);
    throw;
  }

  // The intent first: a run killed after the switch below leaves the host on `target` and the state on
  // `current`, and the next run must know that it was this rollback that moved it, and what it owes (and which
  // Plan took it, so that its Job run again does nothing).
  state.rollback = RollbackIntent{state.current, target,        now_rfc3339(),       host.restarts_owed_by(kind), "",
                                  true,          suc.plan_name, suc.plan_latest_hash};
  store.save(state);
  try {
    installer->rollback(target, state.current);
  } catch (const std::exception& e) {
    set_last_result(state, k_command, outcome::k_failed, target, e.what());
    save_failure_record(store, state);
    throw;
  }
  spdlog::info("{}: rolled back from {} to {}", state.component, state.current, target);
  record_rollback(state);
  finish(root, store, host, state, kind);
  return ExitCode::ok;
}

void switch_back(const HostRoot& root, const StateStore& store, ComponentState& state, const std::string& target,
                 Durability durability, const std::string& why, const std::vector<std::string>& owed_restarts,
                 Quarantine quarantine) {
  const ComponentKind kind = parse_component_kind(state.kind);
  auto installer =
      make_installer(root, InstallTarget{state.component, kind, state.destination, store.state_dir()}, durability);
  const bool reconciled = agree_with_host(*installer, state);
  if (installer->clean_leftovers(&state) || reconciled) {
    store.save(state);
  }
  installer->check_rollback(target, state.current);
  // As run_rollback(): the intent first, then the switch, then its record. The intent carries why and is saved
  // with what the caller recorded, the restarts the switch will owe and whether it quarantines, so that a run that
  // finds this switch done by a killed run (reconcile_with_host()) records it as this one would have, and does
  // the restarts.
  state.rollback =
      RollbackIntent{state.current, target, now_rfc3339(), owed_restarts, why, quarantine == Quarantine::yes, "", ""};
  state.boot_id = read_boot_id(root);
  store.save(state);
  installer->rollback(target, state.current);
  spdlog::info("{}: rolled back from {} to {}", state.component, state.current, target);
  record_rollback(state);
  store.save(state);
}

}  // namespace hoist
