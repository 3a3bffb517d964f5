#pragma once

/// The process exit codes (README.md, "Exit codes"). They are a contract with SUC, Plans and
/// scripts: never renumber them.
namespace hoist {

enum class ExitCode : int {
  ok = 0,            ///< done, or already at the target
  failed = 1,        ///< failed; the host was left on the old version
  usage = 2,         ///< bad usage or bad input
  refused = 3,       ///< refused by the version gate (downgrade)
  lock_timeout = 4,  ///< lock not acquired in time
  verification = 5,  ///< checksum, signature or extension-release mismatch
};

}  // namespace hoist
