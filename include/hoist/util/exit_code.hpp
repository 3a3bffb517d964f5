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

/// The exit code's name, as the JSON log's exit line and the termination message give it: `ok`, `failed`,
/// `usage`, `refused`, `lock-timeout`, `verification`.
constexpr const char* exit_code_name(ExitCode code) {
  switch (code) {
    case ExitCode::ok: return "ok";
    case ExitCode::failed: return "failed";
    case ExitCode::usage: return "usage";
    case ExitCode::refused: return "refused";
    case ExitCode::lock_timeout: return "lock-timeout";
    case ExitCode::verification: return "verification";
  }
  return "unknown";
}

}  // namespace hoist
