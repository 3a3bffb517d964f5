#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hoist/host/host_actions.hpp"
#include "hoist/host/writable_mounts.hpp"
#include "hoist/model/component.hpp"
#include "hoist/model/context.hpp"
#include "hoist/model/state.hpp"
#include "hoist/transfer/transfer.hpp"
#include "hoist/util/error.hpp"

namespace hoist {

class SystemBus;

/// A component as it is after a run's switches.
struct SwitchedComponent {
  std::string name;
  ComponentKind kind = ComponentKind::tree;
  std::string version;   ///< current after the run
  bool changed = false;  ///< whether this run switched it
};

/// A host step after a switch that failed before the versions switched to were shown to run: a restart that
/// failed (the bus not there, the call refused, a job that did not end `done` in time), a reboot that did not come
/// (refused, or not within --reboot-timeout), the mounts not put back read-only. The run switches back what it
/// switched (the run room's give-up). SIGTERM and SIGINT are not this: they throw Interrupted, which leaves the
/// versions and what they owe to the next run.
class AfterSwitchFailure : public Failure {
 public:
  AfterSwitchFailure(const std::string& message, std::vector<std::string> restarted, bool unit_failed)
      : Failure(message), m_restarted(std::move(restarted)), m_unit_failed(unit_failed) {}

  /// The units whose restart the call asked systemd for, in order: restarted, or queued and failed. They run
  /// something else now than before, so going back restarts them again; the others were never touched.
  [[nodiscard]] const std::vector<std::string>& restarted() const noexcept { return m_restarted; }
  /// Whether a unit was restarted and did not come up: the version was tried and failed, as a failed health
  /// check says (then the version left is quarantined). False when nothing was tried (no bus, a refused call, a
  /// reboot that did not come, the mounts).
  [[nodiscard]] bool unit_failed() const noexcept { return m_unit_failed; }

 private:
  std::vector<std::string> m_restarted;
  bool m_unit_failed;
};

/// What after_switch() does once the restarts are done.
enum class AfterRestarts {
  reboot_per_policy,  ///< reboot when --reboot asks for it
  no_reboot,          ///< nothing: a switch back before anything started the version it left needs no boot
};

/// What settle_pending_reboot() found.
enum class Handshake {
  none,       ///< no reboot was pending (or a stale one was dropped)
  completed,  ///< the host rebooted into the target: this run only confirms it
};

/// The environment variable that names another mount namespace file than
/// /proc/1/ns/mnt as the host's (for tests and for hosts whose init is not
/// PID 1 of the pod's PID namespace).
inline constexpr const char* k_mount_namespace_env = "HOIST_HOST_MOUNT_NAMESPACE";

/// The steps of `upgrade` and `rollback` that talk to the host beyond its
/// files (docs/host-actions.md, "Remount", "Restarts and reboots", "The reboot handshake"),
/// called at fixed points of a run, all under the lock:
///
///   settle_pending_reboot (per component, before the gate)
///   → make_writable (before the first write)
///   → after_switch (every switch made and recorded)
///
/// Create it after taking the lock: its destructor puts remounts back, which
/// must happen before the lock is released. It installs the SIGTERM/SIGINT
/// handlers (sys/stop_signals.hpp) if the run has not already.
class HostSteps {
 public:
  HostSteps(const Context& context, std::string command, HostActions actions, DryRun dry_run);
  HostSteps(const HostSteps&) = delete;
  HostSteps& operator=(const HostSteps&) = delete;
  ~HostSteps();

  /// The reboot handshake with SUC, for a component whose state records a
  /// pending reboot (else nothing happens): with the boot id unchanged, the
  /// reboot asked for has not come yet and is asked for again (this blocks
  /// like the first request: it never returns; refused, or not come within
  /// --reboot-timeout, it throws AfterSwitchFailure); with a new boot id and the
  /// target current, the pending reboot is cleared and Handshake::completed
  /// returned (exit 0 follows, and no second reboot); with a new boot id and
  /// another version current, the host came back on the old version:
  /// hoist::Failure saying so (exit 1), unless `target` is a newer target than
  /// the pending one (then the stale record is dropped). `target` "" means
  /// "the pending one" (rollback). The state is saved when it changes (never
  /// in a dry run).
  Handshake settle_pending_reboot(const StateStore& store, ComponentState& state, std::string_view target);

  /// Makes the mounts that hold `host_paths` (those of the components to
  /// remount: paths_written()) writable until after_switch() or this object's
  /// end (also after a failure or SIGTERM). Nothing happens for no paths.
  void make_writable(const std::vector<std::string>& host_paths);

  /// The file of the host's mount namespace: `$HOIST_HOST_MOUNT_NAMESPACE`, else /proc/1/ns/mnt.
  [[nodiscard]] std::string mount_namespace_path() const;

  /// The restarts a switch of a component of `kind` makes owed, in order: the sysext refresh
  /// (systemd-sysext.service) for a sysext, then the `--restart` units. The run records them in the state
  /// it saves with the switch (ComponentState::owed_restarts), before after_switch() does them.
  [[nodiscard]] std::vector<std::string> restarts_owed_by(ComponentKind kind) const;

  /// After every switch is made and recorded: the mounts go back read-only;
  /// then every restart the components' states owe (each switch records the
  /// ones it needs in the same save as the switch; an earlier run may have left
  /// some), each unit once, in order; each one done is struck from the states
  /// that owe it, and a component whose owed restarts an unchanged run finished
  /// records that as its result. Then, with AfterRestarts::reboot_per_policy and
  /// per `--reboot`, the pending reboot is recorded in every component's state
  /// and the reboot asked for, and this blocks until the host goes down (it never
  /// returns then). A failure is recorded in the states of the components that
  /// changed or owe restarts, the restarts not done stay owed, and it is thrown:
  /// AfterSwitchFailure for a failed restart, a reboot refused or timed out and
  /// mounts not put back; Interrupted for SIGTERM/SIGINT.
  void after_switch(const StateStore& store, const std::vector<SwitchedComponent>& components,
                    AfterRestarts after = AfterRestarts::reboot_per_policy);

  /// Stops `unit` through systemd (StopUnit), waiting up to --restart-timeout: a k3s server is stopped before its
  /// SQLite datastore is copied or restored. The caller records the start it then owes. Throws hoist::Failure.
  void stop_unit(const std::string& unit);

  /// The host's system bus, connected at the first call (hoist::Failure when it cannot be).
  SystemBus& bus();

  /// A switch back after this run confirmed a reboot (failed health checks): under `--reboot always` it needs a
  /// boot of its own, which the confirmation would otherwise skip.
  void forget_confirmed_reboot() noexcept { m_reboot_confirmed = false; }

 private:
  [[noreturn]] void reboot(const StateStore& store, const std::vector<SwitchedComponent>& components);
  /// Asks for the reboot into `what` (logind, or with --reboot delegate the sentinel kured watches) and waits for the
  /// host to go down until `deadline` (wait_for_reboot()). A delegated reboot that does not come removes its
  /// sentinel before it throws.
  [[noreturn]] void ask_for_reboot(std::chrono::steady_clock::time_point deadline, const std::string& what);
  void record_failure(const StateStore& store, const std::vector<SwitchedComponent>& components,
                      const std::string& message);
  void strike_owed(const StateStore& store, const std::vector<SwitchedComponent>& components, const std::string& unit);

  const Context& m_context;
  std::string m_command;
  HostActions m_actions;
  DryRun m_dry_run;
  std::optional<WritableMounts> m_writable;
  std::vector<HeldMount> m_left_writable;  ///< what a failed restore left writable, for the next make_writable()
  std::unique_ptr<SystemBus> m_bus;
  bool m_reboot_confirmed = false;
};

}  // namespace hoist
