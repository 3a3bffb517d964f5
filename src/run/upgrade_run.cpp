#include "hoist/run/upgrade_run.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "health_phase.hpp"
#include "hoist/host/interrupted.hpp"
#include "hoist/host/program_output.hpp"
#include "hoist/model/state_update.hpp"
#include "hoist/run/host_truth.hpp"
#include "hoist/sys/stop_signals.hpp"
#include "hoist/util/error.hpp"
#include "hoist/util/text.hpp"
#include "run_lock.hpp"
#include "upgrade_phases.hpp"

namespace hoist {

namespace {

using Work = UpgradeRun::Work;

std::optional<Version> parse_installed(const ComponentState& state, VersionScheme scheme) {
  if (state.current.empty()) {
    return std::nullopt;
  }
  try {
    return Version::parse(scheme, state.current);
  } catch (const UsageError&) {
    // `pre-hoist` after a rollback to it: no version hoist installed is current.
    return std::nullopt;
  }
}

// A program's version output is a line or two; the bounds keep a wrong ARGS (a server that starts) harmless.
constexpr std::chrono::seconds k_probe_timeout{10};
constexpr size_t k_probe_output = 64 * 1024;

// --installed-version-from: what the file at the destination says it is. None when there is no file (nothing
// installed); an error when it runs but names no version, since then the gate cannot be trusted.
std::optional<Version> probe_installed(const HostRoot& root, Work& work) {
  const ComponentSpec& spec = work.item.spec;
  const auto& args = spec.installed_version_from.exec_args;
  std::string command = spec.destination;
  for (const auto& arg : args) {
    command += " " + arg;
  }
  command = "'" + escaped(command) + "'";
  auto ran = run_in_host_root(root, spec.destination, args, k_probe_timeout, k_probe_output);
  if (!ran) {
    if (ran.error().errnum == ENOENT) {
      return std::nullopt;
    }
    throw Failure(work.name() + ": cannot tell the installed version (--installed-version-from " +
                  spec.installed_version_from.text + "): " + ran.error().message);
  }
  const std::string head = escaped(std::string_view(ran->output).substr(0, 200));
  if (ran->exit_status != 0) {
    throw Failure(work.name() + ": cannot tell the installed version: " + command + " exited with status " +
                  std::to_string(ran->exit_status) + " ('" + head + "')");
  }
  auto version = first_version_in(ran->output, spec.version_scheme);
  if (!version) {
    throw Failure(work.name() + ": cannot tell the installed version: " + command + " printed no " +
                  std::string(to_string(spec.version_scheme)) + " version ('" + head + "')");
  }
  work.installed_from = "what " + command + " says";
  return version;
}

// --installed-version-from node: what the Node this Job runs on says its kubelet is. A Node that cannot be read,
// or whose version is not one of the scheme's, fails the run: the gate cannot be trusted without it.
Version node_installed(Work& work, const UpgradeOptions& options) {
  const ComponentSpec& spec = work.item.spec;
  const std::string cannot = work.name() + ": cannot tell the installed version (--installed-version-from node)";
  if (!options.node_kubelet_version) {
    throw Failure(cannot + ": this run has no access to the Kubernetes API");
  }
  std::string text;
  try {
    text = options.node_kubelet_version();
  } catch (const Failure& e) {
    throw Failure(cannot + ": " + options.node_version_source + ": " + e.what());
  }
  try {
    Version version = Version::parse(spec.version_scheme, text);
    work.installed_from = "from " + options.node_version_source;
    return version;
  } catch (const UsageError&) {
    throw Failure(cannot + ": " + options.node_version_source + " is '" + escaped(text) + "', not a " +
                  std::string(to_string(spec.version_scheme)) + " version");
  }
}

// Whether a switch back may need mounts made writable: --remount, or a component's manifest `remount`.
Remount remount_of(const std::vector<Work>& works, const UpgradeOptions& options) {
  const bool any =
      options.host.remount == Remount::yes ||
      std::any_of(works.begin(), works.end(), [](const Work& work) { return work.item.spec.remount == Remount::yes; });
  return any ? Remount::yes : Remount::no;
}

std::vector<std::string> names_of(const std::vector<Work>& works) {
  std::vector<std::string> names;
  for (const Work& work : works) {
    names.push_back(work.name());
  }
  return names;
}

std::vector<SwitchedComponent> switched_components(const std::vector<Work>& works) {
  std::vector<SwitchedComponent> switched;
  for (const Work& work : works) {
    switched.push_back({work.name(), work.item.spec.kind, work.item.target.text(), work.gate.changes_host()});
  }
  return switched;
}

}  // namespace

ExitCode run_upgrade(const Context& context, std::vector<UpgradeItem> items, const UpgradeOptions& options) {
  return UpgradeRun(context, std::move(items), options, DryRun::no).run();
}

ExitCode run_stage(const Context& context, std::vector<UpgradeItem> items, const UpgradeOptions& options) {
  return UpgradeRun(context, std::move(items), options, DryRun::no, RunMode::stage).run();
}

UpgradePreview preview_upgrade(const Context& context, std::vector<UpgradeItem> items, const UpgradeOptions& options) {
  return UpgradeRun(context, std::move(items), options, DryRun::yes).preview();
}

bool UpgradePreview::changes_host() const {
  return std::any_of(components.begin(), components.end(),
                     [](const ComponentPreview& component) { return component.changes.has_value(); });
}

UpgradeRun::UpgradeRun(const Context& context, std::vector<UpgradeItem> items, const UpgradeOptions& options,
                       DryRun dry_run, RunMode mode)
    : m_context(context),
      m_root(context.root()),
      m_options(options),
      m_dry_run(dry_run),
      m_mode(mode),
      m_command(mode == RunMode::stage ? "stage" : "upgrade"),
      m_store(m_root, context.options.state_dir),
      m_items(std::move(items)) {
  check_distinct(m_items, m_root);
  // SIGTERM/SIGINT stop the run at its safe points.
  stop_signals::install();
  // A dry run takes no lock: it writes nothing (not even the lock file), and
  // every file it reads is replaced atomically by the runs that write them.
  if (m_dry_run == DryRun::no) {
    m_lock.emplace(take_run_lock(context));
  }
  // Reboot handshake, remount, restarts, reboot: after the lock, so that its remounts are put back before the
  // lock is released.
  m_host.emplace(context, m_command, options.host, dry_run);
}

ExitCode UpgradeRun::run() {
  if (m_dry_run == DryRun::yes) {
    throw std::logic_error("UpgradeRun::run() of a dry run: preview() is its way");
  }
  if (m_mode == RunMode::stage) {
    return stage_only();
  }
  read_states();
  if (!gate()) {
    finish_unchanged();
    return ExitCode::ok;
  }
  verify();
  preflight();
  try {
    reach_the_bus();
    remount();
    clean_leftovers();
    stage();
    snapshot();
    switch_over();
  } catch (const std::exception& e) {
    // A switch that stays made is part of the error; a stop (SIGTERM) stays a stop, its log says the rest.
    if (std::string stuck = undo(e); !stuck.empty() && dynamic_cast<const Interrupted*>(&e) == nullptr) {
      throw Failure(e.what() + stuck);
    }
    throw;
  }
  record();
  host_steps();
  return ExitCode::ok;
}

UpgradePreview UpgradeRun::preview() {
  read_states();
  if (gate()) {
    verify();
  }
  UpgradePreview preview;
  preview.health_settle = m_options.health.settle;
  preview.health_timeout = m_options.health.timeout;
  for (Work& work : m_works) {
    const ComponentSpec& spec = work.item.spec;
    ComponentPreview component;
    component.name = spec.name;
    component.kind = spec.kind;
    component.destination = spec.destination;
    component.gate = work.gate.message;
    if (work.state && work.state->staged && work.installer->has_complete(work.state->staged->version)) {
      component.staged = work.state->staged->version;
      component.staged_at = work.state->staged->started_at;
      component.staged_is_target = component.staged == work.item.target.text();
      component.staged_holds =
          work.staged_ahead && work.gate.changes_host() &&
          work.installer->holds(component.staged, work.item.payload, transfer_options(work, nullptr));
    }
    if (work.gate.changes_host()) {
      component.changes =
          work.installer->preview(work.item.payload, work.installed_text(), transfer_options(work, nullptr));
    }
    preview.components.push_back(std::move(component));
  }
  for (size_t i = 0; i < m_works.size(); ++i) {
    if (preview.components[i].changes) {
      preview.components[i].checks = checks_of(m_works[i]);
    }
  }
  return preview;
}

void UpgradeRun::read_states() {
  const bool dry_run = m_dry_run == DryRun::yes;
  for (auto& item : m_items) {
    Work work(std::move(item));
    work.state = m_store.load(work.item.spec.name);
    // `hoist stage` runs before the drain, in the prepare container: it leaves a pending reboot, and what a killed
    // switch back still owes, to the upgrade that follows, which does host steps.
    const bool host_steps = m_mode == RunMode::upgrade;
    if (work.state) {
      check_identity(*work.state, work.item.spec);
    }
    if (work.state && host_steps) {
      try {
        work.reboot_settled =
            m_host->settle_pending_reboot(m_store, *work.state, work.item.target.text()) == Handshake::completed;
      } catch (const AfterSwitchFailure& failure) {
        // The reboot an earlier run owed into its switch did not come: that switch goes back, as it would have in
        // the run that made it.
        give_up_after_switch(m_context, m_store, *m_host, {{work.name(), true, work.state->owed_restarts}}, failure,
                             m_options.durability,
                             work.item.spec.remount == Remount::yes ? Remount::yes : m_options.host.remount, m_command,
                             m_options.summary, m_options.datastore);
      }
    }
    work.installer = make_installer(
        m_root,
        InstallTarget{work.item.spec.name, work.item.spec.kind, work.item.spec.destination, m_store.state_dir()},
        m_options.durability);
    // The host's commit points are the truth when a killed run left the state behind them; the gate must
    // start from what is installed. A dry run only looks.
    if (work.state) {
      const bool pending_rollback = work.state->rollback.has_value();
      const std::string recorded = work.state->current;
      if (agree_with_host(*work.installer, *work.state) && !dry_run) {
        m_store.save(*work.state);
      }
      // A switch back (or rollback) that a killed run made and did not record is finished as `hoist rollback`
      // finishes one: with its restarts, now, since the gate may refuse the run (the version it left is
      // quarantined) and a refused run does nothing more.
      if (work.state->current != recorded && pending_rollback && !dry_run && host_steps) {
        const LogFields host_phase{{"phase", "host"}};
        m_host->after_switch(m_store, {SwitchedComponent{work.name(), work.item.spec.kind, work.state->current, true}});
        work.state = m_store.load(work.name());
      }
    }
    if (work.state) {
      work.installer->use_selinux_label(work.state->selinux_label);
    }
    work.staged_ahead = staged_ahead(work);
    m_works.push_back(std::move(work));
  }
  m_items.clear();
}

void UpgradeRun::decide(Work& work) {
  const ComponentSpec& spec = work.item.spec;
  work.installed = work.state ? parse_installed(*work.state, spec.version_scheme) : std::nullopt;
  work.installed_from.clear();
  // hoist's own state is the truth while the host agrees with it. With no state (another installer put the
  // component there) or when the host drifted from it (that installer ran again), the gate asks the host.
  if (spec.installed_version_from.given() &&
      (!work.installed || work.installer->integrity(work.state->current, nullptr) == Integrity::damaged)) {
    auto probed = spec.installed_version_from.node ? std::optional(node_installed(work, m_options))
                                                   : probe_installed(m_root, work);
    if (probed) {
      spdlog::info("{}: {} is installed ({})", work.name(), probed->text(), work.installed_from);
      work.installed = std::move(probed);
    }
  }
  Integrity integrity = Integrity::damaged;
  if (work.installed && *work.installed == work.item.target) {
    // A version another installer put there is whole as far as hoist can tell.
    integrity = work.installed_from.empty() ? work.installer->integrity(work.state->current, &work.item.payload)
                                            : Integrity::intact;
  }
  work.gate = decide_gate(work.name(), work.installed, integrity, work.item.target, spec.allow_downgrade,
                          spec.allow_minor_skip, work.installed_from);
  // A version that a rollback left stays out until the operator asks for it again: a Plan re-applied (any edit
  // changes its hash) would otherwise undo the rollback.
  const QuarantinedVersion* quarantined = work.state ? find_quarantined(*work.state, work.item.target.text()) : nullptr;
  if (quarantined != nullptr && work.gate.changes_host() && spec.allow_quarantined == AllowQuarantined::no) {
    work.gate =
        Gate{GateDecision::refused, work.name() + ": refusing " + work.item.target.text() +
                                        ": it is quarantined since " + quarantined->since + " (" + quarantined->reason +
                                        "); pass --allow-quarantined to install it again"};
  }
}

bool UpgradeRun::gate() {
  for (Work& work : m_works) {
    const LogFields fields = phase_fields(work, "gate");
    decide(work);
    spdlog::info("gate: {}", work.gate.message);
    if (m_options.summary != nullptr) {
      m_options.summary->lines.push_back(work.gate.message);
    }
  }
  // One gate for the run: a refusal of any component refuses all of them.
  for (const Work& work : m_works) {
    if (work.gate.decision == GateDecision::refused) {
      if (m_dry_run == DryRun::no) {
        record_outcome(outcome::k_refused, work.gate.message, Everyone::no);
      }
      throw Error(ExitCode::refused, work.gate.message);
    }
  }
  const bool anything =
      std::any_of(m_works.begin(), m_works.end(), [](const Work& w) { return w.gate.changes_host(); });
  if (!anything) {
    spdlog::info("nothing to do");
  }
  return anything;
}

void UpgradeRun::finish_unchanged() {
  bool quiet = m_options.host.reboot != RebootPolicy::always;
  for (Work& work : m_works) {
    // Without a state, hoist never installed it: the host stays exactly as another installer left it.
    if (!work.state) {
      continue;
    }
    tidy_up(work);
    const std::string settled = settle_owed(work, *work.state);
    quiet = quiet && settled.empty() && !work.reboot_settled && work.state->owed_restarts.empty() &&
            work.state->owed_health_checks.empty() && !work.state->pending_reboot;
    // With restarts still owed, the result stays what it was until after_switch() does them.
    if (!work.reboot_settled && work.state->owed_restarts.empty()) {
      set_last_result(*work.state, m_command, outcome::k_unchanged, work.item.target.text(), settled);
      m_store.save(*work.state);
    } else if (!settled.empty()) {
      m_store.save(*work.state);
    }
  }
  if (m_options.summary != nullptr) {
    m_options.summary->changed_nothing = quiet;
  }
  // --reboot always; and what an earlier run left owed: its checks were cut short (SIGTERM, a kill) or waited for
  // this boot.
  host_steps();
}

// A run with nothing to install still finishes what a killed run left: its leftovers, and the versions beyond
// --keep that it switched away from and never collected. Best effort, with no remount: a failure is a warning,
// and the next run that writes tries again.
void UpgradeRun::tidy_up(Work& work) {
  ComponentState& state = *work.state;
  try {
    bool changed = work.installer->clean_leftovers(&state);
    if (state.staged && state.staged->version != work.item.target.text()) {
      drop_stale_staged(work, state);
      changed = true;
    }
    if (!versions_to_collect(state, work.item.spec.keep).empty()) {
      collect_garbage(work, state);
    } else if (changed) {
      m_store.save(state);
    }
  } catch (const std::exception& e) {
    spdlog::warn("{}: could not remove what an interrupted run left: {}", work.name(), e.what());
  }
}

std::string UpgradeRun::settle_owed(const Work& work, ComponentState& state) const {
  std::string note;
  const auto asked = m_host->restarts_owed_by(work.item.spec.kind);
  std::vector<std::string> kept;
  std::string dropped;
  for (const auto& unit : state.owed_restarts) {
    if (std::find(asked.begin(), asked.end(), unit) != asked.end()) {
      kept.push_back(unit);
    } else {
      dropped += (dropped.empty() ? "" : ", ") + unit;
    }
  }
  if (!dropped.empty()) {
    note = "dropped the restarts an earlier run owed that this run does not ask for: " + dropped;
    spdlog::warn("{}: {}", work.name(), note);
    state.owed_restarts = std::move(kept);
  }
  const std::vector<std::string> checks = specs_of(checks_of(work));
  if (!state.owed_health_checks.empty() && state.owed_health_checks != checks) {
    std::string owed;
    for (const auto& spec : state.owed_health_checks) {
      owed += (owed.empty() ? "" : ", ") + spec;
    }
    const std::string change =
        checks.empty() ? "dropped the health checks an earlier run owed (" + owed + "): this run asks for none"
                       : "replaced the health checks an earlier run owed (" + owed + ") with this run's";
    spdlog::warn("{}: {}", work.name(), change);
    note += (note.empty() ? "" : "; ") + change;
    state.owed_health_checks = checks;
  }
  return note;
}

void UpgradeRun::host_steps() {
  const LogFields fields{{"phase", "host"}};
  std::vector<BeforeHostSteps> before;
  for (const Work& work : m_works) {
    const auto state = m_store.load(work.name());
    before.push_back(
        {work.name(), work.gate.changes_host(), state ? state->owed_restarts : std::vector<std::string>()});
  }
  try {
    m_host->after_switch(m_store, switched_components(m_works));
  } catch (const AfterSwitchFailure& failure) {
    // A restart that failed, a reboot that did not come: handled like a failed health check, so that exit 1
    // leaves the host on the old versions.
    give_up_after_switch(m_context, m_store, *m_host, before, failure, m_options.durability,
                         remount_of(m_works, m_options), m_command, m_options.summary, m_options.datastore);
  }
  run_health_phase(m_context, m_store, *m_host, names_of(m_works), m_options.health, m_options.probes,
                   m_options.durability, remount_of(m_works, m_options), m_command, m_options.summary,
                   m_options.datastore);
}

// Records `outcome` for every component that has a state (or all, with Everyone::yes, creating states): failures
// are recorded where they can be.
void UpgradeRun::record_outcome(const char* outcome, const std::string& message, Everyone everyone) {
  for (Work& work : m_works) {
    if (!work.state && everyone == Everyone::no) {
      continue;
    }
    ComponentState state = work.state ? *work.state : new_state(work.item.spec);
    set_last_result(state, m_command, outcome, work.item.target.text(), message);
    save_failure_record(m_store, state);
  }
}

}  // namespace hoist
