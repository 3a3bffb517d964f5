#include "host_action_options.hpp"

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "help_format.hpp"
#include "hoist/host/interrupted.hpp"
#include "hoist/kube/kube_client.hpp"
#include "hoist/kube/kube_config.hpp"
#include "hoist/kube/kured_lock.hpp"
#include "hoist/model/context.hpp"
#include "hoist/sys/stop_signals.hpp"
#include "hoist/util/error.hpp"
#include "hoist/util/text.hpp"
#include "node_events.hpp"

namespace hoist::cli {

namespace {

// How long one request to the API server may take, and how often a held lock is asked again: kured's own retry
// sleep is 5 s.
constexpr std::chrono::seconds k_lock_request_timeout{30};
constexpr std::chrono::seconds k_lock_poll{5};
constexpr std::chrono::seconds k_lock_report{60};

// kured's lock for a Job's node (HostActions::RebootLock): taken before hoist's own reboot, given back after.
HostActions::RebootLock kured_reboot_lock(const Context& context, const std::string& namespace_name,
                                          const std::string& name) {
  HostActions::RebootLock lock;
  lock.take = [&context, namespace_name, name](std::chrono::steady_clock::time_point deadline) {
    const auto started = std::chrono::steady_clock::now();
    const KubeClient client(KubeConfig::in_cluster(context.suc));
    const KuredLock kured(client, namespace_name, name, context.suc.node_name);
    auto next_report = started;
    std::string last_problem;
    for (;;) {
      throw_if_interrupted("taking kured's lock");
      const auto now = std::chrono::steady_clock::now();
      try {
        // A request near the deadline still gets a few seconds: a lock asked for is a lock answered.
        const auto attempt = kured.try_take(
            std::max(std::min(deadline, now + k_lock_request_timeout), now + k_lock_poll), stop_signals::wake_flag());
        if (attempt.result == KuredLock::Attempt::Result::no_daemonset) {
          spdlog::info("no {}: no kured lock to take (--kured-lock)", kured.display());
          return;
        }
        if (attempt.result == KuredLock::Attempt::Result::taken) {
          spdlog::info("took kured's lock ({} annotation {}) for node '{}'", kured.display(), k_kured_lock_annotation,
                       escaped(context.suc.node_name));
          return;
        }
        last_problem = "it is held by " + attempt.holders;
      } catch (const KubeError& e) {
        throw_if_interrupted("taking kured's lock");  // the node going down: no reboot to ask for
        if (!e.retryable() && e.kind() != KubeError::Kind::timeout) {
          throw Failure("cannot take kured's lock (" + kured.display() + ", --kured-lock): " + e.what());
        }
        last_problem = "the API server did not answer: " + std::string(e.what());
      }
      const auto waited = std::chrono::duration_cast<std::chrono::seconds>(now - started).count();
      if (now >= deadline) {
        throw Failure("no reboot: kured's lock (" + kured.display() + " annotation " + k_kured_lock_annotation +
                      ") was not free within " + std::to_string(waited) + " s (--reboot-timeout): " + last_problem);
      }
      if (now >= next_report) {
        spdlog::info("waiting for kured's lock ({}): {}; {} s so far", kured.display(), last_problem, waited);
        next_report = now + k_lock_report;
      }
      const auto pause = std::min<std::chrono::steady_clock::duration>(k_lock_poll, deadline - now);
      if (const WakeFlag* wake = stop_signals::wake_flag();
          wake != nullptr && wake->wait_for(std::chrono::duration_cast<std::chrono::milliseconds>(pause))) {
        throw_if_interrupted("taking kured's lock");
      } else if (wake == nullptr) {
        std::this_thread::sleep_for(pause);
      }
    }
  };
  lock.give_back = [&context, namespace_name, name]() {
    try {
      const KubeClient client(KubeConfig::in_cluster(context.suc));
      const KuredLock kured(client, namespace_name, name, context.suc.node_name);
      if (kured.give_back(std::chrono::steady_clock::now() + k_lock_request_timeout, stop_signals::wake_flag())) {
        spdlog::info("gave kured's lock ({}) back", kured.display());
      }
    } catch (const std::exception& e) {
      spdlog::warn("could not give kured's lock back ({}/{}): {}", namespace_name, name, e.what());
    }
  };
  return lock;
}

}  // namespace

void HostActionOptions::add_to(CLI::App& command) {
  command.add_flag("--remount", m_remount,
                   "make the mounts written to writable for the run (in the host's mount namespace), then read-only "
                   "again");
  command.add_option("--restart", m_restart, "restart this systemd unit after a change (repeatable, in order)")
      ->option_text("UNIT");
  command.add_option("--restart-timeout", m_restart_timeout, "seconds to wait for each restart job")
      ->check(number_of_seconds(Zero::refused))
      ->capture_default_str();
  command
      .add_option("--reboot", m_reboot,
                  "never, if-needed (after a change), always, or delegate: after a change, write --reboot-sentinel "
                  "for kured to reboot the node in its own time, and wait for the boot as for hoist's own")
      ->check(one_of({"never", "if-needed", "always", "delegate"}))
      ->capture_default_str();
  command
      .add_option("--reboot-sentinel", m_reboot_sentinel,
                  "the file --reboot delegate writes, a host path: the one kured watches (its --reboot-sentinel)")
      ->capture_default_str();
  command
      .add_option("--kured-lock", m_kured_lock,
                  "take the reboot lock on kured's DaemonSet before hoist's own reboot, so that it never reboots the "
                  "node while kured reboots another (in a SUC Job; kube-system/kured is kured's default)")
      ->option_text("NAMESPACE/NAME");
  command
      .add_option("--reboot-timeout", m_reboot_timeout,
                  "seconds to wait for the host to go down (inhibitor locks included) before failing")
      ->check(number_of_seconds(Zero::refused))
      ->capture_default_str();
}

HostActions HostActionOptions::actions(const Context& context) const {
  HostActions actions;
  actions.remount = m_remount ? Remount::yes : Remount::no;
  for (const auto& unit : m_restart) {
    actions.restart_units.push_back(unit_name(unit));
  }
  actions.reboot = parse_reboot_policy(m_reboot);
  if (m_reboot_sentinel.empty() || m_reboot_sentinel.front() != '/' || m_reboot_sentinel.back() == '/') {
    throw UsageError("--reboot-sentinel: '" + m_reboot_sentinel + "' is not an absolute path to a file on the host");
  }
  actions.reboot_sentinel = m_reboot_sentinel;
  actions.reboot_timeout = std::chrono::seconds(static_cast<long long>(std::ceil(m_reboot_timeout)));
  actions.restart_timeout = std::chrono::seconds(static_cast<long long>(std::ceil(m_restart_timeout)));
  actions.before_reboot = [&context](const std::string& what) { tell_node(context, rebooting_event(what)); };
  if (!m_kured_lock.empty()) {
    const auto slash = m_kured_lock.find('/');
    const std::string namespace_name = m_kured_lock.substr(0, slash);
    const std::string name = slash == std::string::npos ? std::string() : m_kured_lock.substr(slash + 1);
    const auto dns_label = [](const std::string& text) {
      return !text.empty() && text.size() <= 253 && text.front() != '-' && text.back() != '-' &&
             text.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-.") == std::string::npos;
    };
    if (!dns_label(namespace_name) || !dns_label(name)) {
      throw UsageError("--kured-lock: '" + escaped(m_kured_lock) + "' is not NAMESPACE/NAME of kured's DaemonSet");
    }
    if (actions.reboot == RebootPolicy::delegate) {
      throw UsageError("--kured-lock: with --reboot delegate kured reboots the node and takes its lock itself");
    }
    if (context.suc.node_name.empty() || context.suc.kubernetes_service_host.empty() ||
        context.suc.service_account_dir.empty()) {
      throw UsageError(
          "--kured-lock: takes the lock for a SUC Job's node, with the pod's service account "
          "(SYSTEM_UPGRADE_NODE_NAME, KUBERNETES_SERVICE_HOST and the account's token)");
    }
    actions.reboot_lock = kured_reboot_lock(context, namespace_name, name);
  }
  return actions;
}

}  // namespace hoist::cli
