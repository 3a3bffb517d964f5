#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "hoist/sys/host_root.hpp"
#include "hoist/util/expected.hpp"

namespace hoist {

/// What a program run by run_in_host_root() did.
struct ProgramOutput {
  int exit_status = 0;  ///< the exit status, or 128 + the signal that ended it
  std::string output;   ///< stdout and stderr interleaved, at most the bytes asked for
};

/// Runs the host's program `host_path` with `args`, chrooted into `root` (so its libraries, its interpreter and
/// the links it names are the host's), with stdin from /dev/null, a fixed PATH and `environment` (NAME=VALUE, e.g.
/// what a unit gives the program), and collects its output.
/// Killed (SIGKILL) and reported as an error when it runs past `timeout`; output past `max_output` bytes is
/// dropped, never buffered. An error names the program; ENOENT when it does not exist.
Expected<ProgramOutput> run_in_host_root(const HostRoot& root, const std::string& host_path,
                                         const std::vector<std::string>& args, std::chrono::milliseconds timeout,
                                         std::size_t max_output, const std::vector<std::string>& environment = {});

}  // namespace hoist
