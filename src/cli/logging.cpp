#include "logging.hpp"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <ctime>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>

#include "hoist/util/log_fields.hpp"

namespace hoist::cli {

namespace {

// One JSON object a line: {"schema_version":1,"time":"...Z","level":"info","msg":"...", and the LogFields in force}
// (docs/schemas/log-line.schema.json). nlohmann does the escaping, so any message bytes give valid JSON.
class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const auto since_epoch = msg.time.time_since_epoch();
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(since_epoch);
    const auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch - seconds).count();
    const std::time_t t = seconds.count();
    std::tm utc{};
    ::gmtime_r(&t, &utc);
    char stamp[40];
    const size_t n = std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &utc);
    std::snprintf(stamp + n, sizeof stamp - n, ".%03dZ", static_cast<int>(millis));
    const auto level = spdlog::level::to_string_view(msg.level);
    nlohmann::json line{{"schema_version", 1},
                        {"time", stamp},
                        {"level", std::string(level.data(), level.size())},
                        {"msg", std::string(msg.payload.data(), msg.payload.size())}};
    for (const auto& [name, value] : LogFields::current()) {
      if (name != "schema_version" && name != "time" && name != "level" && name != "msg") {
        std::visit([&line, &name = name](const auto& v) { line[name] = v; }, value);
      }
    }
    if (!line.contains("command")) {
      line["command"] = nullptr;  // a command line that named none (`hoist upgrad`): the field is still there
    }
    const std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    dest.append(text.data(), text.data() + text.size());
  }
  [[nodiscard]] std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<JsonFormatter>(); }
};

}  // namespace

void setup_logging(LogFormat format, int verbosity) {
  auto sink = std::make_shared<spdlog::sinks::stderr_sink_st>();
  auto logger = std::make_shared<spdlog::logger>("hoist", sink);
  if (format == LogFormat::json) {
    logger->set_formatter(std::make_unique<JsonFormatter>());
  } else {
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %l: %v", spdlog::pattern_time_type::utc);
  }
  logger->set_level(verbosity >= 2   ? spdlog::level::trace
                    : verbosity == 1 ? spdlog::level::debug
                                     : spdlog::level::info);
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(logger);
}

void log_exit(LogFormat format, ExitCode code) {
  if (format != LogFormat::json) {
    return;
  }
  const auto number = static_cast<std::uint64_t>(code);
  const char* outcome = exit_code_name(code);
  const LogFields fields{{"exit_code", number}, {"outcome", std::string(outcome)}};
  spdlog::info("exit {} ({})", number, outcome);
}

ProgressStyle progress_style_for_stderr(LogFormat format) {
  return format == LogFormat::text && ::isatty(STDERR_FILENO) == 1 ? ProgressStyle::bar : ProgressStyle::lines;
}

}  // namespace hoist::cli
