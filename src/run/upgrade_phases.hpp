#pragma once

#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hoist/host/health_check.hpp"
#include "hoist/host/host_steps.hpp"
#include "hoist/install/installer.hpp"
#include "hoist/model/context.hpp"
#include "hoist/model/state.hpp"
#include "hoist/model/version_gate.hpp"
#include "hoist/run/server_preflight.hpp"
#include "hoist/run/upgrade_run.hpp"
#include "hoist/sys/lock.hpp"
#include "hoist/util/log_fields.hpp"
#include "hoist/verify/checksums.hpp"

namespace hoist {

/// `hoist upgrade` as its phases (ARCHITECTURE.md, "The run"), one method each, called in this order by run()
/// (or, for a dry run, by preview()): read_states → gate → verify → preflight → reach_the_bus → remount →
/// clean_leftovers → stage → snapshot → switch_over → record → host_steps. A gate that finds nothing to do ends the run
/// with finish_unchanged() instead. A phase works on every component before the next phase starts: every payload is
/// verified before anything is written, and everything is staged before anything is switched. The phases are public so
/// that each can be tested alone; outside tests, run_upgrade() and preview_upgrade() are the way in.
class UpgradeRun {
 public:
  /// One component through the phases.
  struct Work {
    explicit Work(UpgradeItem resolved) : item(std::move(resolved)) {}

    UpgradeItem item;
    std::optional<ComponentState> state;
    std::unique_ptr<Installer> installer;
    std::optional<Version> installed;
    Gate gate{GateDecision::unchanged, ""};
    TransferStats stats;
    bool staged = false;
    bool committed = false;
    /// This run confirmed the reboot an earlier run asked for: its last result says so, not "unchanged".
    bool reboot_settled = false;
    /// Where `installed` came from when hoist's state did not say it (--installed-version-from), for messages.
    std::string installed_from;
    /// The SHA256SUMS the payload was verified against, to check the staged copy of a directory payload with.
    std::optional<Sha256Sums> sums;
    /// Per entry of `sums`: the payload file that verification left unread, the installed tree holding its listed
    /// bytes (verify_payload()).
    std::vector<bool> unread;
    /// A k3s or RKE2 server's datastore, as the preflight found it (none for other components).
    std::optional<ServerPreflight> server;
    /// The unit the snapshot stopped (SQLite), to start again when the run goes back before its switch.
    std::string stopped_unit;
    /// What those sums list for a file or archive payload itself (TransferOptions::payload_file_digest).
    std::optional<Sha256Digest> payload_file_digest;
    /// The target is the version `hoist stage` left complete on the host (ComponentState::staged): the switch
    /// takes it once it holds the payload (Installer::holds()).
    bool staged_ahead = false;
    /// verify() checked the signature and read the sums but not the payload: the staged version is compared with
    /// the sums through its content index instead (stage()). Should it not hold them, the payload is verified
    /// before it is staged again.
    bool verification_deferred = false;

    [[nodiscard]] const std::string& name() const { return item.spec.name; }
    [[nodiscard]] std::string installed_text() const { return state ? state->current : std::string(); }
  };

  /// Refuses `items` that share a name or a destination (check_distinct(), UsageError), installs the
  /// SIGTERM/SIGINT handlers, takes the run lock (not with DryRun::yes: a dry run writes nothing, not even the lock
  /// file) and sets up the host steps after it, so that their remounts are put back before the lock is released.
  /// `options` must outlive the object. RunMode::stage is `hoist stage` (run_stage()).
  UpgradeRun(const Context& context, std::vector<UpgradeItem> items, const UpgradeOptions& options, DryRun dry_run,
             RunMode mode = RunMode::upgrade);

  /// Every phase in order (run_upgrade()); a failure in reach_the_bus, remount, clean_leftovers, stage or
  /// switch_over is undone (undo()) and recorded before it is rethrown. Needs DryRun::no (std::logic_error
  /// otherwise). With RunMode::stage, stage_only() instead.
  ExitCode run();
  /// `hoist stage` (src/run/stage_ahead.cpp): read_states → gate → verify → check_space → remount →
  /// clean_leftovers → check_switches → stage_ahead, and nothing after: no switch, no restart, no reboot. Every
  /// refusal the upgrade would make is made here (recorded with the command `stage`); a failure while staging
  /// removes what it staged (undo()).
  ExitCode stage_only();
  /// read_states, gate and (when anything would change) verify, then what each component's switch would change
  /// (Installer::preview()) and the checks it would owe (preview_upgrade()). Writes nothing.
  UpgradePreview preview();

  /// Per component: its state (check_identity()), the reboot handshake, its installer, and the state made to agree
  /// with the host's commit points (saved, unless this is a dry run). A switch back that a killed run made and did
  /// not record is finished here with its restarts, as `hoist rollback` finishes one.
  void read_states();
  /// The one gate of the run: each component's decision (decide_gate(), a quarantined target refused), logged and
  /// added to the summary. A refusal of any component is recorded as `refused` in the states there are (not in a
  /// dry run) and thrown (exit 3). Returns whether any component changes the host.
  bool gate();
  /// What a run with nothing to install does: the leftovers of killed runs and versions past --keep removed (best
  /// effort), `unchanged` recorded where no reboot was just confirmed and no restart is owed, then host_steps().
  void finish_unchanged();
  /// Each payload that is to be installed checked against its SHA256SUMS (and signature), a sysext's
  /// extension-release against the host's os-release; reads only the payloads. A failure is recorded as `failed`
  /// in the states there are (not in a dry run) and rethrown (exit 5).
  void verify();
  /// Reads `work`'s payload and checks it against its sums now (verify_payload(), with the installed tree that the
  /// transfer compares a directory payload with); a mismatch names the component, the payload and the sums file.
  void verify_payload_of(Work& work);
  /// After verify, before anything changes: each component that a k3s or RKE2 server runs found with its datastore
  /// (preflight_server(): an external one refused without --datastore-snapshot=skip, the free space for the staged
  /// version and the snapshot, every etcd member healthy). A refusal is recorded as `failed` and thrown
  /// (hoist::Failure, exit 1). `hoist stage` runs it too, so that a Plan's prepare step refuses before the cordon.
  void preflight();
  /// The preflight's etcd check (DatastoreOptions::etcd_health): hoist::Failure naming each member that is not
  /// healthy, when etcd could be asked.
  void check_etcd_health(const Work& work, const ServerDatastore& server) const;
  /// After stage, before switch_over: each server's datastore snapshotted (take_datastore_snapshot()) and the
  /// snapshot recorded in its state; for SQLite the unit is stopped first, its start recorded as owed.
  void snapshot();
  /// Before the first write: the host's system bus connected (HostSteps::bus()) when a switch of the run will owe
  /// restarts (a sysext's refresh, --restart), so that a host without one fails the run (hoist::Failure) before
  /// anything changes rather than after the switch.
  void reach_the_bus();
  /// `hoist stage`: the free space each component's staging needs (what a dry run would write: the payload file for
  /// file and sysext images, the added and changed bytes of a tree or a sync, plus a margin) on the filesystem it
  /// goes to, so that a full disk refuses the run before the drain, not in the middle of its staging. A refusal is
  /// recorded as `failed` and thrown (hoist::Failure, exit 1).
  void check_space();
  /// `hoist stage`: Installer::check_switch() of every component that changes: what the switch would refuse at the
  /// destination, refused now (recorded as `failed`, hoist::Failure).
  void check_switches();
  /// `hoist stage`: every component that changes staged beside its current version and recorded as staged
  /// (ComponentState::staged, saved before the staging), a version staged for another target removed first (a
  /// sync, which cannot stage, only says so). The last result says `stage succeeded`.
  void stage_ahead();
  /// The mounts that --remount or a manifest's `remount` names made writable (HostSteps::make_writable()).
  void remount();
  /// What killed runs left, removed per component; when that changed what is installed (a sync's cleanup finished a
  /// rollback), the state is saved and the gate asked again (a refusal is thrown, exit 3).
  void clean_leftovers();
  /// Every component that changes staged beside its current version (Installer::stage()), after a safe point each.
  void stage();
  /// Every component that changes switched (Installer::commit()), after a safe point each. Before each switch the
  /// intent (the target, and the restarts and health checks the switch owes) is saved in the component's state,
  /// when it has one: a run killed between the switch and its record leaves the next run what the switch owes.
  void switch_over();
  /// After a failure in remount … switch_over: the switches made so far undone (newest first), what was staged
  /// removed, and `failure` recorded as `failed` (in every component's state, created where needed, unless it is
  /// bad input: verification or usage). Errors while undoing are logged; those of the switches that stay made
  /// are also returned ("; app: could not switch back to …", empty when every switch was undone), for the run's
  /// error and recorded with `failure`.
  std::string undo(const std::exception& failure);
  /// Per component: the switch recorded in its state with the restarts and health checks it owes, in one save,
  /// with the boot id; `unchanged` for the others that have a state; then Installer::finish() and --keep.
  void record();
  /// HostSteps::after_switch() (mounts back, owed restarts, --reboot), then the health phase (run_health_phase()).
  /// A host step that fails (AfterSwitchFailure) is handled like a failed check: give_up_after_switch() switches
  /// back and throws (exit 1).
  void host_steps();

  [[nodiscard]] const std::vector<Work>& works() const { return m_works; }

 private:
  enum class Everyone { no, yes };
  /// A version staged for another target than `work`'s (ComponentState::staged): its files removed, unless they are
  /// a kept version, and the record cleared in `state` (which the caller saves). Best effort: a failure is a warning.
  void drop_stale_staged(Work& work, ComponentState& state);
  /// Whether `work`'s target is the complete version `hoist stage` left (read_states() sets Work::staged_ahead).
  [[nodiscard]] bool staged_ahead(const Work& work) const;
  void record_outcome(const char* outcome, const std::string& message, Everyone everyone);
  void decide(Work& work);
  void collect_garbage(Work& work, ComponentState& state);
  void tidy_up(Work& work);
  [[nodiscard]] std::vector<HealthCheck> checks_of(const Work& work) const;
  /// What an earlier run left a component that this run does not switch owing, made what this run's command asks
  /// for: the owed restarts it does not name dropped (a Plan that no longer restarts a unit can clear a restart
  /// that cannot succeed), the owed health checks replaced by this run's (none: dropped). Returns what it changed,
  /// for the last result ("" when nothing); the caller saves.
  std::string settle_owed(const Work& work, ComponentState& state) const;
  [[nodiscard]] TransferOptions transfer_options(const Work& work, ProgressReporter* progress) const;

  const Context& m_context;
  const HostRoot& m_root;
  const UpgradeOptions& m_options;
  const DryRun m_dry_run;
  const RunMode m_mode;
  /// "upgrade" or "stage": what the states' last results and the host steps name the run.
  const char* const m_command;
  const StateStore m_store;
  std::vector<UpgradeItem> m_items;
  std::vector<Work> m_works;
  // Declared in this order: the host steps go (putting remounts back) before the lock is released.
  std::optional<Lock> m_lock;
  std::optional<HostSteps> m_host;
};

/// The fields of the lines logged while `work` is in `phase`.
LogFields phase_fields(const UpgradeRun::Work& work, const char* phase);

/// A transfer's counts as log fields, for the line that reports them.
LogFields count_fields(const TransferStats& stats);

/// A transfer's counts as the log says them: "1 added (4 KiB), 0 changed (0 B), 0 removed (0 B), 7 unchanged".
std::string describe(const TransferStats& stats);

/// Seconds since `start`, for the lines that say how long a phase took.
double seconds_since(std::chrono::steady_clock::time_point start);

}  // namespace hoist
