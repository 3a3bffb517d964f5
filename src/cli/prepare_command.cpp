#include "prepare_command.hpp"

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <system_error>
#include <vector>

#include "hoist/kube/kube_client.hpp"
#include "hoist/kube/kube_config.hpp"
#include "hoist/kube/plan_waiter.hpp"
#include "hoist/model/context.hpp"
#include "hoist/sys/secrets.hpp"
#include "hoist/util/error.hpp"
#include "hoist/util/text.hpp"

namespace hoist::cli {

namespace {

// A Plan name becomes part of a label key (plan.upgrade.cattle.io/<plan>) and of
// a field selector, so it must be a DNS label-like name, as Kubernetes requires.
void check_plan_name(const std::string& name) {
  const bool valid_chars = name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-.") == std::string::npos;
  if (name.empty() || name.size() > 63 || !valid_chars || name.front() == '-' || name.back() == '-') {
    throw UsageError("invalid plan name '" + name + "': expected lower-case letters, digits, '-' and '.' (at most 63)");
  }
}

class PrepareCommand final : public Command {
 public:
  CLI::App* add_to(CLI::App& app) override {
    CLI::App* sub = app.add_subcommand(
        "prepare",
        "wait until another Plan is complete: its status.applying empty and every node it selects labeled "
        "with its latest hash (the prepare step of an agent Plan)");
    sub->add_option("PLAN", m_plan, "the Plan to wait for")->required();
    sub->add_option("-n,--namespace", m_namespace,
                    "the Plan's namespace (default: the kubeconfig context's, or the service account's)");
    sub->add_option("--timeout", m_timeout_seconds,
                    "seconds to wait before failing: the Plan's jobActiveDeadlineSecs less the drain and the upgrade")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    sub->add_option("--kubeconfig", m_kubeconfig,
                    "a kubeconfig for runs outside the cluster (default: $KUBECONFIG, a ':'-separated list merged "
                    "as kubectl merges it, then ~/.kube/config, then the pod's service account)");
    sub->add_option("--context", m_context, "the kubeconfig context to use (default: its current-context)");
    sub->add_option(
        "--node-version", m_node_version,
        "also require this kubelet version on every selected node (compared with '+' as '-', as SUC munges)");
    return sub;
  }

  [[nodiscard]] bool needs_host() const override { return false; }
  /// A Plan's prepare container fails the Job too: the cluster must see why after SUC has collected the pod.
  [[nodiscard]] bool reports_outcome() const override { return true; }
  [[nodiscard]] std::vector<std::string> summary() const override { return m_summary; }

  ExitCode run(Context& context) override {
    check_plan_name(m_plan);
    if (auto dumps = forbid_core_dumps(); !dumps) {
      spdlog::debug("{}", dumps.error().message);  // not fatal: only a hardening
    }
    KubeConfig config = load_config(context);
    PlanWaitOptions options;
    options.plan = m_plan;
    options.namespace_ = m_namespace.empty() ? config.default_namespace : m_namespace;
    if (options.namespace_.empty()) {
      throw UsageError("no namespace: the service account gives none; use --namespace");
    }
    options.timeout = std::chrono::milliseconds(std::llround(m_timeout_seconds * 1000));
    if (!m_node_version.empty()) {
      options.node_version = m_node_version;
    }
    spdlog::info("waiting for plan '{}' in namespace '{}' on '{}' (timeout {} s{})", options.plan, options.namespace_,
                 config.server(), m_timeout_seconds,
                 options.node_version ? ", kubelet version " + *options.node_version : std::string());
    const KubeClient client(std::move(config));
    m_summary = {wait_for_plan(client, options).summary(options.plan)};
    spdlog::info("plan '{}' is complete", options.plan);
    return ExitCode::ok;
  }

 private:
  std::string m_plan;
  std::string m_namespace;
  double m_timeout_seconds = 840;
  std::string m_kubeconfig;
  std::string m_context;

  // kubectl's order: --kubeconfig, KUBECONFIG, ~/.kube/config, and the pod's service account when none is given.
  [[nodiscard]] KubeConfig load_config(const Context& context) const {
    if (!m_kubeconfig.empty()) {
      return KubeConfig::from_kubeconfig(m_kubeconfig, m_context);
    }
    if (const auto list = context.env.find("KUBECONFIG"); list != context.env.end() && !list->second.empty()) {
      // As kubectl: empty entries and files that do not exist are skipped; when none is left, say which were named.
      std::vector<std::filesystem::path> files;
      std::string named;
      const std::string& text = list->second;
      for (std::size_t start = 0, end; start <= text.size(); start = end + 1) {
        end = std::min(text.find(':', start), text.size());
        const std::string entry = text.substr(start, end - start);
        if (entry.empty()) {
          continue;
        }
        named += (named.empty() ? "'" : ", '") + escaped(entry) + "'";
        if (std::error_code error; std::filesystem::exists(entry, error)) {
          files.emplace_back(entry);
        }
      }
      if (files.empty()) {
        throw UsageError("KUBECONFIG names no kubeconfig file that exists (" + named + ")");
      }
      return KubeConfig::from_kubeconfigs(files, m_context);
    }
    if (const auto home = context.env.find("HOME"); home != context.env.end() && !home->second.empty()) {
      const std::filesystem::path file = std::filesystem::path(home->second) / ".kube" / "config";
      if (std::error_code error; std::filesystem::exists(file, error)) {
        return KubeConfig::from_kubeconfig(file, m_context);
      }
    }
    if (!m_context.empty()) {
      throw UsageError("--context " + escaped(m_context) +
                       ": no kubeconfig to take it from (--kubeconfig, KUBECONFIG or ~/.kube/config)");
    }
    return KubeConfig::in_cluster(context.suc);
  }
  std::string m_node_version;
  std::vector<std::string> m_summary;
};

}  // namespace

std::unique_ptr<Command> make_prepare_command() {
  return std::make_unique<PrepareCommand>();
}

}  // namespace hoist::cli
