#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "hoist/model/context.hpp"
#include "hoist/sys/library_versions.hpp"

namespace hoist::cli {

namespace {

class VersionCommand final : public Command {
 public:
  CLI::App* add_to(CLI::App& app) override {
    CLI::App* sub = app.add_subcommand("version", "print hoist's version and the versions of the libraries it links");
    sub->add_flag("--json", m_json, "print JSON");
    sub->footer(
        "Examples:\n"
        "  hoist version\n"
        "  hoist version --json\n"
        "\n"
        "Exit status:\n"
        "  0  printed\n"
        "  2  bad usage (an unknown option)\n");
    return sub;
  }
  [[nodiscard]] bool needs_host() const override { return false; }

  ExitCode run(Context& /*context*/) override {
    const auto libraries = linked_library_versions();
    const BuildInfo build = build_info();
    if (m_json) {
      nlohmann::json out{{"schema_version", 1},  // docs/schemas/version.schema.json
                         {"hoist", hoist_version()},
                         {"commit", build.commit},
                         {"build_date", build.date},
                         {"architecture", build.architecture},
                         {"libraries", nlohmann::json::object()}};
      for (const auto& library : libraries) {
        out["libraries"][library.name] = library.version;
      }
      std::printf("%s\n", out.dump(2).c_str());
    } else {
      std::printf("hoist %s (commit %s, built %s, %s)\n", hoist_version().c_str(), build.commit.c_str(),
                  build.date.c_str(), build.architecture.c_str());
      for (const auto& library : libraries) {
        std::printf("  %-20s %s\n", library.name.c_str(), library.version.c_str());
      }
    }
    return ExitCode::ok;
  }

 private:
  bool m_json = false;
};

}  // namespace

std::unique_ptr<Command> make_version_command() {
  return std::make_unique<VersionCommand>();
}

}  // namespace hoist::cli
