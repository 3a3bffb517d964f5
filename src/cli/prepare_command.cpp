#include "prepare_command.hpp"

#include <CLI/CLI.hpp>
#include <vector>

#include "help_format.hpp"
#include "hoist/model/context.hpp"
#include "plan_wait.hpp"

namespace hoist::cli {

namespace {

class PrepareCommand final : public Command {
 public:
  CLI::App* add_to(CLI::App& app) override {
    CLI::App* sub = app.add_subcommand(
        "prepare",
        "wait until another Plan is complete: its status.applying empty and every node it selects labeled "
        "with its latest hash (the prepare step of an agent Plan)");
    sub->add_option("PLAN", m_wait.plan, "the Plan to wait for")->required();
    sub->add_option("-n,--namespace", m_wait.namespace_,
                    "the Plan's namespace (default: the kubeconfig context's, or the service account's)");
    sub->add_option("--timeout", m_wait.timeout_seconds,
                    "seconds to wait before failing: the Plan's jobActiveDeadlineSecs less the drain and the upgrade")
        ->check(number_of_seconds(Zero::refused))
        ->capture_default_str();
    sub->add_option("--kubeconfig", m_wait.kubeconfig,
                    "a kubeconfig for runs outside the cluster (default: $KUBECONFIG, a ':'-separated list merged "
                    "as kubectl merges it, then ~/.kube/config, then the pod's service account)");
    sub->add_option("--context", m_wait.kube_context, "the kubeconfig context to use (default: its current-context)");
    sub->add_option(
        "--node-version", m_wait.node_version,
        "also require this kubelet version on every selected node (compared with '+' as '-', as SUC munges)");
    sub->footer(
        "Examples:\n"
        "  hoist prepare k3s-server --timeout 1200\n"
        "  hoist prepare k3s-server -n system-upgrade --node-version v1.31.2+k3s1 \\\n"
        "      --kubeconfig ~/.kube/config\n"
        "\n"
        "Exit status:\n"
        "  0  the Plan is complete\n"
        "  1  the Plan failed (SUC marked its Job failed), or --timeout passed first\n"
        "  2  bad usage, or no kubeconfig or service account to reach the API server with\n"
        "\n"
        "Environment:\n"
        "  KUBECONFIG                      kubeconfig files, ':'-separated, merged as kubectl merges them\n"
        "  HOIST_TERMINATION_MESSAGE_PATH  the outcome's file (default: /dev/termination-log)\n");
    return sub;
  }

  [[nodiscard]] bool needs_host() const override { return false; }
  /// A Plan's prepare container fails the Job too: the cluster must see why after SUC has collected the pod.
  [[nodiscard]] bool reports_outcome() const override { return true; }
  [[nodiscard]] std::vector<std::string> summary() const override { return m_summary; }

  ExitCode run(Context& context) override {
    m_summary = {wait_for_plan_of_job(context, m_wait)};
    return ExitCode::ok;
  }

 private:
  PlanWait m_wait;
  std::vector<std::string> m_summary;
};

}  // namespace

std::unique_ptr<Command> make_prepare_command() {
  return std::make_unique<PrepareCommand>();
}

}  // namespace hoist::cli
