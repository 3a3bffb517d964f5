#include "plan_wait.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <system_error>
#include <vector>

#include "hoist/kube/kube_client.hpp"
#include "hoist/kube/plan_waiter.hpp"
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

}  // namespace

// kubectl's order: --kubeconfig, KUBECONFIG, ~/.kube/config, and the pod's service account when none is given.
KubeConfig load_kube_config(const Context& context, const std::string& kubeconfig, const std::string& kube_context) {
  if (!kubeconfig.empty()) {
    return KubeConfig::from_kubeconfig(kubeconfig, kube_context);
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
    return KubeConfig::from_kubeconfigs(files, kube_context);
  }
  if (const auto home = context.env.find("HOME"); home != context.env.end() && !home->second.empty()) {
    const std::filesystem::path file = std::filesystem::path(home->second) / ".kube" / "config";
    if (std::error_code error; std::filesystem::exists(file, error)) {
      return KubeConfig::from_kubeconfig(file, kube_context);
    }
  }
  if (!kube_context.empty()) {
    throw UsageError("--context " + escaped(kube_context) +
                     ": no kubeconfig to take it from (--kubeconfig, KUBECONFIG or ~/.kube/config)");
  }
  return KubeConfig::in_cluster(context.suc);
}

std::string wait_for_plan_of_job(const Context& context, const PlanWait& wait) {
  check_plan_name(wait.plan);
  if (auto dumps = forbid_core_dumps(); !dumps) {
    spdlog::debug("{}", dumps.error().message);  // not fatal: only a hardening
  }
  KubeConfig config = load_kube_config(context, wait.kubeconfig, wait.kube_context);
  PlanWaitOptions options;
  options.plan = wait.plan;
  options.namespace_ = wait.namespace_.empty() ? config.default_namespace : wait.namespace_;
  if (options.namespace_.empty()) {
    throw UsageError("no namespace: the service account gives none; use --namespace");
  }
  options.timeout = std::chrono::milliseconds(std::llround(wait.timeout_seconds * 1000));
  if (!wait.node_version.empty()) {
    options.node_version = wait.node_version;
  }
  spdlog::info("waiting for plan '{}' in namespace '{}' on '{}' (timeout {} s{})", options.plan, options.namespace_,
               config.server(), wait.timeout_seconds,
               options.node_version ? ", kubelet version " + *options.node_version : std::string());
  const KubeClient client(std::move(config));
  std::string summary = wait_for_plan(client, options).summary(options.plan);
  spdlog::info("plan '{}' is complete", options.plan);
  return summary;
}

}  // namespace hoist::cli
