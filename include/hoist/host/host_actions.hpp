#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "hoist/model/remount.hpp"

namespace hoist {

/// When a run reboots the host (`--reboot`).
enum class RebootPolicy {
  never,      ///< never
  if_needed,  ///< when the run changed the host (a component switched), or an earlier run's reboot is owed
  always,     ///< after every run, but never twice for one change: the run after the boot does not reboot again
  delegate,   ///< when if-needed would, but by writing the reboot sentinel for kured (or another node reboot daemon),
              ///< which reboots the node in its own time; hoist waits for the boot as after asking logind
};

/// Parses `never`, `if-needed`, `always`, `delegate`; throws UsageError otherwise.
RebootPolicy parse_reboot_policy(std::string_view text);
std::string_view to_string(RebootPolicy policy);

inline constexpr std::chrono::seconds k_default_reboot_timeout{600};
inline constexpr std::chrono::seconds k_default_restart_timeout{120};
/// The file kured watches (its --reboot-sentinel default), a host path.
inline constexpr const char* k_default_reboot_sentinel = "/var/run/reboot-required";

/// What a run does to the host beyond its files: the flags `--remount`,
/// `--restart UNIT`, `--reboot`, `--reboot-timeout` and `--restart-timeout`
/// of `upgrade` and `rollback` (docs/host-actions.md, "Remount" and "Restarts and reboots").
struct HostActions {
  Remount remount = Remount::no;
  std::vector<std::string> restart_units;  ///< in order; each a systemd unit name
  RebootPolicy reboot = RebootPolicy::never;
  std::chrono::seconds reboot_timeout = k_default_reboot_timeout;
  std::chrono::seconds restart_timeout = k_default_restart_timeout;
  std::string reboot_sentinel = k_default_reboot_sentinel;  ///< --reboot-sentinel: what --reboot delegate writes
  /// Called with what the reboot is for ("app 2.0.0") just before it is asked for, after the state records it:
  /// the last moment this process can tell anyone. Must not throw. May be empty.
  std::function<void(const std::string&)> before_reboot;
  /// A lock the reboots of other nodes take (kured's, `--kured-lock`): hoist takes it before its own reboot and
  /// gives it back when that reboot does not come, and after the boot. Empty members: no such lock.
  struct RebootLock {
    /// Waits until this node holds the lock, up to `deadline` (--reboot-timeout, which the reboot after it shares);
    /// throws hoist::Error naming who holds it when it is not taken by then.
    std::function<void(std::chrono::steady_clock::time_point deadline)> take;
    /// Gives it back when this node holds it; logs and never throws: the next run tries again.
    std::function<void()> give_back;
  } reboot_lock;
};

/// A unit name as `systemctl` takes it: `k3s` means `k3s.service`. Throws
/// UsageError for a name systemd would refuse (empty, `/`, or characters
/// outside `[A-Za-z0-9:_.\@-]`).
std::string unit_name(std::string_view text);

}  // namespace hoist
