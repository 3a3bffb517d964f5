#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "hoist/model/suc_context.hpp"
#include "hoist/sys/host_root.hpp"

namespace hoist {

/// The options every command shares (docs/command-line.md, "The command line"). How hoist
/// logs (`--log-format`, `-v`) is the command line's own business, not here.
struct GlobalOptions {
  std::string host_root;  ///< empty: /host when it exists, else /
  std::string state_dir = "/var/lib/hoist";
  std::string lock_file = "/run/hoist/hoist.lock";
  double lock_timeout_seconds = 300;
  std::string metrics_file;  ///< host path; empty: no metrics

  [[nodiscard]] std::chrono::milliseconds lock_timeout() const {
    return std::chrono::milliseconds(static_cast<long long>(lock_timeout_seconds * 1000));
  }
};

/// What a command runs with: the options, the SUC contract and, for commands
/// that touch the host, the opened host root.
struct Context {
  GlobalOptions options;
  Environment env;
  SucContext suc;
  std::optional<HostRoot> host;

  /// The host root; throws std::logic_error for a command that declared it
  /// does not need one.
  [[nodiscard]] const HostRoot& root() const;
};

}  // namespace hoist
