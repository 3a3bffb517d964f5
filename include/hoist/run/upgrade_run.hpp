#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "hoist/host/health_check.hpp"
#include "hoist/host/host_actions.hpp"
#include "hoist/model/component.hpp"
#include "hoist/model/context.hpp"
#include "hoist/model/version.hpp"
#include "hoist/model/version_gate.hpp"
#include "hoist/run/progress_reporter.hpp"
#include "hoist/run/server_preflight.hpp"
#include "hoist/sys/durable_tree.hpp"
#include "hoist/transfer/payload.hpp"
#include "hoist/transfer/transfer.hpp"
#include "hoist/util/exit_code.hpp"

namespace hoist {

/// One component of a run, resolved: its version agreed on, its payload opened.
struct UpgradeItem {
  ComponentSpec spec;
  Version target;
  Payload payload;
  /// The component's own checks (the manifest's `health_checks`), parsed; the run's (UpgradeOptions) come first.
  std::vector<HealthCheck> health_checks;
};

/// Resolves a spec: the version from `sources` (agree_on_version), the payload
/// opened and matched to the kind (tree takes a directory or an archive, sync
/// a directory, file a file; an archive is one file to the file kind), the
/// spec's health checks parsed.
/// Throws UsageError (exit 2), before anything else happens.
UpgradeItem resolve_item(ComponentSpec spec, const VersionSources& sources);

/// Refuses a run whose components share a name, or whose destinations, as the
/// host under `root` resolves them (HostRoot::resolve()), are the same, nest,
/// or are the host's root itself (UsageError). Changes nothing.
void check_distinct(const std::vector<UpgradeItem>& items, const HostRoot& root);

/// What a run decided for each component, one line each ("app: 1.0.0 -> 2.0.0 (upgrade)"), as the log says it:
/// the CLI puts it in the pod's termination message, which the cluster shows after the pod's logs are gone.
struct RunSummary {
  std::vector<std::string> lines;
  /// What the health phase switched back, one line a component, as its state's last result says it
  /// ("app 2.0.0 -> 1.0.0: health check unit:k3s did not pass within 300 s: ..."): the node's event says so.
  std::vector<std::string> rolled_back;
  /// Set when the run found every component at its target with nothing owed (no restart, check or reboot to finish,
  /// no --reboot always): such a run posts no node Event, which would only repeat the last one.
  bool changed_nothing = false;
};

struct UpgradeOptions {
  ProgressStyle progress = ProgressStyle::lines;
  Durability durability = Durability::syncfs;
  /// Filled with the gate's decision for each component, when given.
  RunSummary* summary = nullptr;
  /// The host steps: --remount, --restart, --reboot (host/host_steps.hpp).
  HostActions host;
  /// Archive payloads: TransferOptions' limits against decompression bombs (0: none).
  uint64_t max_unpacked_bytes = 0;
  double max_unpack_ratio = 0;
  /// The worker threads of the transfer (TransferOptions::threads) and of a directory payload's verification (0:
  /// twice the cores, at most 16).
  unsigned threads = 0;
  /// --health-check (every component's), --health-settle, --health-timeout; and what the checks need.
  HealthPolicy health;
  HealthProbes probes;
  /// `--installed-version-from node`: the kubeletVersion of the Node this Job runs on, as the API spells it; it
  /// throws hoist::Failure when the Node cannot be read. Set by the CLI when a component asks for it.
  std::function<std::string()> node_kubelet_version;
  /// Where that version comes from, for messages: "the Node NAME's kubeletVersion".
  std::string node_version_source;
  /// --datastore-snapshot, --datastore-timeout: a k3s or RKE2 server's datastore (docs/datastore.md).
  DatastoreOptions datastore;
};

/// `hoist upgrade` in the run's order (ARCHITECTURE.md, "The run"): lock, state and gate (one gate for
/// all components: one refusal refuses the run), verification of every payload
/// that is to be installed, then staging of all, then the switches, then the
/// state, the garbage collection (--keep) and the host steps. A failure
/// undoes the switches made so far and removes what was staged: the host is
/// left on the old versions. Records every outcome in the components' states.
/// Returns ok, or throws hoist::Error with the exit code.
ExitCode run_upgrade(const Context& context, std::vector<UpgradeItem> items, const UpgradeOptions& options);

/// Whether a run switches (`hoist upgrade`) or only stages ahead of the switch (`hoist stage`).
enum class RunMode { upgrade, stage };

/// `hoist stage` (the prepare step of a Plan, before SUC cordons and drains the node): the same lock, gate and
/// verification as run_upgrade(), so that everything the upgrade would refuse is refused here (exit 3, 5, 2, or 1
/// for a destination the switch could not take or too little free space); then every component that changes
/// staged beside its current version and recorded as staged (ComponentState::staged), without switching,
/// restarting or rebooting. The upgrade that follows finds the staged version, checks that it holds its payload
/// and switches to it. A sync cannot be staged (its sync is its switch): only decided and verified. Returns ok, or
/// throws hoist::Error with the exit code.
ExitCode run_stage(const Context& context, std::vector<UpgradeItem> items, const UpgradeOptions& options);

/// What a dry run found for one component.
struct ComponentPreview {
  std::string name;
  ComponentKind kind = ComponentKind::tree;
  /// The destination as given.
  std::string destination;
  /// The gate's line ("app: 1.0.0 -> 2.0.0 (upgrade)").
  std::string gate;
  /// What its switch would add, change and remove; none when the gate says the host does not change.
  std::optional<TransferStats> changes;
  /// The health checks its switch would owe, in the order they would run; none without `changes`.
  std::vector<HealthCheck> checks;
  /// The version `hoist stage` left complete and not switched to (ComponentState::staged), "" when none, and
  /// when its staging began.
  std::string staged;
  std::string staged_at;
  /// Whether `staged` is this run's target, and whether it holds its payload: the switch would take it as it is.
  bool staged_is_target = false;
  bool staged_holds = false;
};

/// What `hoist upgrade --dry-run` would do, per component in the run's order, for the CLI to print.
struct UpgradePreview {
  std::vector<ComponentPreview> components;
  /// --health-settle and --health-timeout, which the checks would run with.
  std::chrono::seconds health_settle{0};
  std::chrono::seconds health_timeout{0};

  /// Whether any component would change: when none does, the run would only tidy up.
  [[nodiscard]] bool changes_host() const;
};

/// The dry run of run_upgrade(): no lock, nothing written; the same gate (a refusal throws, exit 3) and, when any
/// component would change, the same verification (exit 5), then what each switch would change.
UpgradePreview preview_upgrade(const Context& context, std::vector<UpgradeItem> items, const UpgradeOptions& options);

}  // namespace hoist
