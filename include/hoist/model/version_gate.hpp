#pragma once

#include <optional>
#include <string>

#include "hoist/model/component.hpp"
#include "hoist/model/version.hpp"

namespace hoist {

/// Whether what is installed is whole: the switch points at a complete version
/// (tree, file), or the destination matches the payload (sync).
enum class Integrity { intact, damaged };

/// What the version gate decided for one component.
enum class GateDecision {
  install,    ///< nothing installed yet, or the target is newer
  repair,     ///< the target is installed but not intact: install it again
  unchanged,  ///< the target is installed and intact: nothing to do
  downgrade,  ///< the target is older and --allow-downgrade was given
  refused,    ///< the target is older: refused (exit 3)
};

struct Gate {
  GateDecision decision;
  std::string message;  ///< one line for the log: "k3s: v1.30.0 -> v1.30.1 (upgrade)"

  /// Whether the run writes to the host for this component.
  [[nodiscard]] bool changes_host() const {
    return decision == GateDecision::install || decision == GateDecision::repair || decision == GateDecision::downgrade;
  }
};

/// The version gate (ARCHITECTURE.md, "The run"): same version and intact → unchanged; older →
/// refused unless allowed; else install. `installed` is the current version
/// (none before the first install); `integrity` is looked at only when it
/// equals `target`. Under the k3s scheme an upgrade that skips a minor version (1.29 to 1.31, or to another
/// major) is refused too unless allowed: Kubernetes supports one minor at a time. `installed_from` says where
/// `installed` came from when not from hoist's state ("what '/usr/local/bin/k3s --version' says"), for the message.
Gate decide_gate(std::string_view component, const std::optional<Version>& installed, Integrity integrity,
                 const Version& target, AllowDowngrade allow_downgrade,
                 AllowMinorSkip allow_minor_skip = AllowMinorSkip::no, std::string_view installed_from = {});

}  // namespace hoist
