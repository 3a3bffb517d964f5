#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "hoist/sys/host_root.hpp"

namespace hoist {

/// How the reboot was asked for, most graceful first.
enum class RebootRoute {
  logind,         ///< logind RebootWithFlags(SD_LOGIND_ROOT_CHECK_INHIBITORS)
  logind_legacy,  ///< logind Reboot(false): a logind older than v248 without the *WithFlags methods
  systemd,        ///< systemd StartUnit("reboot.target", "replace-irreversibly"): no logind
  syscall,        ///< sync(2) and reboot(2) (CAP_SYS_BOOT): no system bus at all
};

std::string_view to_string(RebootRoute route);

/// SD_LOGIND_ROOT_CHECK_INHIBITORS (org.freedesktop.login1(5)): honour block
/// inhibitors for root too, which logind otherwise lets through.
inline constexpr uint64_t k_logind_root_check_inhibitors = UINT64_C(1) << 0;

struct RebootOptions {
  /// DBUS_SYSTEM_BUS_ADDRESS, or "" for the socket inside the host root.
  std::string bus_address;
  /// The end of --reboot-timeout: blocked by an inhibitor until then, give up.
  std::chrono::steady_clock::time_point deadline;
  /// How often a reboot blocked by an inhibitor is asked for again.
  std::chrono::milliseconds retry_interval{2000};
};

/// Asks the host to reboot, the cleanest way it offers (docs/host-actions.md, "Reboot"):
/// logind's RebootWithFlags with ROOT_CHECK_INHIBITORS; Reboot(false) when
/// logind does not know that method (UnknownMethod); systemd's
/// StartUnit("reboot.target", "replace-irreversibly") when there is no logind
/// (or it refuses for another reason); sync() and reboot(2) when there is no
/// system bus to ask, or neither service is on it. When one of them is there
/// and refuses (and the other refuses or is absent), hoist::Failure names both
/// answers: reboot(2) does not overrule the host. systemd's Manager.Reboot() is
/// never called: it reboots without stopping services. A reboot blocked by an inhibitor lock
/// (BlockedByInhibitorLock, or AccessDenied "…inhibitor" from logind before
/// v256) is asked for again every `retry_interval` until `deadline`, then
/// throws hoist::Failure naming who holds the block inhibitors (ListInhibitors).
/// SIGTERM/SIGINT while waiting throw Interrupted. Returns how it was asked.
RebootRoute request_reboot(const HostRoot& root, const RebootOptions& options);

/// Blocks until the host goes down, which this process sees as SIGTERM (then
/// it throws Interrupted: exit 1, never 0, so that SUC does not take the Job
/// as done before the node has rebooted), or until `deadline` (then it throws
/// hoist::Failure: the reboot never came, --reboot-timeout). `target` names
/// what the reboot is for, in both messages.
[[noreturn]] void wait_for_reboot(std::chrono::steady_clock::time_point deadline, std::string_view target,
                                  std::chrono::seconds timeout);

/// --reboot delegate: writes `text` to the host file `host_path` (kured's sentinel, /var/run/reboot-required),
/// atomically, its directory made when missing. Throws hoist::Failure naming the file.
void write_reboot_sentinel(const HostRoot& root, const std::string& host_path, std::string_view text);

/// Removes the sentinel write_reboot_sentinel() wrote; one already gone is no error.
Expected<void> remove_reboot_sentinel(const HostRoot& root, const std::string& host_path);

}  // namespace hoist
