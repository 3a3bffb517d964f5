#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "hoist/sys/host_root.hpp"

namespace hoist {

class SystemBus;

/// One `--health-check`: what must hold after a switch for the new version to stay (docs/host-actions.md,
/// "Health checks and automatic rollback").
struct HealthCheck {
  enum class Kind {
    unit,        ///< `unit:NAME`: the unit is active and has not (re)entered that state for the settle time
    exec,        ///< `exec:PATH [ARGS…]`: the host's program, chrooted into the host root, exits 0
    http,        ///< `http:URL`: a GET of a loopback http:// URL answers 2xx
    node_ready,  ///< `node-ready`: the Node this Job runs on is Ready (needs the cluster: see HealthProbes)
    sysext,      ///< `sysext:DEST`: the extension linked at DEST is the one merged (owed by every sysext switch)
  };
  Kind kind = Kind::unit;
  std::string spec;               ///< as given on the command line or in the manifest, for messages and the state
  std::string target;             ///< the unit name, the program's host path, the URL, or the sysext destination
  std::vector<std::string> args;  ///< exec: the program's arguments
};

/// Parses one check. Throws UsageError naming `text` for anything else: an unknown kind, a unit name systemd would
/// refuse, an exec path that is not absolute, a URL that is not `http://` to a loopback address (127.0.0.0/8,
/// [::1], localhost) with an optional port and path. `exec:` splits its program and arguments at spaces.
HealthCheck parse_health_check(std::string_view text);

/// The check every sysext switch owes: `sysext:DEST`, the extension linked at the host path `destination` is merged.
HealthCheck sysext_merge_check(const std::string& destination);

inline constexpr std::chrono::seconds k_default_health_settle{30};
inline constexpr std::chrono::seconds k_default_health_timeout{300};

/// `--health-check`, `--health-settle`, `--health-timeout`.
struct HealthPolicy {
  std::vector<HealthCheck> checks;
  std::chrono::seconds settle = k_default_health_settle;
  std::chrono::seconds timeout = k_default_health_timeout;
};

/// What one look at a check found.
struct HealthLook {
  bool passed = false;
  std::string detail;  ///< why it did not pass (or what passed), for the log and the state; output capped
  /// A unit up but not settled yet: when it may pass, unless it restarts (0: no such moment is known).
  std::chrono::milliseconds passes_in{0};
  /// A failure that waiting cannot change (a sysext refresh that is over and did not merge): the checks end now.
  bool final = false;
};

/// What the checks need of the world: the host root for `exec`, the system bus for `unit`, and for `node-ready`
/// a look at this Job's Node (the CLI provides it from the cluster room), given the kubelet version it must report
/// ("" for any).
struct HealthProbes {
  const HostRoot* root = nullptr;
  std::function<SystemBus&()> bus;
  std::function<HealthLook(const std::string& kubelet_version)> node_ready;
  /// `node-ready` for a k3s-scheme component: the version its kubelet must report (the component's target).
  std::string kubelet_version;
  /// `sysext:DEST`: a look at whether the extension linked at DEST is merged (the run room provides it).
  std::function<HealthLook(const std::string& destination)> sysext_merged;
};

/// What the checks concluded.
struct HealthVerdict {
  bool healthy = false;
  std::string failed_check;  ///< the spec of a check that had not passed when time ran out
  std::string detail;        ///< what that check last saw
  bool final = false;        ///< it failed for good (HealthLook::final), before the time ran out
};

/// Looks at every check, again and again with back-off (1 s doubling to 10 s, and never past the moment a unit's
/// settle time ends), until all pass in one round or `policy.timeout` has passed since the call. A unit passes once
/// it has been active for `policy.settle` without re-entering that state (a restart, by systemd or anyone, starts
/// the settle time again), read from its ActiveEnterTimestampMonotonic, so after a boot a unit up long enough passes
/// at once. Each look is logged when its verdict changes; a failed look that is `final` ends the checks at once.
/// SIGTERM/SIGINT throw Interrupted.
HealthVerdict wait_until_healthy(const HealthPolicy& policy, const HealthProbes& probes);

/// One look at `check` (wait_until_healthy() without the waiting; `settle` for units).
HealthLook look_at(const HealthCheck& check, const HealthProbes& probes, std::chrono::seconds settle);

/// The specs of `checks`, comma-separated, for messages.
std::string describe(const std::vector<HealthCheck>& checks);

}  // namespace hoist
