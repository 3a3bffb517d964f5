#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "hoist/sys/system_bus.hpp"

namespace hoist {

/// Which systemd Manager method starts the job.
enum class RestartMethod {
  restart,            ///< RestartUnit: stop, then start (`--restart`)
  reload_or_restart,  ///< ReloadOrRestartUnit: reload if the unit can, else restart (systemd-sysext.service)
  stop,               ///< StopUnit: a k3s server stopped for its SQLite copy or a restore (docs/datastore.md)
};

/// The D-Bus names of systemd's manager, for callers and tests.
inline constexpr const char* k_systemd_service = "org.freedesktop.systemd1";
inline constexpr const char* k_systemd_path = "/org/freedesktop/systemd1";
inline constexpr const char* k_systemd_manager = "org.freedesktop.systemd1.Manager";

/// Restarts `unit` through systemd on `bus`, in mode `replace` (the job
/// replaces a conflicting queued one, as `systemctl restart` does), and waits
/// up to `timeout` for the job's JobRemoved signal. The signal is subscribed
/// to before the job is queued, so a job that finishes at once is not missed.
/// A result other than `done` (or `skipped`) throws hoist::Failure naming the
/// unit and the result, with the unit's ActiveState/SubState and, for a
/// service, its Result (`exit-code`, `timeout`…) when systemd tells them; so
/// do a timeout and a refused call (an unknown unit: its D-Bus error).
/// SIGTERM/SIGINT during the wait throw Interrupted. `queued` is set once systemd
/// has queued the job: from then on the unit is being restarted, whatever the end.
void restart_unit(SystemBus& bus, std::string_view unit, RestartMethod method, std::chrono::milliseconds timeout,
                  bool& queued);

}  // namespace hoist
