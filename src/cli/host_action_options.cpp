#include "host_action_options.hpp"

#include <CLI/CLI.hpp>
#include <cmath>

#include "hoist/util/error.hpp"
#include "node_events.hpp"

namespace hoist::cli {

void HostActionOptions::add_to(CLI::App& command) {
  command.add_flag("--remount", m_remount,
                   "make the mounts written to writable for the run (in the host's mount namespace), then read-only "
                   "again");
  command.add_option("--restart", m_restart, "restart this systemd unit after a change (repeatable, in order)");
  command.add_option("--restart-timeout", m_restart_timeout, "seconds to wait for each restart job")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command
      .add_option("--reboot", m_reboot,
                  "never, if-needed (after a change), always, or delegate: after a change, write --reboot-sentinel "
                  "for kured to reboot the node in its own time, and wait for the boot as for hoist's own")
      ->check(CLI::IsMember({"never", "if-needed", "always", "delegate"}))
      ->capture_default_str();
  command
      .add_option("--reboot-sentinel", m_reboot_sentinel,
                  "the file --reboot delegate writes, a host path: the one kured watches (its --reboot-sentinel)")
      ->capture_default_str();
  command
      .add_option("--reboot-timeout", m_reboot_timeout,
                  "seconds to wait for the host to go down (inhibitor locks included) before failing")
      ->check(CLI::PositiveNumber)
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
  return actions;
}

}  // namespace hoist::cli
