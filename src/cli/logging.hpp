#pragma once

#include "hoist/model/context.hpp"

namespace hoist::cli {

/// Sets up the default spdlog logger on stderr: readable lines for people
/// (text) or one JSON object a line for log collectors (json). Verbosity 0 logs
/// info and up, 1 debug, 2 and more trace. The logger is synchronous: hoist
/// must stay single-threaded until it has entered the host's mount namespace.
void setup_logging(LogFormat format, int verbosity);

}  // namespace hoist::cli
