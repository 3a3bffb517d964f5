#pragma once

#include <string>
#include <vector>

#include "hoist/host/host_actions.hpp"

namespace hoist {
struct Context;
}

namespace CLI {
class App;
}

namespace hoist::cli {

/// The flags of `upgrade` and `rollback` that act on the host beyond its
/// files, bound to one object: `--remount`, `--restart UNIT`...,
/// `--restart-timeout SECONDS`, `--reboot never|if-needed|always|delegate`,
/// `--reboot-timeout SECONDS`, `--reboot-sentinel PATH`, `--kured-lock NAMESPACE/NAME`.
class HostActionOptions {
 public:
  /// Adds the flags to `command`.
  void add_to(CLI::App& command);
  /// The flags as given (units mangled as systemctl does: `k3s` → `k3s.service`).
  /// Throws UsageError for an invalid unit name. Before a reboot, an event tells the Job's node (node_events.hpp);
  /// `context` must outlive the run.
  [[nodiscard]] HostActions actions(const Context& context) const;

 private:
  bool m_remount = false;
  std::vector<std::string> m_restart;
  std::string m_reboot = "never";
  std::string m_reboot_sentinel = k_default_reboot_sentinel;
  std::string m_kured_lock;
  double m_reboot_timeout = static_cast<double>(k_default_reboot_timeout.count());
  double m_restart_timeout = static_cast<double>(k_default_restart_timeout.count());
};

}  // namespace hoist::cli
