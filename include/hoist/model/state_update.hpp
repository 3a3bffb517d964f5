#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hoist/model/component.hpp"
#include "hoist/model/state.hpp"

namespace hoist {

/// The outcomes recorded in LastResult::outcome.
namespace outcome {
inline constexpr const char* k_succeeded = "succeeded";
inline constexpr const char* k_unchanged = "unchanged";
inline constexpr const char* k_failed = "failed";
inline constexpr const char* k_refused = "refused";
/// An upgrade whose health checks failed, switched back to the version before it.
inline constexpr const char* k_rolled_back = "rolled-back";
/// While a reboot hoist asked for is pending.
inline constexpr const char* k_rebooting = "rebooting";
}  // namespace outcome

/// The state of a component hoist has not installed yet: its identity, nothing current.
ComponentState new_state(const ComponentSpec& spec);

/// Refuses (UsageError) a spec that names an installed component with another
/// kind or destination: the versions on the host belong to the old ones.
void check_identity(const ComponentState& state, const ComponentSpec& spec);

/// Sets the last result, stamped now.
void set_last_result(ComponentState& state, const std::string& command, const std::string& outcome,
                     const std::string& version, const std::string& message = {});

/// Records a switch to `version`: the old current becomes previous (unless it is
/// `version` itself), `version` moves to the end of the kept versions with the
/// time now and leaves the quarantine (the operator installed it on purpose);
/// `adopted` (the pre-hoist file kept by the file kind) becomes previous when
/// nothing was current. The switch intent, recorded now, is cleared, and so is a version kept for its datastore,
/// and the staged record when it names `version` (the switch it was staged for).
void record_switch(ComponentState& state, const std::string& version, const std::optional<std::string>& adopted);

/// The versions that `--keep keep` removes. `keep` counts the kept versions that are not quarantined: the oldest
/// of them beyond `keep` go; a quarantined version stays only while the kept versions, quarantined ones included,
/// are no more than `keep`, and goes before any other (oldest first). Never the current version, the previous one,
/// or the one the last rollback landed on: with those, more than `keep` versions can stay. Quarantined ones first,
/// then the others, each oldest first (the order of `versions`).
std::vector<std::string> versions_to_collect(const ComponentState& state, unsigned keep);

/// The version a rollback without `--to` goes to: the newest kept version older than the current one by the
/// component's version scheme (`pre-hoist` is older than every version) that is not quarantined. A sync keeps one
/// backup, of its previous version: that one, when it is older and not quarantined. Throws UsageError saying why
/// there is none.
std::string walk_back_target(const ComponentState& state);

/// Whether the last rollback recorded was begun by the Job of this Plan: the same SYSTEM_UPGRADE_PLAN_NAME and
/// SYSTEM_UPGRADE_PLAN_LATEST_HASH, neither empty. A Job that runs again (a retried pod, a re-run after a reboot)
/// then finds its rollback done.
bool rolled_back_by_plan(const ComponentState& state, const std::string& plan, const std::string& plan_hash);

/// Removes `version` from the kept versions.
void forget_version(ComponentState& state, const std::string& version);

/// Adds `units` to the state's owed restarts, in order, each unit once.
void owe_restarts(ComponentState& state, const std::vector<std::string>& units);

/// What reconcile_with_host() did to a state.
enum class Reconciled {
  agreed,       ///< the host's commit points name the state's current version: nothing changed
  intent_gone,  ///< a rollback intent whose switch never happened was dropped
  switch_gone,  ///< an upgrade's switch intent that the host does not show was dropped (killed before it, or undone)
  switched,     ///< a run switched to the host's version and was killed before recording it: recorded now, with
                ///< what its switch intent made owed (a repair of the current version: that alone)
  rolled_back,  ///< the intended rollback switched and was killed before recording it: recorded now
};

/// Makes the state say what the host's commit points say is current (`host_current`, from
/// Installer::host_current(); "" when they name nothing hoist knows, which leaves the state as it is). A run
/// killed between its switch and its state save leaves the two apart; this is how the next run, and `status`,
/// see the host's truth. An upgrade's switch intent whose target the host names passes on what it made owed.
Reconciled reconcile_with_host(ComponentState& state, const std::string& host_current);

/// Records the end of the rollback `state.rollback` describes: current is its target, previous the version it
/// left (none for sync: its one backup is used up), the intent cleared, the restarts it made owed in place of
/// those the version it left still owed, the version it left quarantined (for the intent's reason, when it has
/// one; not when the intent says not to), the version it landed on out of the quarantine, the checks it owed
/// dropped, and `last_rollback` set from the intent. The last result becomes the rollback's, unless the intent has
/// a reason: then the result saved with it (why hoist switched back) stays.
void record_rollback(ComponentState& state);

/// The quarantine record of `version`, if a rollback left it.
const QuarantinedVersion* find_quarantined(const ComponentState& state, const std::string& version);

/// Saves a state that records a failure: a state directory that cannot be
/// written is logged, not thrown, so that the original error is what the run
/// reports.
void save_failure_record(const StateStore& store, const ComponentState& state);

}  // namespace hoist
