#include "hoist/host/host_steps.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "hoist/host/boot_id.hpp"
#include "hoist/host/interrupted.hpp"
#include "hoist/model/state_update.hpp"
#include "hoist/sys/mount_namespace.hpp"
#include "hoist/sys/stop_signals.hpp"
#include "hoist/sys/system_bus.hpp"
#include "hoist/util/error.hpp"
#include "hoist/util/text.hpp"
#include "reboot.hpp"
#include "unit_restart.hpp"

namespace hoist {

namespace {

constexpr const char* k_sysext_unit = "systemd-sysext.service";
constexpr std::chrono::seconds k_call_timeout{25};

std::string env_or(const Environment& env, const char* name, const std::string& fallback) {
  const auto it = env.find(name);
  return it == env.end() || it->second.empty() ? fallback : it->second;
}

std::string targets_of(const std::vector<SwitchedComponent>& components) {
  std::string text;
  for (const auto& component : components) {
    text += (text.empty() ? "" : ", ") + component.name + " " + component.version;
  }
  return text;
}

}  // namespace

HostSteps::HostSteps(const Context& context, std::string command, HostActions actions, DryRun dry_run)
    : m_context(context), m_command(std::move(command)), m_actions(std::move(actions)), m_dry_run(dry_run) {
  stop_signals::install();
}

HostSteps::~HostSteps() = default;

SystemBus& HostSteps::bus() {
  if (!m_bus) {
    auto address = system_bus_address(m_context.root(), env_or(m_context.env, "DBUS_SYSTEM_BUS_ADDRESS", ""));
    if (!address) {
      throw Failure(address.error().message);
    }
    auto connected = SystemBus::connect(std::move(*address), k_call_timeout);
    if (!connected) {
      throw Failure(connected.error().message);
    }
    m_bus = std::make_unique<SystemBus>(std::move(*connected));
  }
  return *m_bus;
}

Handshake HostSteps::settle_pending_reboot(const StateStore& store, ComponentState& state, std::string_view target) {
  if (!state.pending_reboot) {
    return Handshake::none;
  }
  const PendingReboot pending = *state.pending_reboot;
  const std::string boot_id = read_boot_id(m_context.root());
  if (boot_id.empty()) {
    throw Failure("cannot tell whether the host rebooted: its boot id cannot be read (" +
                  m_context.root().display("/proc/sys/kernel/random/boot_id") + ")");
  }
  const bool dry_run = m_dry_run == DryRun::yes;
  if (boot_id == pending.boot_id) {
    if (dry_run) {
      spdlog::info("{}: the reboot into {} asked for at {} has not happened yet (boot {})", state.component,
                   pending.target, pending.requested_at, boot_id);
      return Handshake::none;
    }
    // The run that asked was stopped before the host went down (its pod was
    // deleted, the reboot was cancelled): the reboot is still owed.
    spdlog::warn("{}: the reboot into {} asked for at {} has not happened (the boot id is still {}): asking again",
                 state.component, pending.target, pending.requested_at, boot_id);
    const auto deadline = std::chrono::steady_clock::now() + m_actions.reboot_timeout;
    try {
      ask_for_reboot(deadline, state.component + " " + pending.target);
    } catch (const Interrupted&) {
      throw;  // the host going down stops the wait: the run after the boot confirms it
    } catch (const Error& e) {
      // Refused, or not within --reboot-timeout: the version switched to was never booted.
      throw AfterSwitchFailure(e.what(), {}, false);
    }
  }
  if (state.current == pending.target) {
    spdlog::info("{}: the host rebooted into {} (boot id {} → {}): done, no second reboot", state.component,
                 pending.target, pending.boot_id, boot_id);
    if (!dry_run && !m_reboot_confirmed && m_actions.reboot_lock.give_back) {
      m_actions.reboot_lock.give_back();  // kured's pod on this node may have given it back first
    }
    m_reboot_confirmed = true;
    if (!dry_run) {
      state.pending_reboot.reset();
      state.boot_id = boot_id;
      set_last_result(state, m_command, outcome::k_succeeded, pending.target, "rebooted into " + pending.target);
      store.save(state);
    }
    return Handshake::completed;
  }
  const std::string message = "the host rebooted (boot id " + pending.boot_id + " → " + boot_id + ") but " +
                              state.component + " is at " + (state.current.empty() ? "nothing" : state.current) +
                              ", not " + pending.target +
                              ": the host came back on the old version; not rebooting again";
  if (!target.empty() && target != pending.target) {
    spdlog::warn("{} (dropping that record: this run installs {})", message, target);
    if (!dry_run) {
      state.pending_reboot.reset();
      store.save(state);
    }
    return Handshake::none;
  }
  if (!dry_run) {
    set_last_result(state, m_command, outcome::k_failed, pending.target, message);
    save_failure_record(store, state);
  }
  throw Failure(message);
}

void HostSteps::make_writable(const std::vector<std::string>& host_paths) {
  if ((host_paths.empty() && m_left_writable.empty()) || m_dry_run == DryRun::yes || m_writable) {
    return;
  }
  throw_if_interrupted("remounting");
  // A mount the switch could not put back read-only is put back with this remount's (going back).
  std::vector<std::string> paths = host_paths;
  for (const HeldMount& left : m_left_writable) {
    if (std::find(paths.begin(), paths.end(), left.host_path) == paths.end()) {
      paths.push_back(left.host_path);
    }
  }
  m_writable.emplace(m_context.root(), paths, mount_namespace_path(), m_left_writable);
  m_left_writable.clear();
}

std::string HostSteps::mount_namespace_path() const {
  return env_or(m_context.env, k_mount_namespace_env, MountNamespace::k_host_path);
}

std::vector<std::string> HostSteps::restarts_owed_by(ComponentKind kind) const {
  std::vector<std::string> units;
  if (kind == ComponentKind::sysext) {
    units.emplace_back(k_sysext_unit);
  }
  units.insert(units.end(), m_actions.restart_units.begin(), m_actions.restart_units.end());
  return units;
}

void HostSteps::record_failure(const StateStore& store, const std::vector<SwitchedComponent>& components,
                               const std::string& message) {
  for (const auto& component : components) {
    auto state = store.load(component.name);
    if (state && (component.changed || !state->owed_restarts.empty())) {
      set_last_result(*state, m_command, outcome::k_failed, component.version, message);
      save_failure_record(store, *state);
    }
  }
}

void HostSteps::after_switch(const StateStore& store, const std::vector<SwitchedComponent>& components,
                             AfterRestarts after) {
  if (m_writable) {
    // Before anything slow: a reboot must not find the host writable.
    try {
      m_writable->restore();
    } catch (const Error& e) {
      m_left_writable = m_writable->left_writable();
      m_writable.reset();
      record_failure(store, components, e.what());
      throw AfterSwitchFailure(e.what(), {}, false);
    }
    m_writable.reset();
  }
  const bool changed =
      std::any_of(components.begin(), components.end(), [](const SwitchedComponent& c) { return c.changed; });
  // What the states owe (an earlier run's, or this run's own as recorded with its switch), each unit once, in
  // order.
  std::vector<std::string> units;
  std::vector<std::string> owed_by_earlier_runs;  // components that start this run owing restarts, unchanged
  auto add = [&units](const std::string& unit) {
    if (std::find(units.begin(), units.end(), unit) == units.end()) {
      units.push_back(unit);
    }
  };
  for (const auto& component : components) {
    if (m_dry_run == DryRun::yes) {
      break;
    }
    if (const auto state = store.load(component.name)) {
      std::for_each(state->owed_restarts.begin(), state->owed_restarts.end(), add);
      if (!component.changed && !state->owed_restarts.empty()) {
        owed_by_earlier_runs.push_back(component.name);
      }
    }
  }
  if (!owed_by_earlier_runs.empty()) {
    spdlog::info("{}: doing the restarts an earlier run owes ({})", joined(owed_by_earlier_runs, ", "),
                 joined(units, ", "));
  }
  std::vector<std::string> restarted;  // asked of systemd by this call: done, or queued and failed
  for (const auto& unit : units) {
    throw_if_interrupted("restarting " + unit);
    const RestartMethod method = unit == k_sysext_unit ? RestartMethod::reload_or_restart : RestartMethod::restart;
    bool queued = false;
    try {
      restart_unit(bus(), unit, method, m_actions.restart_timeout, queued);
    } catch (const Error& e) {
      const std::string message = std::string(e.what()) + " (" + targets_of(components) + " switched)";
      record_failure(store, components, message);
      if (dynamic_cast<const Interrupted*>(&e) != nullptr) {
        throw Interrupted(message);  // stopped, not failed: what is owed stays owed to the next run
      }
      if (queued) {
        restarted.push_back(unit);
      }
      throw AfterSwitchFailure(message, restarted, queued);
    }
    restarted.push_back(unit);
    strike_owed(store, components, unit);
  }
  for (const auto& name : owed_by_earlier_runs) {
    if (auto state = store.load(name)) {
      set_last_result(*state, m_command, outcome::k_succeeded, state->current,
                      "restarted what an earlier run owed: " + joined(units, ", "));
      store.save(*state);
    }
  }
  if (after == AfterRestarts::no_reboot) {
    return;
  }
  const bool reboot_needed =
      (m_actions.reboot == RebootPolicy::always && !m_reboot_confirmed) ||
      ((m_actions.reboot == RebootPolicy::if_needed || m_actions.reboot == RebootPolicy::delegate) && changed);
  if (reboot_needed) {
    try {
      reboot(store, components);
    } catch (const Interrupted&) {
      throw;  // the host going down stops the wait: the run after the boot confirms it
    } catch (const Error& e) {
      throw AfterSwitchFailure(e.what(), restarted, false);
    }
  }
  if (m_actions.reboot != RebootPolicy::never) {
    spdlog::info("no reboot: {}", m_reboot_confirmed
                                      ? "the host already rebooted into this version"
                                      : "nothing changed (--reboot " + std::string(to_string(m_actions.reboot)) + ")");
  }
}

void HostSteps::stop_unit(const std::string& unit) {
  throw_if_interrupted("stopping " + unit);
  bool queued = false;
  restart_unit(bus(), unit, RestartMethod::stop, m_actions.restart_timeout, queued);
}

void HostSteps::strike_owed(const StateStore& store, const std::vector<SwitchedComponent>& components,
                            const std::string& unit) {
  for (const auto& component : components) {
    auto state = store.load(component.name);
    if (!state) {
      continue;
    }
    const auto it = std::find(state->owed_restarts.begin(), state->owed_restarts.end(), unit);
    if (it != state->owed_restarts.end()) {
      state->owed_restarts.erase(it);
      store.save(*state);
    }
  }
}

void HostSteps::reboot(const StateStore& store, const std::vector<SwitchedComponent>& components) {
  throw_if_interrupted("rebooting");
  // The handshake's first half: what must be current after the boot, and the
  // boot it must come after, recorded before the request (the request may be
  // the last thing this process does).
  const std::string boot_id = read_boot_id(m_context.root());
  const std::string now = now_rfc3339();
  for (const auto& component : components) {
    auto state = store.load(component.name);
    if (!state) {
      continue;
    }
    state->pending_reboot = PendingReboot{component.version, boot_id, now};
    set_last_result(*state, m_command, outcome::k_rebooting, component.version);
    store.save(*state);
  }
  spdlog::info("rebooting for {} (--reboot {}; boot id {})", targets_of(components), to_string(m_actions.reboot),
               boot_id);
  m_bus.reset();  // request_reboot() makes its own connection
  const auto deadline = std::chrono::steady_clock::now() + m_actions.reboot_timeout;
  ask_for_reboot(deadline, targets_of(components));
}

void HostSteps::ask_for_reboot(std::chrono::steady_clock::time_point deadline, const std::string& what) {
  // kured's lock first (--kured-lock): no reboot of this node while kured reboots another. The wait shares
  // --reboot-timeout with the reboot; a lock not taken in it fails the reboot as a refusal does.
  const bool locked = m_actions.reboot != RebootPolicy::delegate && m_actions.reboot_lock.take;
  if (locked) {
    m_actions.reboot_lock.take(deadline);
  }
  if (m_actions.before_reboot) {
    m_actions.before_reboot(what);  // the last moment this process can tell anyone
  }
  if (m_actions.reboot != RebootPolicy::delegate) {
    try {
      const RebootRoute route = request_reboot(
          m_context.root(), RebootOptions{env_or(m_context.env, "DBUS_SYSTEM_BUS_ADDRESS", ""), deadline, {}});
      spdlog::info("asked for the reboot through {}", to_string(route));
      wait_for_reboot(deadline, what, m_actions.reboot_timeout);
    } catch (const Interrupted&) {
      throw;  // the host going down: the lock stays this node's until the run after the boot gives it back
    } catch (const Error&) {
      if (locked) {
        m_actions.reboot_lock.give_back();  // no reboot came: kured may reboot others again
      }
      throw;
    }
  }
  // kured (or another reboot daemon) reboots the node when it sees the sentinel, in its own window and one node at
  // a time; this run waits for the boot as after asking logind, and the run after the boot confirms it.
  write_reboot_sentinel(m_context.root(), m_actions.reboot_sentinel, "hoist: reboot into " + what + "\n");
  spdlog::info("reboot delegated: wrote {} for kured to reboot the node; waiting up to {} s (--reboot-timeout)",
               m_context.root().display(m_actions.reboot_sentinel), m_actions.reboot_timeout.count());
  try {
    wait_for_reboot(deadline, what, m_actions.reboot_timeout);
  } catch (const Interrupted&) {
    throw;  // the host going down: the sentinel goes with the boot (/run is a tmpfs)
  } catch (const Error&) {
    // The reboot did not come: the switch is taken back, and no reboot is owed any more.
    if (auto removed = remove_reboot_sentinel(m_context.root(), m_actions.reboot_sentinel); !removed) {
      spdlog::warn("could not remove the reboot sentinel: {}", removed.error().message);
    }
    throw;
  }
}

}  // namespace hoist
