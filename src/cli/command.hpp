#pragma once

#include <memory>
#include <string>
#include <vector>

#include "hoist/util/exit_code.hpp"
#include "hoist/util/log_fields.hpp"

namespace CLI {
class App;
}

namespace hoist {
struct Context;
}

namespace hoist::cli {

struct LogOptions;

/// One subcommand of `hoist`, ninja-style: a table of these (commands.cpp) is the
/// whole CLI. A command registers its subcommand and options on the CLI11 app,
/// binding them to its own members, and runs once the global context is set up.
/// Only commands that work are in the table, so only they appear in `--help`.
class Command {
 public:
  virtual ~Command() = default;
  /// Adds the subcommand and its options to `app`; returns the subcommand.
  virtual CLI::App* add_to(CLI::App& app) = 0;
  /// Runs the command. Errors are thrown as hoist::Error (with their exit code).
  virtual ExitCode run(Context& context) = 0;
  /// Whether the command needs the host root opened (most do; `version` does not).
  [[nodiscard]] virtual bool needs_host() const { return true; }
  /// Whether the command's outcome goes into the pod's termination message (a SUC Job's upgrade, stage, rollback and
  /// prepare); for a command that changes the host, also into the metrics file and the node's Event.
  [[nodiscard]] virtual bool reports_outcome() const { return false; }
  /// What the run decided, one line a component, for the termination message (after run(), also after a throw).
  [[nodiscard]] virtual std::vector<std::string> summary() const { return {}; }
  /// The fields its command line gives every JSON log line of the run (`component` and `version` when it names one
  /// of each), the error line too; the phases add their own.
  [[nodiscard]] virtual std::vector<LogField> log_fields(const Context& /*context*/) const { return {}; }
  /// Whether the run found nothing to change and nothing owed: it posts no node Event (docs/observability.md).
  [[nodiscard]] virtual bool changed_nothing() const { return false; }
  /// What the run switched back by itself (a failed health check), one line a component, for the node's event.
  [[nodiscard]] virtual std::vector<std::string> rolled_back() const { return {}; }
};

/// The table of commands, in `--help` order. `log` is filled when the command line is parsed, before a command runs.
std::vector<std::unique_ptr<Command>> make_commands(const LogOptions& log);

}  // namespace hoist::cli
