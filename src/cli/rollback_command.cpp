#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "etcd_count.hpp"
#include "help_format.hpp"
#include "hoist/model/context.hpp"
#include "hoist/run/rollback_run.hpp"
#include "hoist/util/error.hpp"
#include "host_action_options.hpp"

namespace hoist::cli {

namespace {

class RollbackCommand final : public Command {
 public:
  CLI::App* add_to(CLI::App& app) override {
    CLI::App* sub = app.add_subcommand("rollback", "switch a component back to an older kept version (or to --to)");
    sub->add_option("--component", m_options.component, "the component")->required();
    sub->add_option("--to", m_options.to, "a kept version to switch to (default: walk back one version)")
        ->option_text("VERSION");
    sub->add_flag("--allow-quarantined", m_allow_quarantined, "let --to name a version a rollback left");
    sub->add_flag("--restore-snapshot", m_options.restore_snapshot,
                  "a k3s or RKE2 server: first put back the datastore snapshot an upgrade from that version took "
                  "(docs/datastore.md)");
    sub->add_option("--datastore-timeout", m_datastore_timeout, "seconds a restore may take")
        ->check(whole_number<unsigned>(1))
        ->capture_default_str();
    m_host.add_to(*sub);
    sub->footer(std::string(k_footer) + "\n" + k_exit_status_help + "\n" + k_environment_help);
    return sub;
  }

  ExitCode run(Context& context) override {
    m_options.allow_quarantined = m_allow_quarantined ? AllowQuarantined::yes : AllowQuarantined::no;
    m_options.durability = default_durability();
    m_options.host = m_host.actions(context);
    m_options.datastore.timeout = std::chrono::seconds(m_datastore_timeout);
    m_options.datastore.etcd_members = etcd_member_counter(context.root());
    if (m_options.restore_snapshot && m_options.to.empty()) {
      throw UsageError("--restore-snapshot needs --to: the version whose datastore to put back");
    }
    return run_rollback(context, m_options);
  }

  [[nodiscard]] bool reports_outcome() const override { return true; }
  [[nodiscard]] std::vector<LogField> log_fields(const Context& /*context*/) const override {
    std::vector<LogField> fields{{"component", m_options.component}};
    if (!m_options.to.empty()) {
      fields.emplace_back("version", m_options.to);
    }
    return fields;
  }
  [[nodiscard]] std::vector<std::string> summary() const override {
    return {m_options.component + (m_options.to.empty() ? ": back one version" : ": back to " + m_options.to)};
  }

 private:
  static constexpr const char* k_footer =
      "Without --to, a rollback walks back: it goes to the newest kept version older than the current one (by the "
      "component's version scheme) that is not quarantined, so a second rollback goes further back, never forward "
      "to the version just left. A sync component keeps one backup: it goes to the version before its last sync. "
      "The version left is quarantined (upgrade refuses it without --allow-quarantined); the version landed on "
      "never is.\n"
      "In a SUC Plan's Job, a rollback without --to that the same Plan (SYSTEM_UPGRADE_PLAN_NAME and "
      "SYSTEM_UPGRADE_PLAN_LATEST_HASH) already took does nothing and exits 0: a retried or re-run Job never "
      "walks back twice. To walk back again, apply the Plan under another name or change its version.\n"
      "--to VERSION names the version: running it again does nothing, so it is the form to repeat. A quarantined "
      "VERSION is refused (exit 3) unless --allow-quarantined, which takes it out of the quarantine. --keep never "
      "removes the version the last rollback landed on.\n"
      "\n"
      "Examples:\n"
      "  hoist rollback --component app\n"
      "  hoist rollback --component k3s --to v1.30.6+k3s1 --restart k3s.service\n"
      "  hoist rollback --component k3s --to v1.30.6+k3s1 --restore-snapshot \\\n"
      "      --restart k3s.service\n";

  RollbackOptions m_options;
  bool m_allow_quarantined = false;
  HostActionOptions m_host;
  unsigned m_datastore_timeout = 300;
};

}  // namespace

std::unique_ptr<Command> make_rollback_command() {
  return std::make_unique<RollbackCommand>();
}

}  // namespace hoist::cli
