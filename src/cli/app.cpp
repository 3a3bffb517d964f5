#include "hoist/cli/app.hpp"

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <ctime>
#include <exception>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "command.hpp"
#include "help_format.hpp"
#include "hoist/model/context.hpp"
#include "hoist/model/node_metrics.hpp"
#include "hoist/sys/library_versions.hpp"
#include "hoist/sys/termination_message.hpp"
#include "hoist/util/error.hpp"
#include "hoist/util/text.hpp"
#include "logging.hpp"
#include "node_events.hpp"

namespace hoist::cli {

namespace {

// A path reaches system calls as a C string and messages as text: a control character in one is a mistake (a
// variable with a trailing newline) or an attack, never a path worth resolving.
std::string refuse_control_characters(const std::string& value) {
  return has_control_character(value) ? in_quotes(value) + " must not contain control characters" : "";
}

void add_global_options(CLI::App& app, GlobalOptions& options, LogOptions& log) {
  const CLI::Validator path_text(refuse_control_characters, "", "path");
  app.add_option("--host-root", options.host_root,
                 "the host's root as this process sees it (default: /host when it exists, else /)")
      ->check(path_text);
  app.add_option("--state-dir", options.state_dir, "where hoist keeps its state, as a host path")
      ->check(path_text)
      ->capture_default_str();
  app.add_option("--lock-file", options.lock_file, "the lock file, as a host path")
      ->check(path_text)
      ->capture_default_str();
  app.add_option("--lock-timeout", options.lock_timeout_seconds, "seconds to wait for the lock")
      ->check(number_of_seconds(Zero::allowed))
      ->capture_default_str();
  // The word (in any case) checked in hoist's words, then turned into the enum's number for CLI11 to store.
  const CLI::Validator format_word = one_of({"text", "json"});
  app.add_option("--log-format", log.format, "text for people, json for log collectors")
      ->transform(CLI::Validator(
          [format_word](std::string& value) {
            std::string lower = value;
            std::transform(lower.begin(), lower.end(), lower.begin(),
                           [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
            if (!format_word(lower).empty()) {
              return format_word(value);  // the word as it was given
            }
            value = std::to_string(static_cast<int>(lower == "json" ? LogFormat::json : LogFormat::text));
            return std::string();
          },
          "", "log format"))
      ->option_text("text|json (default: text)");
  app.add_option("--metrics-file", options.metrics_file,
                 "after upgrade and rollback, write the node's metrics in Prometheus' text format to this host "
                 "path (node-exporter's textfile collector reads *.prom)")
      ->check(path_text);
  app.add_flag("-v,--verbose", log.verbosity, "more detail (-vv for trace)");
}

// CLI11 takes the next word as the value of `--opt=` (an empty value): `--restart= --dry-run` (an empty variable in a
// Plan's args) restarted a unit named "--dry-run" and installed for real. No hoist option takes an empty value, and
// none takes a negative number, so a value that starts with '-' is a flag swallowed by mistake.
std::string refuse_empty_or_option_like(const std::string& value) {
  if (value.empty()) {
    return "an empty value is not allowed";
  }
  if (value.front() == '-') {
    return "'" + escaped(value) + "' looks like an option, not a value";
  }
  return "";
}

// `--opt=` is an empty value, whatever follows: CLI11 would take the next word instead (`--state-dir= status` made
// "status" the state directory). Throws CLI::ValidationError naming the option; words after `--` are operands.
void refuse_empty_assignments(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view word = argv[i];
    if (word == "--") {
      return;
    }
    if (word.starts_with("--") && word.find('=') == word.size() - 1) {
      throw CLI::ValidationError(std::string(word.substr(0, word.size() - 1)), "an empty value is not allowed");
    }
  }
}

// Puts that check first on every option that takes a value (flags take none), in `app` and its subcommands.
void check_every_value(CLI::App& app) {
  const CLI::Validator value_text(refuse_empty_or_option_like, "", "");
  for (CLI::Option* option : app.get_options({})) {
    if (option->get_type_size() != 0) {
      option->transform(value_text);  // transform(): inserted before the option's own checks and conversions
    }
  }
  for (CLI::App* subcommand : app.get_subcommands({})) {
    check_every_value(*subcommand);
  }
}

// Whether the command line asks for JSON logs (`--log-format json`, `--log-format=JSON`), read from the words
// themselves: when parsing failed, the option may not have been converted yet, or the failure may be elsewhere.
bool asks_for_json_logs(int argc, char** argv) {
  bool json = false;  // the last one given counts, as CLI11 takes it
  for (int i = 1; i < argc; ++i) {
    const std::string_view word = argv[i];
    if (word == "--") {
      break;
    }
    std::string value;
    if (word == "--log-format" && i + 1 < argc) {
      value = argv[i + 1];
    } else if (word.starts_with("--log-format=")) {
      value = word.substr(std::string_view("--log-format=").size());
    } else {
      continue;
    }
    std::transform(value.begin(), value.end(), value.begin(), [](unsigned char c) { return std::tolower(c); });
    json = value == "json";
  }
  return json;
}

// The commands, as an error lists them: "upgrade, stage, …, help".
std::vector<std::string> command_list(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands({})) {
    names.push_back(sub->get_name());
  }
  return names;
}

std::string command_names(const CLI::App& app) {
  return joined(command_list(app), ", ");
}

// `unknown command 'upgrad' (did you mean 'upgrade'?; commands: ...)`.
std::string unknown_command(const CLI::App& app, const std::string& word) {
  const std::string closest = closest_word(word, command_list(app));
  return "unknown command '" + escaped(word) + "' (" +
         (closest.empty() ? std::string() : "did you mean '" + closest + "'?; ") + "commands: " + command_names(app) +
         ")";
}

// The subcommand the words selected, or nullptr.
const CLI::App* parsed_subcommand(const CLI::App& app) {
  const auto subcommands = app.get_subcommands({});
  const auto found =
      std::find_if(subcommands.begin(), subcommands.end(), [](const CLI::App* sub) { return sub->parsed(); });
  return found == subcommands.end() ? nullptr : *found;
}

// The first subcommand named among the words, or nullptr.
const CLI::App* named_subcommand(const CLI::App& app, int argc, char** argv) {
  for (int i = 1; i < argc && std::string_view(argv[i]) != "--"; ++i) {
    for (const CLI::App* sub : app.get_subcommands({})) {
      if (sub->get_name() == argv[i]) {
        return sub;
      }
    }
  }
  return nullptr;
}

// The words `sub` was not expected to take, in the order given (CLI11 lists them backwards, and an unknown option's
// value among them): each unknown option named with the option it is closest to, else the stray words.
std::string describe_extras(const CLI::App& sub, int argc, char** argv) {
  std::string unknown;
  std::string stray;
  bool skip_value = false;  // the word after an option that takes one (or after an unknown option)
  bool named = false;       // the subcommand's own name, passed once
  bool operands = false;
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (skip_value) {
      skip_value = false;
      if (word.empty() || word.front() != '-') {
        continue;
      }
    }
    if (!operands && word == "--") {
      operands = true;
      continue;
    }
    if (!operands && word.size() > 1 && word.front() == '-') {
      const std::string name = word.substr(0, word.find('='));
      const bool assigned = word.find('=') != std::string::npos;
      const CLI::Option* option = find_option(named ? sub : *sub.get_parent(), name);
      if (option != nullptr) {
        skip_value = !assigned && option->get_items_expected_max() != 0;
        continue;
      }
      // Before the command's name only hoist's own options are taken (`hoist --log-format json status`).
      std::string hint;
      if (!named && find_option(sub, name) != nullptr) {
        hint = " (an option of '" + sub.get_name() + "': give it after the command)";
      } else if (const std::string close = closest_option(named ? sub : *sub.get_parent(), name); !close.empty()) {
        hint = " (did you mean '" + close + "'?)";
      }
      unknown += std::string(unknown.empty() ? "" : "; ") + "unknown option '" + escaped(name) + "'" +
                 (named ? "" : " before the command") + hint;
      skip_value = !assigned;  // its value, if one follows, is not named again
      continue;
    }
    if (!operands && !named && word == sub.get_name()) {
      named = true;
      continue;
    }
    stray += std::string(stray.empty() ? "" : ", ") + "'" + escaped(word) + "'";
  }
  if (!unknown.empty()) {
    return unknown;
  }
  return stray.empty() ? std::string() : "unexpected argument(s) " + stray;
}

// CLI11 says only "A subcommand is required" for `hoist upgarde`; name the word.
std::string describe_parse_error(const CLI::App& app, const CLI::ParseError& error, int argc, char** argv) {
  const CLI::App* selected = parsed_subcommand(app);
  if (selected != nullptr && dynamic_cast<const CLI::ExtrasError*>(&error) != nullptr) {
    if (std::string extras = describe_extras(*selected, argc, argv); !extras.empty()) {
      return selected->get_name() + ": " + extras;
    }
  }
  // `--component` last on the line: CLI11 says "--component: 1 required TEXT missing", its type tag included.
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&error) != nullptr) {
    const std::string what = error.what();
    const std::size_t colon = what.find(": ");
    if (colon != std::string::npos && what.find(" required ", colon) != std::string::npos &&
        what.ends_with(" missing")) {
      return what.substr(0, colon) + ": expects a value, and none was given";
    }
  }
  // A refused value (`--log-format= status` takes "status" as the format) is the error, not a missing command.
  if (selected != nullptr || dynamic_cast<const CLI::ValidationError*>(&error) != nullptr) {
    return error.what();
  }
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word.starts_with("-")) {
      const CLI::Option* option = app.get_option_no_throw(word.substr(0, word.find('=')));
      if (option != nullptr && option->get_type_size() > 0 && word.find('=') == std::string::npos) {
        ++i;  // the option's value
      }
      continue;
    }
    return unknown_command(app, word);
  }
  return error.what();
}

// The host root when --host-root is not given. In a container, "/" is the container's own root: an upgrade there
// would change the container and report success, so a container without /host is bad usage.
std::string default_host_root(const SucContext& suc) {
  const std::filesystem::path root = HostRoot::default_path();
  if (root != "/") {
    return root.string();
  }
  std::string why;
  if (suc.in_job()) {
    why = "SYSTEM_UPGRADE_PLAN_NAME is set";
  } else if (const auto marker = HostRoot::container_marker(); !marker.empty()) {
    why = "'" + marker.string() + "' exists";
  } else {
    return root.string();
  }
  throw UsageError("this runs in a container (" + why +
                   ") and /host is not there: mount the host's root at /host (docker run -v /:/host, or the "
                   "Plan's default), or pass --host-root");
}

// The pod's termination message (docs/schemas/termination-message.schema.json): one JSON object, the outcome first,
// then what the run decided for each component. The cluster shows it after SUC has collected the Job, its pod and
// its logs. Within the kubelet's 4 KiB: the last components go first (counted), then the error is cut.
std::string termination_json(const std::string& name, ExitCode code, const std::string& error,
                             const std::vector<std::string>& summary) {
  nlohmann::ordered_json message{{"schema_version", 1},
                                 {"command", name.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(name)},
                                 {"outcome", exit_code_name(code)},
                                 {"exit_code", static_cast<int>(code)},
                                 {"error", error.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(error)},
                                 {"components", nlohmann::ordered_json::array()}};
  for (const std::string& line : summary) {
    if (!line.empty()) {
      message["components"].push_back(line);
    }
  }
  const auto text = [&message] {
    return message.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
  };
  std::size_t omitted = 0;
  while (text().size() > k_termination_message_max && !message["components"].empty()) {
    message["components"].erase(message["components"].size() - 1);
    message["components_omitted"] = ++omitted;
  }
  if (const std::size_t size = text().size(); size > k_termination_message_max && !error.empty()) {
    const std::size_t over = size - k_termination_message_max + 3;  // 3: the "..." that says it was cut
    message["error"] = error.substr(0, error.size() > over ? error.size() - over : 0) + "...";
  }
  return text();
}

void write_termination(const Environment& env, const std::string& name, ExitCode code, const std::string& error,
                       const std::vector<std::string>& summary) {
  const auto path = env.find("HOIST_TERMINATION_MESSAGE_PATH");
  const std::string file =
      path == env.end() || path->second.empty() ? std::string(k_termination_message_path) : path->second;
  if (auto written = write_termination_message(file, termination_json(name, code, error, summary)); !written) {
    spdlog::debug("no termination message: {}", written.error().message);
  }
}

// --metrics-file: every component's state as the run left it, and how the run ended. Like the events, never part of
// the outcome: a metrics file that cannot be written is a warning.
void write_metrics(const Context& context, const std::string& command, ExitCode code) {
  // Bad input (a usage error, a payload that does not verify) leaves the host exactly as it was: no metrics either.
  if (context.options.metrics_file.empty() || !context.host || code == ExitCode::usage ||
      code == ExitCode::verification) {
    return;
  }
  try {
    const StateStore store(*context.host, context.options.state_dir);
    std::vector<ComponentState> states;
    for (const std::string& component : store.components()) {
      if (auto state = store.load(component)) {
        states.push_back(std::move(*state));
      }
    }
    const RunMetrics run{static_cast<std::int64_t>(std::time(nullptr)), code == ExitCode::ok, command};
    write_node_metrics(*context.host, context.options.metrics_file, node_metrics_text(states, run));
  } catch (const std::exception& e) {
    spdlog::warn("no metrics (the run's outcome stands): {}", e.what());
  }
}

// The summary lines that say more than the error: a refusal's error is its component's gate line, which the
// termination message and the event would otherwise say twice.
std::vector<std::string> beyond_error(const std::vector<std::string>& summary, const std::string& error) {
  std::vector<std::string> lines;
  for (const std::string& line : summary) {
    if (line.empty() || error.find(line) == std::string::npos) {
      lines.push_back(line);
    }
  }
  return lines;
}

void write_outcome(const Context& context, const Command& command, const std::string& name, ExitCode code,
                   const std::string& error) {
  if (command.reports_outcome()) {
    write_metrics(context, name, code);
    const std::vector<std::string> summary = beyond_error(command.summary(), error);
    write_termination(context.env, name, code, error, summary);
    // A re-run that changed nothing says so in its log and termination message; an Event would only repeat the last.
    const bool quiet = code == ExitCode::ok && command.changed_nothing();
    if (const auto event = outcome_event(name, code, error, summary, command.rolled_back()); event && !quiet) {
      tell_node(context, *event);
    }
  }
}

std::vector<LogField> run_log_fields(const Context& context, const Command& command) {
  std::vector<LogField> fields;
  if (!context.suc.plan_name.empty()) {
    fields.emplace_back("plan", context.suc.plan_name);
  }
  if (!context.suc.node_name.empty()) {
    fields.emplace_back("node", context.suc.node_name);
  }
  for (auto& field : command.log_fields(context)) {
    fields.push_back(std::move(field));
  }
  return fields;
}

int run(Command& command, Context& context) {
  if (const std::string& metrics = context.options.metrics_file;
      !metrics.empty() && (metrics.front() != '/' || metrics.back() == '/')) {
    throw UsageError("--metrics-file: '" + escaped(metrics) + "' is not an absolute path to a file on the host");
  }
  if (command.needs_host()) {
    const std::string root =
        context.options.host_root.empty() ? default_host_root(context.suc) : context.options.host_root;
    auto host = HostRoot::open(root);
    if (!host) {
      throw UsageError(host.error().message + " (--host-root)");
    }
    if (host->resolver() == Resolver::walk) {
      spdlog::debug("openat2 is not available; resolving host paths with the portable walk");
    }
    context.host.emplace(std::move(*host));
  }
  return static_cast<int>(command.run(context));
}

// The command line as CLI11 sees it: the app, the commands bound to it, and the context the global options fill.
class CommandLine {
 public:
  CommandLine() : m_app("hoist: on-host upgrades for Kubernetes nodes", "hoist") {
    m_app.require_subcommand(1);
    // As other tools answer it; `hoist version` says more (the linked libraries, --json).
    m_app.set_version_flag("-V,--version", "hoist " + hoist_version(), "print hoist's version and exit");
    // Global options are accepted after the subcommand too (`hoist status --host-root X`).
    m_app.fallthrough();
    m_app.set_help_all_flag("--help-all", "help for every command");
    m_app.formatter(std::make_shared<HelpFormatter>());  // before the subcommands, which take it over
    add_global_options(m_app, context.options, log);
    m_commands = make_commands(log);
    for (auto& command : m_commands) {
      m_by_subcommand[command->add_to(m_app)] = command.get();
    }
    m_help = m_app.add_subcommand("help", "show a command's options, examples and exit status (or hoist's)");
    m_app.footer(std::string("'hoist help COMMAND' shows a command's options, examples, exit status, environment "
                             "and files.\n"
                             "\n"
                             "Examples:\n"
                             "  hoist upgrade --manifest /payload/hoist.json --dry-run\n"
                             "  hoist stage --manifest /payload/hoist.json --restart k3s.service\n"
                             "  hoist rollback --component k3s --restart k3s.service\n"
                             "  hoist status\n"
                             "  hoist help upgrade\n"
                             "\n") +
                 k_exit_status_help + "\n" + k_environment_help);
    m_help->add_option("COMMAND", m_help_topic, "the command");
    check_every_value(m_app);
  }

  /// Parses argv into the options. std::nullopt when a command is to run; else the exit code, the help, the
  /// version or the refusal already printed (a refusal also goes into the termination message).
  std::optional<int> parse(int argc, char** argv) {
    try {
      refuse_empty_assignments(argc, argv);
      m_app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
      return m_app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
      return m_app.exit(e);
    } catch (const CLI::CallForVersion& e) {
      return m_app.exit(e);
    } catch (const CLI::ParseError& e) {
      const std::string message = describe_parse_error(m_app, e, argc, argv);
      const CLI::App* selected = parsed_subcommand(m_app);
      if (selected == nullptr) {
        selected = named_subcommand(m_app, argc, argv);  // refused before CLI11 parsed (an empty `--opt=`)
      }
      const std::string command = selected == nullptr || selected == m_help ? "" : selected->get_name();
      const std::string where = command.empty() ? "" : " " + command;
      // In hoist's log format, as every other line it writes (a log collector parses each line: with
      // --log-format json, one JSON object, with the command when one was named and the exit line after it).
      const LogFormat format = asks_for_json_logs(argc, argv) ? LogFormat::json : LogFormat::text;
      setup_logging(format, 0);
      std::optional<LogFields> command_field;
      if (!command.empty()) {
        command_field.emplace(std::vector<LogField>{{"command", command}});
      }
      spdlog::error("{}; usage: hoist{} [OPTIONS]; 'hoist help{}' shows the options", message,
                    where.empty() ? " COMMAND" : where, where);
      // A Plan's bad argument is an outcome the cluster must see too.
      write_termination(process_environment(), command, ExitCode::usage, message, {});
      log_exit(format, ExitCode::usage);
      return static_cast<int>(ExitCode::usage);
    }
    if (m_help->parsed()) {
      return help();
    }
    return std::nullopt;
  }

  /// `hoist help [COMMAND]`: what `hoist [COMMAND] --help` prints.
  int help() {
    if (m_help_topic.empty()) {
      // Through the formatter: the app's help() would show the help of the subcommand parsed, `help` itself.
      std::fputs(m_app.get_formatter()->make_help(&m_app, "hoist", CLI::AppFormatMode::Normal).c_str(), stdout);
      return 0;
    }
    for (const CLI::App* sub : m_app.get_subcommands({})) {
      if (sub->get_name() == m_help_topic) {
        std::fputs(sub->help("hoist").c_str(), stdout);
        return 0;
      }
    }
    setup_logging(log.format, 0);  // `--log-format json help upgarde`: JSON lines, as every refusal
    spdlog::error("help: {}", unknown_command(m_app, m_help_topic));
    log_exit(log.format, ExitCode::usage);
    return static_cast<int>(ExitCode::usage);
  }

  /// The command the parsed line selected (require_subcommand(1): exactly one), and its name.
  [[nodiscard]] std::pair<Command*, std::string> selected() const {
    for (const auto& [subcommand, command] : m_by_subcommand) {
      if (subcommand->parsed()) {
        return {command, subcommand->get_name()};
      }
    }
    throw std::logic_error("no command was parsed");
  }

  Context context;
  LogOptions log;  ///< the cli's own: no room below it logs by format

 private:
  CLI::App m_app;
  std::vector<std::unique_ptr<Command>> m_commands;
  std::map<CLI::App*, Command*> m_by_subcommand;
  CLI::App* m_help = nullptr;
  std::string m_help_topic;
};

}  // namespace

std::optional<int> parse_command_line(int argc, char** argv) {
  CommandLine line;
  return line.parse(argc, argv);
}

int main(int argc, char** argv) {
  CommandLine line;
  if (const auto code = line.parse(argc, argv)) {
    return *code;
  }
  Context& context = line.context;
  setup_logging(line.log.format, line.log.verbosity);
  Command* selected = nullptr;
  std::string name;
  std::tie(selected, name) = line.selected();
  // Every JSON log line of the run, its error and its last line too, carries the command, and once the SUC
  // environment is read the Plan, the node and the command line's component and version.
  const LogFields command_field{{"command", name}};
  std::optional<LogFields> run_fields;
  const auto finish = [&](ExitCode code, const std::string& error) {
    write_outcome(context, *selected, name, code, error);
    log_exit(line.log.format, code);
    return static_cast<int>(code);
  };
  try {
    context.env = process_environment();
    context.suc = SucContext::load(context.env);
    run_fields.emplace(run_log_fields(context, *selected));
    for (const std::string& warning : context.suc.warnings) {
      spdlog::warn("{} (skipped: hoist reads no pod label or annotation)", warning);
    }
    return finish(static_cast<ExitCode>(run(*selected, context)), "");
  } catch (const Error& e) {
    spdlog::error("{}", e.what());
    return finish(e.code(), e.what());
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return finish(ExitCode::failed, e.what());
  }
}

}  // namespace hoist::cli
