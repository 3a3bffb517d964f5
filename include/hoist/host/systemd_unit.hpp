#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hoist/sys/host_root.hpp"

namespace hoist {

/// What a service unit runs, as systemd reads it from the host's unit files: the unit file found first on the
/// search path, then its drop-ins (`<unit>.d/*.conf`, by file name) over it.
struct ServiceUnit {
  std::string name;                      ///< "k3s.service"
  std::vector<std::string> files;        ///< the files read, host paths, in order
  std::vector<std::string> exec_start;   ///< the last ExecStart=, split into words (prefixes such as '-' dropped)
  std::vector<std::string> environment;  ///< NAME=VALUE, from Environment= and then the EnvironmentFile=s, in order
};

/// Reads `unit` (a full unit name) under `root` from systemd's system unit directories, in their order of
/// precedence (/etc/systemd/system, /run/systemd/system, /usr/local/lib/systemd/system, /usr/lib/systemd/system,
/// /lib/systemd/system), with its drop-ins; nullopt when no unit file is there. Follows systemd.syntax(7) and
/// systemd.service(5) as far as ExecStart= and the environment need: continuation lines, comments, quoting and
/// C escapes in words, an empty ExecStart= resetting the list, the %n, %N and %% specifiers, and environment files
/// (a leading '-' makes one optional). Throws hoist::Failure naming the file when one cannot be read.
std::optional<ServiceUnit> read_service_unit(const HostRoot& root, const std::string& unit);

/// Splits a command line as systemd splits ExecStart=: words separated by whitespace, single and double quotes,
/// backslash escapes. Exposed for tests.
std::vector<std::string> split_unit_words(const std::string& text);

/// The NAME=VALUE lines of an environment file as systemd reads them (comments, quotes, `\` continuation).
std::vector<std::string> parse_environment_file(const std::string& text);

}  // namespace hoist
