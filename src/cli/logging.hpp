#pragma once

#include "hoist/run/progress_reporter.hpp"
#include "hoist/util/exit_code.hpp"

namespace hoist::cli {

/// How hoist's log lines are written (`--log-format`).
enum class LogFormat { text, json };

/// The command line's logging options: `--log-format` and `-v` (repeatable).
struct LogOptions {
  LogFormat format = LogFormat::text;
  int verbosity = 0;
};

/// Sets up the default spdlog logger on stderr: readable lines for people
/// (text) or one JSON object a line for log collectors (json). Verbosity 0 logs
/// info and up, 1 debug, 2 and more trace. The logger is synchronous: hoist
/// must stay single-threaded until it has entered the host's mount namespace.
void setup_logging(LogFormat format, int verbosity);

/// The JSON log format's last line of a run: `exit_code` and `outcome` (the exit code's name) beside the run's
/// fields. The text format writes none: its last line is the error, or what the run did.
void log_exit(LogFormat format, ExitCode code);

/// How `hoist upgrade` shows its progress: a live bar when stderr is a terminal and the logs are text (a bar
/// redrawn in place would break JSON lines); else log lines.
ProgressStyle progress_style_for_stderr(LogFormat format);

}  // namespace hoist::cli
