#include "reboot.hpp"

#include <spdlog/spdlog.h>
#include <sys/reboot.h>
#include <unistd.h>

#include <sdbus-c++/sdbus-c++.h>
#include <cerrno>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "hoist/host/interrupted.hpp"
#include "hoist/sys/stop_signals.hpp"
#include "hoist/sys/system_bus.hpp"
#include "hoist/util/error.hpp"
#include "unit_restart.hpp"

namespace hoist {

namespace {

constexpr const char* k_logind_service = "org.freedesktop.login1";
constexpr const char* k_logind_path = "/org/freedesktop/login1";
constexpr const char* k_logind_manager = "org.freedesktop.login1.Manager";
constexpr std::chrono::seconds k_call_timeout{25};

bool is_unknown_method(const sdbus::Error& e) {
  return e.getName() == "org.freedesktop.DBus.Error.UnknownMethod";
}

// No logind on this bus (and none to be activated).
bool is_missing_service(const sdbus::Error& e) {
  return e.getName() == "org.freedesktop.DBus.Error.ServiceUnknown" ||
         e.getName() == "org.freedesktop.DBus.Error.NameHasNoOwner";
}

// logind v256 answers BlockedByInhibitorLock; older ones (Debian 12 has v252)
// AccessDenied "Access denied to root due to active block inhibitor".
bool is_blocked(const sdbus::Error& e) {
  return e.getName() == "org.freedesktop.login1.BlockedByInhibitorLock" ||
         (e.getName() == "org.freedesktop.DBus.Error.AccessDenied" &&
          e.getMessage().find("inhibitor") != std::string::npos);
}

// A shutdown is already under way: what we asked for is happening.
bool is_in_progress(const sdbus::Error& e) {
  return e.getName() == "org.freedesktop.login1.OperationInProgress";
}

std::string describe(const sdbus::Error& e) {
  return e.getMessage() + " (" + e.getName() + ")";
}

// A stop signal that lands while the request is on its way ends the call with EINTR: sent, its answer never read.
// It is what a host going down for this very reboot sends (the kubelet stopping the Job's pod), so it is the
// run's stop, as one during the wait for the reboot is, not a manager that refused: nothing is switched back here,
// and the run after the boot checks it (a reboot that never came is found there).
void throw_if_stopped_while_asking(const sdbus::Error& e, RebootRoute route) {
  if (e.getName() == "System.Error.EINTR" && stop_signals::received() != 0) {
    throw Interrupted("stopped by " + std::string(stop_signals::received_name()) +
                      " while asking for the reboot through " + std::string(to_string(route)) +
                      " (the host is going down; the run after the boot checks it)");
  }
}

// The block inhibitors of shutdown, as ListInhibitors names them, for the
// message that says why the reboot waits.
std::string blocking_inhibitors(sdbus::IProxy& logind) {
  using Inhibitor = sdbus::Struct<std::string, std::string, std::string, std::string, uint32_t, uint32_t>;
  std::vector<Inhibitor> inhibitors;
  try {
    logind.callMethod("ListInhibitors").onInterface(k_logind_manager).storeResultsTo(inhibitors);
  } catch (const sdbus::Error& e) {
    return "(ListInhibitors failed: " + describe(e) + ")";
  }
  std::string text;
  for (const auto& inhibitor : inhibitors) {
    const auto& [what, who, why, mode, uid, pid] = inhibitor;
    if (mode != "block" || what.find("shutdown") == std::string::npos) {
      continue;
    }
    text += (text.empty() ? "" : "; ") +
            fmt::format("'{}' ({}; what {}, mode {}, uid {}, pid {})", who, why, what, mode, uid, pid);
  }
  return text.empty() ? std::string("no block inhibitor of shutdown is listed") : text;
}

enum class Asked { yes, blocked, unknown_method, absent, refused };

// How a manager answered when it did not reboot: absent (no such service on
// the bus: try the next way) or refused (it is there and said no: stop).
struct Declined {
  bool absent = false;
  std::string message;
};

Asked ask_logind(sdbus::IProxy& logind, bool with_flags, std::string& failure) {
  try {
    if (with_flags) {
      logind.callMethod("RebootWithFlags").onInterface(k_logind_manager).withArguments(k_logind_root_check_inhibitors);
    } else {
      logind.callMethod("Reboot").onInterface(k_logind_manager).withArguments(false);
    }
    return Asked::yes;
  } catch (const sdbus::Error& e) {
    throw_if_stopped_while_asking(e, with_flags ? RebootRoute::logind : RebootRoute::logind_legacy);
    if (with_flags && is_unknown_method(e)) {
      return Asked::unknown_method;
    }
    if (is_blocked(e)) {
      failure = describe(e);
      return Asked::blocked;
    }
    if (is_in_progress(e)) {
      spdlog::info("logind says a shutdown is already in progress: {}", describe(e));
      return Asked::yes;
    }
    failure = describe(e);
    return is_missing_service(e) ? Asked::absent : Asked::refused;
  }
}

// logind, waiting out block inhibitors. `declined` says why not when it
// returns nullopt: logind is not there, or refused for another reason.
std::optional<RebootRoute> reboot_through_logind(SystemBus& bus, const RebootOptions& options, Declined& declined) {
  auto logind =
      sdbus::createProxy(bus.connection(), sdbus::ServiceName{k_logind_service}, sdbus::ObjectPath{k_logind_path});
  bool with_flags = true;
  std::string last_inhibitors;
  for (;;) {
    throw_if_interrupted("asking logind to reboot");
    std::string failure;
    Asked asked = ask_logind(*logind, with_flags, failure);
    if (asked == Asked::unknown_method) {
      spdlog::info("logind has no RebootWithFlags (older than systemd v248): asking with Reboot(false)");
      with_flags = false;
      asked = ask_logind(*logind, with_flags, failure);
    }
    switch (asked) {
      case Asked::yes: return with_flags ? RebootRoute::logind : RebootRoute::logind_legacy;
      case Asked::absent:
      case Asked::refused:
        spdlog::warn("logind does not reboot the host: {}; asking systemd", failure);
        declined = Declined{asked == Asked::absent, "logind: " + failure};
        return std::nullopt;
      case Asked::unknown_method:
      case Asked::blocked: break;
    }
    const std::string inhibitors = blocking_inhibitors(*logind);
    const auto now = std::chrono::steady_clock::now();
    if (now >= options.deadline) {
      throw Failure("failed to reboot the host: blocked by an inhibitor lock until the --reboot-timeout ran out (" +
                    failure + "); held by: " + inhibitors);
    }
    if (inhibitors != last_inhibitors) {
      spdlog::warn(
          "the reboot is blocked by an inhibitor lock held by {}; asking again every {} ms until it is "
          "released or --reboot-timeout runs out",
          inhibitors, options.retry_interval.count());
      last_inhibitors = inhibitors;
    }
    const auto sleep = std::min<std::chrono::steady_clock::duration>(options.retry_interval, options.deadline - now);
    (void)stop_signals::wake_flag()->wait_for(std::chrono::duration_cast<std::chrono::milliseconds>(sleep) +
                                              std::chrono::milliseconds(1));
  }
}

bool reboot_through_systemd(SystemBus& bus, Declined& declined) {
  auto manager =
      sdbus::createProxy(bus.connection(), sdbus::ServiceName{k_systemd_service}, sdbus::ObjectPath{k_systemd_path});
  try {
    sdbus::ObjectPath job;
    // replace-irreversibly: nothing queued later can cancel the reboot, as
    // `systemctl reboot` without logind does it.
    manager->callMethod("StartUnit")
        .onInterface(k_systemd_manager)
        .withArguments(std::string("reboot.target"), std::string("replace-irreversibly"))
        .storeResultsTo(job);
    spdlog::info("systemd queued reboot.target as job {}", std::string(job));
    return true;
  } catch (const sdbus::Error& e) {
    throw_if_stopped_while_asking(e, RebootRoute::systemd);
    declined = Declined{is_missing_service(e), "systemd: " + describe(e)};
    return false;
  }
}

[[noreturn]] void reboot_syscall() {
  // The last resort skips the clean shutdown: flush what the kernel holds first.
  ::sync();
  if (::reboot(RB_AUTOBOOT) != 0) {
    throw Failure(system_message("reboot the host with reboot(2) (it needs CAP_SYS_BOOT)", errno));
  }
  // In a PID namespace other than the host's, reboot(2) ends the namespace;
  // it does not come back here.
  throw Failure("reboot(2) returned without rebooting");
}

}  // namespace

std::string_view to_string(RebootRoute route) {
  switch (route) {
    case RebootRoute::logind: return "logind RebootWithFlags";
    case RebootRoute::logind_legacy: return "logind Reboot";
    case RebootRoute::systemd: return "systemd StartUnit reboot.target";
    case RebootRoute::syscall: return "reboot(2)";
  }
  return "?";
}

RebootRoute request_reboot(const HostRoot& root, const RebootOptions& options) {
  std::optional<SystemBus> bus;
  std::string why_not;
  if (auto address = system_bus_address(root, options.bus_address)) {
    if (auto connected = SystemBus::connect(std::move(*address), k_call_timeout)) {
      bus.emplace(std::move(*connected));
    } else {
      why_not = connected.error().message;
    }
  } else {
    why_not = address.error().message;
  }
  if (bus) {
    spdlog::info("asking logind on {} to reboot the host", bus->display());
    Declined logind;
    if (auto route = reboot_through_logind(*bus, options, logind)) {
      return *route;
    }
    Declined systemd;
    if (reboot_through_systemd(*bus, systemd)) {
      return RebootRoute::systemd;
    }
    // A manager that is there and says no is not overruled by reboot(2):
    // something on the host (a policy, a shutdown under way) decided.
    if (!logind.absent || !systemd.absent) {
      throw Failure("failed to reboot the host: " + logind.message + "; " + systemd.message);
    }
    why_not = "neither logind nor systemd is on " + bus->display();
  }
  spdlog::warn("{}: rebooting with sync(2) and reboot(2), without a clean shutdown", why_not);
  reboot_syscall();
}

void wait_for_reboot(std::chrono::steady_clock::time_point deadline, std::string_view target,
                     std::chrono::seconds timeout) {
  spdlog::info("waiting up to {} s for the host to go down (--reboot-timeout); the run after the boot confirms {}",
               timeout.count(), target);
  const WakeFlag* interrupt = stop_signals::wake_flag();
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    if (stop_signals::received() != 0) {
      // The host going down: not a success yet, and not 0 for SUC, which would
      // take the Job as done and move on while this node reboots.
      throw Interrupted("stopped by " + std::string(stop_signals::received_name()) +
                        " while waiting for the reboot into " + std::string(target) +
                        " (the host is going down; the run after the boot checks it)");
    }
    if (now >= deadline) {
      throw Failure("the host did not reboot within " + std::to_string(timeout.count()) +
                    " s (--reboot-timeout) after the reboot into " + std::string(target) + " was asked for");
    }
    (void)interrupt->wait_for(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now) +
                              std::chrono::milliseconds(1));
  }
}

void write_reboot_sentinel(const HostRoot& root, const std::string& host_path, std::string_view text) {
  if (auto written = root.replace_file(host_path, text, 0644); !written) {
    throw Failure("failed to write the reboot sentinel " + root.display(host_path) + ": " + written.error().message);
  }
}

Expected<void> remove_reboot_sentinel(const HostRoot& root, const std::string& host_path) {
  auto parent = root.open_parent(host_path);
  if (!parent) {
    return parent.error();
  }
  if (::unlinkat(parent->first.get(), parent->second.c_str(), 0) != 0 && errno != ENOENT) {
    return sys_error("remove " + root.display(host_path));
  }
  return {};
}

}  // namespace hoist
