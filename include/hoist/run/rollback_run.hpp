#pragma once

#include <string>
#include <vector>

#include "hoist/host/host_actions.hpp"
#include "hoist/host/host_steps.hpp"
#include "hoist/model/component.hpp"
#include "hoist/model/context.hpp"
#include "hoist/run/server_preflight.hpp"
#include "hoist/sys/durable_tree.hpp"
#include "hoist/util/exit_code.hpp"

namespace hoist {

struct RollbackOptions {
  std::string component;
  std::string to;  ///< empty: walk back (walk_back_target())
  /// Whether `to` may name a quarantined version (which then leaves the quarantine).
  AllowQuarantined allow_quarantined = AllowQuarantined::no;
  Durability durability = Durability::syncfs;
  /// The host steps: --remount, --restart, --reboot (host/host_steps.hpp).
  HostActions host;
  /// --restore-snapshot: put back the datastore snapshot that an upgrade from `to` took, before the switch.
  bool restore_snapshot = false;
  DatastoreOptions datastore;
};

/// `hoist rollback`: under the lock, switches a component back. Without `to` it walks back: to the newest kept
/// version older than the current one that is not quarantined (walk_back_target(); sync: its one backup, of the
/// previous version), so a second rollback goes further back, never forward again; and when the SUC Plan whose
/// Job runs it (name and hash) already took the last rollback, it switches nothing (exit 0). `to` names any kept
/// version: the form a Plan can repeat; a quarantined `to` is refused (exit 3) unless `allow_quarantined`. tree
/// and file kinds re-point their link (tree: `previous` then names the version rolled back from); sync restores
/// the backup of its last sync. The version left is quarantined; the one landed on never is. A version that is
/// not kept, missing on disk or incomplete is refused with exit 2 naming it. Rolling back to the current version
/// (or a rollback its Plan already took) switches nothing: it keeps that version and settles what earlier runs
/// left owed (the restarts it names with --restart are done, the others and the owed health checks dropped; with
/// --to, a reboot record of another version that the host did not come back on is dropped too). Records the
/// outcome in the state, and the rollback in `last_rollback`.
ExitCode run_rollback(const Context& context, const RollbackOptions& options);

/// Whether a switch back quarantines the version it leaves.
enum class Quarantine {
  yes,  ///< the version was tried and failed (a health check, a unit that did not come up)
  no,   ///< the version was never tried (its restart could not be asked for, its reboot did not come)
};

/// The switch of run_rollback() for a caller that holds the lock and its HostSteps: switches `state`'s component
/// from its current version back to `target` (kept, complete, and for sync the previous) with the same intent
/// record, quarantines the version it leaves (for `why`; not with Quarantine::no), makes `owed_restarts` owed in
/// place of what that version still owed, and saves the state. The last result stays what the caller set (why it
/// switches back); the intent, saved before the switch, holds it, `why`, the restarts and the quarantine, so that
/// a run that finds the switch made by a killed run records the same. What a killed run left is reconciled and
/// cleaned first. Throws like run_rollback(); the caller does the restarts (HostSteps::after_switch).
void switch_back(const HostRoot& root, const StateStore& store, ComponentState& state, const std::string& target,
                 Durability durability, const std::string& why, const std::vector<std::string>& owed_restarts,
                 Quarantine quarantine);

}  // namespace hoist
