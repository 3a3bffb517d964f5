#pragma once

#include <string>
#include <vector>

#include "hoist/host/health_check.hpp"
#include "hoist/host/host_steps.hpp"
#include "hoist/model/context.hpp"
#include "hoist/model/state.hpp"
#include "hoist/run/server_preflight.hpp"
#include "hoist/run/upgrade_run.hpp"
#include "hoist/sys/durable_tree.hpp"

namespace hoist {

/// The health phase of a run (ARCHITECTURE.md, "The run"), after its host steps: the checks that the components
/// `names` still owe (ComponentState::owed_health_checks, recorded with their switch) are run until they pass or
/// `policy.timeout` runs out. Passed: the debt is cleared and the verdict recorded. Failed: every component that
/// owed them is switched back to its previous version as `hoist rollback` does (switch_back), its restarts are
/// done again (or the reboot asked for, per `--reboot`), the verdict and a `rolled-back` result naming the check and
/// what it saw are recorded, and hoist::Failure (exit 1) is thrown. A component with no previous version keeps its
/// debt and fails the run. SIGTERM during the checks throws Interrupted with the debt still recorded. With
/// `remount`, the mounts a switch back writes are made writable again (after_switch() made them read-only). Each
/// switch back is added to `summary->rolled_back` when `summary` is given.
///
/// A component that a k3s or RKE2 server runs goes back only as far as its datastore can follow
/// (docs/datastore.md): its SQLite copy or single etcd member restored first (then the checks run again on the
/// version switched back to, and the message says how they went), or no restore needed because the version change
/// cannot have moved the datastore; else it is kept on the failed version (`kept_for_datastore`, its checks still
/// owed) and the message names the snapshot and the restore steps.
void run_health_phase(const Context& context, const StateStore& store, HostSteps& host,
                      const std::vector<std::string>& names, const HealthPolicy& policy, HealthProbes probes,
                      Durability durability, Remount remount, const char* command, RunSummary* summary,
                      const DatastoreOptions& datastore);

/// A component as the host steps of a run found it: whether the run switched it, and the restarts it owed then
/// (before HostSteps::after_switch() struck those it did).
struct BeforeHostSteps {
  std::string name;
  bool changed = false;
  std::vector<std::string> owed_restarts;
};

/// What a run does when a host step after its switches failed (`failure`: a restart, a reboot that did not come,
/// the mounts not put back; never SIGTERM): it is handled like a failed health check, so that exit 1 leaves the
/// host on the old versions. Every component of `components` that the run switched, or that owed restarts (an
/// earlier run's switch), goes back: switched back to its previous version (switch_back()) unless that version is
/// quarantined (the current one came from a switch back: it stays, its restarts owed); a first install of a
/// sysext withdrawn; any other first install stays. Going back owes the restarts of the units that the failed call
/// had restarted (they run the version left now), not the others, and no reboot (nothing booted the version
/// left). The version left is quarantined only when a unit was restarted and did not come up (`unit_failed()`);
/// a version never tried is not. Records each as `rolled-back` with the failure, adds the switch backs to
/// `summary->rolled_back`, and throws hoist::Failure (exit 1) naming them; `failure` itself when nothing goes back.
/// A server's datastore decides as in run_health_phase(); a version whose unit was never started (no unit failed)
/// cannot have moved it.
[[noreturn]] void give_up_after_switch(const Context& context, const StateStore& store, HostSteps& host,
                                       const std::vector<BeforeHostSteps>& components,
                                       const AfterSwitchFailure& failure, Durability durability, Remount remount,
                                       const char* command, RunSummary* summary, const DatastoreOptions& datastore);

/// The specs of `checks`, as owed in the state.
std::vector<std::string> specs_of(const std::vector<HealthCheck>& checks);

}  // namespace hoist
