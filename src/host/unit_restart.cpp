#include "unit_restart.hpp"

#include <spdlog/spdlog.h>

#include <sdbus-c++/sdbus-c++.h>
#include <optional>

#include <fmt/format.h>

#include "hoist/host/interrupted.hpp"
#include "hoist/sys/stop_signals.hpp"
#include "hoist/util/error.hpp"

namespace hoist {

namespace {

struct JobEnd {
  std::string result;
};

std::string seconds(std::chrono::milliseconds timeout) {
  return fmt::format("{:g} s", static_cast<double>(timeout.count()) / 1000.0);
}

// "failed (ActiveState failed, SubState failed, Result exit-code)", as far as
// systemd answers: the detail `systemctl status` would start from.
std::string unit_detail(sdbus::IConnection& connection, sdbus::IProxy& manager, std::string_view unit) {
  try {
    sdbus::ObjectPath path;
    manager.callMethod("GetUnit").onInterface(k_systemd_manager).withArguments(std::string(unit)).storeResultsTo(path);
    auto proxy = sdbus::createProxy(connection, sdbus::ServiceName{k_systemd_service}, std::move(path));
    std::string detail;
    for (const char* property : {"ActiveState", "SubState"}) {
      const auto value = proxy->getProperty(property).onInterface("org.freedesktop.systemd1.Unit").get<std::string>();
      detail += (detail.empty() ? "" : ", ") + std::string(property) + " " + value;
    }
    if (unit.ends_with(".service")) {
      const auto result =
          proxy->getProperty("Result").onInterface("org.freedesktop.systemd1.Service").get<std::string>();
      detail += ", Result " + result;
    }
    return " (" + detail + ")";
  } catch (const sdbus::Error&) {
    return {};  // the detail is a courtesy: the job result is the error
  }
}

}  // namespace

void restart_unit(SystemBus& bus, std::string_view unit, RestartMethod method, std::chrono::milliseconds timeout,
                  bool& queued) {
  const char* method_name = method == RestartMethod::restart ? "RestartUnit"
                            : method == RestartMethod::stop  ? "StopUnit"
                                                             : "ReloadOrRestartUnit";
  const std::string verb = method == RestartMethod::stop ? "stop" : "restart";
  const std::string name(unit);
  auto manager =
      sdbus::createProxy(bus.connection(), sdbus::ServiceName{k_systemd_service}, sdbus::ObjectPath{k_systemd_path});

  // Subscribe first: JobRemoved can come before our call returns its job path.
  // Signals are only dispatched inside wait_until(), so matching the path
  // afterwards is race-free.
  std::vector<std::pair<sdbus::ObjectPath, std::string>> removed;
  manager->uponSignal("JobRemoved")
      .onInterface(k_systemd_manager)
      .call([&removed](uint32_t /*id*/, const sdbus::ObjectPath& job, const std::string& /*unit*/,
                       const std::string& result) { removed.emplace_back(job, result); });
  sdbus::ObjectPath job;
  try {
    // Subscribe() makes systemd emit job signals to us whoever queued the job;
    // systemd also sends them to the client that queued it, so its failure is
    // not fatal (a minimal manager may lack it).
    try {
      manager->callMethod("Subscribe").onInterface(k_systemd_manager);
    } catch (const sdbus::Error& e) {
      spdlog::debug("systemd Subscribe failed: {} ({})", e.getMessage(), e.getName());
    }
    manager->callMethod(method_name).onInterface(k_systemd_manager).withArguments(name, "replace").storeResultsTo(job);
  } catch (const sdbus::Error& e) {
    throw Failure("failed to " + verb + " " + name + " (" + method_name + " on " + bus.display() +
                  "): " + e.getMessage() + " (" + e.getName() + ")");
  }
  queued = true;
  spdlog::info("{}: {} queued as job {}; waiting up to {} for it", name, method_name, std::string(job),
               seconds(timeout));

  std::optional<JobEnd> end;
  auto ours = [&]() {
    for (const auto& [path, result] : removed) {
      if (path == job) {
        end = JobEnd{result};
        return true;
      }
    }
    removed.clear();
    return false;
  };
  auto waited = bus.wait_until(ours, std::chrono::steady_clock::now() + timeout, stop_signals::wake_flag());
  if (!waited) {
    throw Failure("failed to " + verb + " " + name + ": " + waited.error().message);
  }
  switch (*waited) {
    case BusWait::interrupted:
      throw_if_interrupted("the " + verb + " of " + name + " finished");
      throw Interrupted("stopped before the " + verb + " of " + name + " finished");
    case BusWait::timed_out:
      throw Failure("failed to " + verb + " " + name + ": job " + std::string(job) + " did not finish within " +
                    seconds(timeout) + " (--restart-timeout)");
    case BusWait::done: break;
  }
  if (end->result != "done" && end->result != "skipped") {
    throw Failure("failed to " + verb + " " + name + ": the job's result is '" + end->result + "'" +
                  unit_detail(bus.connection(), *manager, name));
  }
  spdlog::info("{}: {} ({})", name, method == RestartMethod::stop ? "stopped" : "restarted", end->result);
}

}  // namespace hoist
