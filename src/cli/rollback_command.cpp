#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "hoist/model/context.hpp"
#include "hoist/run/rollback_run.hpp"
#include "host_action_options.hpp"

namespace hoist::cli {

namespace {

class RollbackCommand final : public Command {
 public:
  CLI::App* add_to(CLI::App& app) override {
    CLI::App* sub = app.add_subcommand("rollback", "switch a component back to its previous (or a kept) version");
    sub->add_option("--component", m_options.component, "the component")->required();
    sub->add_option("--to", m_options.to, "a kept version (default: the previous one)");
    m_host.add_to(*sub);
    return sub;
  }

  ExitCode run(Context& context) override {
    m_options.durability = default_durability();
    m_options.host = m_host.actions(context);
    return run_rollback(context, m_options);
  }

  [[nodiscard]] bool reports_outcome() const override { return true; }
  [[nodiscard]] std::vector<std::string> summary() const override {
    return {m_options.component +
            (m_options.to.empty() ? ": back to the previous version" : ": back to " + m_options.to)};
  }

 private:
  RollbackOptions m_options;
  HostActionOptions m_host;
};

}  // namespace

std::unique_ptr<Command> make_rollback_command() {
  return std::make_unique<RollbackCommand>();
}

}  // namespace hoist::cli
