#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hoist/sys/host_root.hpp"

namespace hoist {

/// One version kept on the host.
struct VersionRecord {
  std::string version;
  std::string installed_at;  ///< RFC 3339, UTC
};

/// The outcome of the last command that ran on a component.
struct LastResult {
  std::string command;  ///< upgrade | rollback
  std::string outcome;  ///< succeeded | unchanged | failed | refused | rebooting
  std::string version;  ///< the target of that command
  std::string time;     ///< RFC 3339, UTC
  std::string message;  ///< the error, for failures

  bool operator==(const LastResult&) const = default;
};

/// A reboot hoist asked for and has not yet seen happen.
struct PendingReboot {
  std::string target;        ///< the version that must be current after the boot
  std::string boot_id;       ///< the boot id before the reboot
  std::string requested_at;  ///< RFC 3339, UTC
};

/// A rollback that has begun and is not yet recorded: saved before its switch, so that the next run can tell
/// from the host's commit points whether the rollback happened (then it records it) or not (then it drops this).
struct RollbackIntent {
  std::string from;        ///< the current version when the rollback began
  std::string to;          ///< its target
  std::string started_at;  ///< RFC 3339, UTC
  /// The units its switch makes owed (its `--restart`, a sysext's refresh): owed by whichever run records the
  /// rollback, also one that finds it switched and not recorded. None in a state from before they were recorded.
  std::vector<std::string> owed_restarts;
  /// Why hoist began it by itself (a failed health check), "" for `hoist rollback`: whichever run records it
  /// quarantines `from` for this reason and keeps the result its beginner saved with this intent.
  std::string reason;
  /// Whether whichever run records it quarantines `from`: false for a switch back before `from` was tried (its
  /// restart could not even be asked for, its reboot did not come), which says nothing against that version.
  bool quarantine = true;
  /// The SUC Plan whose Job began it (SYSTEM_UPGRADE_PLAN_NAME and _LATEST_HASH), "" outside a Plan and for a
  /// switch back: whichever run records the rollback records them in ComponentState::last_rollback.
  std::string plan;
  std::string plan_hash;
};

/// The last rollback recorded for a component (`hoist rollback`, or a switch back after failed health checks).
struct RollbackRecord {
  std::string from;
  std::string to;    ///< the version it landed on: `--keep` never removes it
  std::string time;  ///< RFC 3339, UTC: when it was recorded
  /// The Plan whose Job began it, as in RollbackIntent: a rollback without `--to` that the same Plan (the same
  /// name and hash) runs again does nothing, so a retried Job never walks back twice.
  std::string plan;
  std::string plan_hash;
};

/// An upgrade's switch that has begun and is not yet recorded: saved before the switch, so that a run killed
/// between the switch and its state save leaves the next run what the switch makes owed.
struct SwitchIntent {
  std::string to;                               ///< the version being switched to
  std::string started_at;                       ///< RFC 3339, UTC
  std::vector<std::string> owed_restarts;       ///< as ComponentState::owed_restarts, for `to`
  std::vector<std::string> owed_health_checks;  ///< as ComponentState::owed_health_checks, for `to`
};

/// A version staged beside the current one and not switched to (`hoist stage`, the prepare step of a Plan, before
/// the drain): saved before the staging begins, so that whatever a kill leaves under its name is hoist's to reuse or
/// remove. Never current, never among the kept versions: the upgrade that switches to it clears this record, a run for
/// another version removes the version's files (unless they are a kept version) and this record with them.
struct StagedVersion {
  std::string version;     ///< the version being, or that was, staged
  std::string started_at;  ///< RFC 3339, UTC: when its staging began
  /// The SUC Plan whose Job staged it (SYSTEM_UPGRADE_PLAN_NAME and _LATEST_HASH), "" outside a Plan.
  std::string plan;
  std::string plan_hash;
};

/// A version that a rollback left: `upgrade` refuses it (exit 3) unless `--allow-quarantined`.
struct QuarantinedVersion {
  std::string version;
  std::string since;   ///< RFC 3339, UTC: when the rollback from it was recorded
  std::string reason;  ///< "rolled back to 1.0.0"
};

/// The verdict of the health checks on a version (docs/host-actions.md, "Health checks and automatic rollback").
struct HealthRecord {
  std::string version;  ///< the version checked
  std::string verdict;  ///< passed | failed
  std::string check;    ///< failed: the check that did not pass
  std::string detail;   ///< what the check (failed: that check) last saw
  std::string time;     ///< RFC 3339, UTC
};

/// A snapshot of a k3s or RKE2 server's datastore that an upgrade took before its switch (docs/datastore.md): what
/// a switch back to `from` restores. Kept while `from` is kept, removed with it.
struct DatastoreSnapshot {
  std::string from;      ///< the version current when it was taken: the one whose datastore it holds
  std::string to;        ///< the version the upgrade switched to after it
  std::string kind;      ///< sqlite | etcd
  std::string path;      ///< host path: etcd's snapshot file, or the directory that holds the SQLite copy
  std::string taken_at;  ///< RFC 3339, UTC
  std::uint64_t bytes = 0;
  /// How it was taken, for the operator: "k3s etcd-snapshot save --name hoist-… (exit 0)", "copied with
  /// k3s.service stopped".
  std::string how;
  /// etcd: how many members its client API listed when the snapshot was taken, the old version running; 0 when it
  /// could not be asked. Whether a restore on this server alone can bring the datastore back depends on it.
  int etcd_members = 0;
};

/// A failed switch that hoist did not switch back because the datastore could not follow (docs/datastore.md): the
/// version stays current until the operator restores or accepts it.
struct KeptForDatastore {
  std::string version;  ///< the version kept (current)
  std::string since;    ///< RFC 3339, UTC
  std::string reason;   ///< why it failed, why no switch back, the snapshot and the restore steps
};

/// What is installed for one component: `<state-dir>/<component>/state.json`.
struct ComponentState {
  std::string component;
  std::string kind;            ///< tree | file | sysext | sync
  std::string destination;     ///< host path
  std::string version_scheme;  ///< semver | k3s | systemd
  std::string current;         ///< empty before the first install
  std::string previous;
  std::vector<VersionRecord> versions;  ///< kept versions, oldest first
  std::optional<LastResult> last_result;
  /// The last result of a run that changed what the component runs (an upgrade or rollback that succeeded, a switch
  /// back after failed health checks): a later run that changes nothing overwrites last_result, never this. None in
  /// a state from before it was recorded.
  std::optional<LastResult> last_change;
  std::string boot_id;  ///< the boot id when the state was last written
  std::optional<PendingReboot> pending_reboot;
  /// The units still to restart for the current version, in order (`systemd-sysext.service` is the sysext
  /// refresh): recorded with the switch, each removed once done, so that a run that failed or was killed
  /// before its restarts leaves them owed to the next run.
  std::vector<std::string> owed_restarts;
  /// The rollbacks that switched this component (`hoist_rollbacks_total`). A state written before this was
  /// counted reads 0; a hoist that does not know the field drops it, which Prometheus reads as a counter reset.
  std::uint64_t rollbacks = 0;
  std::optional<RollbackIntent> rollback;       ///< a rollback begun by a run that did not record its end
  std::optional<RollbackRecord> last_rollback;  ///< the last rollback recorded; none in a state from before
  std::optional<SwitchIntent> switching;        ///< an upgrade's switch begun by a run that did not record it
  /// The version `hoist stage` staged and no upgrade has switched to yet. Whether it is complete is the host's to
  /// say (Installer::has_complete()): a staging killed before its rename leaves this record and no version.
  std::optional<StagedVersion> staged;
  std::vector<QuarantinedVersion> quarantined;  ///< oldest first
  /// The health checks still to pass for the current version (their specs, as given): recorded with the switch,
  /// cleared when they pass, so that a run killed or stopped while they ran leaves them to the next run, which
  /// checks again (never counted as passed).
  std::vector<std::string> owed_health_checks;
  /// The last verdict of the health checks.
  std::optional<HealthRecord> health;
  /// The file kind: the security.selinux label (without its NUL) of the file that hoist's first switch replaced,
  /// which every kept copy takes unless its payload carries one; "" when that file had none.
  std::string selinux_label;
  /// The datastore snapshots taken before switches, oldest first (a k3s or RKE2 server's; none for others).
  std::vector<DatastoreSnapshot> datastore_snapshots;
  /// Set when a failed switch was kept because the datastore could not follow a switch back; cleared by the next
  /// switch or by checks that pass.
  std::optional<KeptForDatastore> kept_for_datastore;
};

/// The schema version this build writes; a higher one on disk is refused.
inline constexpr int k_state_schema = 1;

/// Serialises a state to the JSON written on disk (and printed by `status --json`).
std::string to_json_text(const ComponentState& state);

/// Parses state JSON; throws hoist::Failure naming `source` when it is corrupt
/// or written by a newer hoist.
ComponentState parse_state(std::string_view text, std::string_view source);

/// The states of all components under a state directory inside the host root.
class StateStore {
 public:
  StateStore(const HostRoot& root, std::string state_dir) : m_root(root), m_state_dir(std::move(state_dir)) {}

  /// The state directory as the host sees it.
  [[nodiscard]] const std::string& state_dir() const noexcept { return m_state_dir; }

  /// Names of the components that have a state file, sorted. None when the
  /// state directory does not exist.
  [[nodiscard]] std::vector<std::string> components() const;

  /// The component's state, or nullopt when it has none. Throws hoist::Failure
  /// when the file is unreadable, corrupt or from a newer hoist.
  [[nodiscard]] std::optional<ComponentState> load(std::string_view component) const;

  /// Writes the state atomically and durably (temp file, fsync, rename, fsync
  /// of the directory); creates the directories it needs.
  void save(const ComponentState& state) const;

  /// The host path of a component's directory: `<state-dir>/<component>`.
  [[nodiscard]] std::string component_dir(std::string_view component) const;

 private:
  const HostRoot& m_root;
  std::string m_state_dir;
};

/// The current time as RFC 3339 UTC with seconds (`2026-11-21T22:30:00Z`).
std::string now_rfc3339();

}  // namespace hoist
