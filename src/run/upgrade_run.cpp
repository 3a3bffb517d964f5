#include "hoist/run/upgrade_run.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "hoist/host/boot_id.hpp"
#include "hoist/host/program_output.hpp"
#include "hoist/host/host_steps.hpp"
#include "hoist/host/interruption.hpp"
#include "hoist/host/writable_mounts.hpp"
#include "hoist/install/installer.hpp"
#include "hoist/model/state_update.hpp"
#include "hoist/run/host_truth.hpp"
#include "hoist/sys/termination.hpp"
#include "hoist/util/error.hpp"
#include "hoist/util/log_fields.hpp"
#include "hoist/util/text.hpp"
#include "hoist/verify/payload_verification.hpp"
#include "hoist/verify/sysext_image.hpp"
#include "health_phase.hpp"
#include "run_lock.hpp"

namespace hoist {

namespace {

constexpr const char* k_command = "upgrade";

// One component through the phases of the run.
struct Work {
  explicit Work(UpgradeItem resolved) : item(std::move(resolved)) {}

  UpgradeItem item;
  std::optional<ComponentState> state;
  std::unique_ptr<Installer> installer;
  std::optional<Version> installed;
  Gate gate{GateDecision::unchanged, ""};
  TransferStats stats;
  bool staged = false;
  bool committed = false;
  /// This run confirmed the reboot an earlier run asked for: its last result says so, not "unchanged".
  bool reboot_settled = false;
  /// Where `installed` came from when hoist's state did not say it (--installed-version-from), for messages.
  std::string installed_from;
  /// The SHA256SUMS the payload was verified against, to check the staged copy of a directory payload with.
  std::optional<Sha256Sums> sums;

  [[nodiscard]] const std::string& name() const { return item.spec.name; }
  [[nodiscard]] std::string installed_text() const { return state ? state->current : std::string(); }
};

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

void decide(Work& work, const Payload* payload_for_integrity, const HostRoot& root, const UpgradeOptions& options) {
  const ComponentSpec& spec = work.item.spec;
  work.installed = work.state ? parse_installed(*work.state, spec.version_scheme) : std::nullopt;
  work.installed_from.clear();
  // hoist's own state is the truth while the host agrees with it. With no state (another installer put the
  // component there) or when the host drifted from it (that installer ran again), the gate asks the host.
  if (spec.installed_version_from.given() &&
      (!work.installed || work.installer->integrity(work.state->current, nullptr) == Integrity::damaged)) {
    auto probed = spec.installed_version_from.node ? std::optional(node_installed(work, options))
                                                   : probe_installed(root, work);
    if (probed) {
      spdlog::info("{}: {} is installed ({})", work.name(), probed->text(), work.installed_from);
      work.installed = std::move(probed);
    }
  }
  Integrity integrity = Integrity::damaged;
  if (work.installed && *work.installed == work.item.target) {
    // A version another installer put there is whole as far as hoist can tell.
    integrity = work.installed_from.empty() ? work.installer->integrity(work.state->current, payload_for_integrity)
                                            : Integrity::intact;
  }
  work.gate = decide_gate(work.name(), work.installed, integrity, work.item.target, spec.allow_downgrade,
                          spec.allow_minor_skip, work.installed_from);
  // A version that a rollback left stays out until the operator asks for it again: a Plan re-applied (any edit
  // changes its hash) would otherwise undo the rollback.
  const QuarantinedVersion* quarantined = work.state ? find_quarantined(*work.state, work.item.target.text()) : nullptr;
  if (quarantined != nullptr && work.gate.changes_host() && spec.allow_quarantined == AllowQuarantined::no) {
    work.gate = Gate{GateDecision::refused,
                     work.name() + ": refusing " + work.item.target.text() + ": it is quarantined since " +
                         quarantined->since + " (" + quarantined->reason +
                         "); pass --allow-quarantined to install it again"};
  }
}

// Records `outcome` for every component that has a state (or all, with
// Everyone::yes, creating states): failures are recorded where they can be.
enum class Everyone { no, yes };
void record_all(const StateStore& store, std::vector<Work>& works, const char* outcome, const std::string& message,
                Everyone everyone) {
  for (Work& work : works) {
    if (!work.state && everyone == Everyone::no) {
      continue;
    }
    ComponentState state = work.state ? *work.state : new_state(work.item.spec);
    set_last_result(state, k_command, outcome, work.item.target.text(), message);
    save_failure_record(store, state);
  }
}

// A transfer's counts as log fields, for the line that reports them.
LogFields count_fields(const TransferStats& s) {
  return LogFields{{"files_added", s.files_added},     {"files_changed", s.files_changed},
                   {"files_removed", s.files_removed}, {"files_unchanged", s.files_unchanged},
                   {"bytes_added", s.bytes_added},     {"bytes_changed", s.bytes_changed},
                   {"bytes_removed", s.bytes_removed}, {"bytes_written", s.bytes_written}};
}

// The component and the phase of the lines logged while it lives.
LogFields phase_fields(const Work& work, const char* phase) {
  return LogFields{{"component", work.name()}, {"version", work.item.target.text()}, {"phase", phase}};
}

std::string describe(const TransferStats& s) {
  return fmt::format("{} added ({}), {} changed ({}), {} removed ({}), {} unchanged", s.files_added,
                     format_bytes(s.bytes_added), s.files_changed, format_bytes(s.bytes_changed), s.files_removed,
                     format_bytes(s.bytes_removed), s.files_unchanged);
}

void print_preview(Work& work, const TransferStats& stats) {
  const auto& spec = work.item.spec;
  std::printf("%s (%s at %s): %s\n", spec.name.c_str(), std::string(to_string(spec.kind)).c_str(),
              spec.destination.c_str(), work.gate.message.c_str());
  std::printf("  add:       %8llu files  %s\n", static_cast<unsigned long long>(stats.files_added),
              format_bytes(stats.bytes_added).c_str());
  std::printf("  change:    %8llu files  %s\n", static_cast<unsigned long long>(stats.files_changed),
              format_bytes(stats.bytes_changed).c_str());
  std::printf("  remove:    %8llu files  %s\n", static_cast<unsigned long long>(stats.files_removed),
              format_bytes(stats.bytes_removed).c_str());
  std::printf("  unchanged: %8llu files\n", static_cast<unsigned long long>(stats.files_unchanged));
}

TransferOptions transfer_options(const Work& work, ProgressReporter* progress, const UpgradeOptions& run) {
  TransferOptions options;
  options.compare = work.item.spec.compare;
  options.max_unpacked_bytes = run.max_unpacked_bytes;
  options.max_unpack_ratio = run.max_unpack_ratio;
  options.threads = run.threads;
  if (progress != nullptr) {
    options.on_progress = [progress](const TransferStats& stats) { progress->update(stats); };
  }
  if (work.sums) {
    options.check_staged = [&work](int staging_dir) {
      verify_staged_tree(*work.sums, work.item.spec, work.item.payload, staging_dir);
    };
  }
  return options;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Undoes the switches made so far (newest first) and removes what was staged:
// the host goes back to the old versions. Errors here are logged: the error
// that started it is what the run reports.
void undo(std::vector<Work>& works) {
  for (auto it = works.rbegin(); it != works.rend(); ++it) {
    const LogFields fields = phase_fields(*it, "undo");
    try {
      if (it->committed) {
        it->installer->undo_commit();
        spdlog::info("{}: switched back to {}", it->name(),
                     it->installed_text().empty() ? "nothing" : it->installed_text());
      }
      if (it->staged) {
        it->installer->discard_staged();
      }
    } catch (const std::exception& e) {
      spdlog::error("{}: could not undo: {}", it->name(), e.what());
    }
  }
}

void collect_garbage(const StateStore& store, Work& work, ComponentState& state) {
  for (const auto& version : versions_to_collect(state, work.item.spec.keep)) {
    try {
      work.installer->remove_version(version);
      forget_version(state, version);
      spdlog::info("{}: removed version {} (--keep {})", work.name(), version, work.item.spec.keep);
    } catch (const std::exception& e) {
      spdlog::warn("{}: could not remove version {}: {}", work.name(), version, e.what());
    }
  }
  store.save(state);
  std::string kept;
  for (const auto& record : state.versions) {
    kept += (kept.empty() ? "" : ", ") + record.version;
  }
  spdlog::info("{}: kept versions: {}", work.name(), kept);
}

// A run with nothing to install still finishes what a killed run left: its leftovers, and the versions beyond
// --keep that it switched away from and never collected. Best effort, with no remount: a failure is a warning,
// and the next run that writes tries again.
void tidy_up(const StateStore& store, Work& work) {
  ComponentState& state = *work.state;
  try {
    const bool changed = work.installer->clean_leftovers(&state);
    if (!versions_to_collect(state, work.item.spec.keep).empty()) {
      collect_garbage(store, work, state);
    } else if (changed) {
      store.save(state);
    }
  } catch (const std::exception& e) {
    spdlog::warn("{}: could not remove what an interrupted run left: {}", work.name(), e.what());
  }
}

// Host integration: the components as HostSteps::after_switch() takes them.
// The checks a component's switch makes owed: that a sysext is merged (first: the others may need what it brings),
// the run's, then its own.
std::vector<HealthCheck> checks_of(const Work& work, const UpgradeOptions& options) {
  std::vector<HealthCheck> checks;
  if (work.item.spec.kind == ComponentKind::sysext) {
    checks.push_back(sysext_merge_check(work.item.spec.destination));
  }
  checks.insert(checks.end(), options.health.checks.begin(), options.health.checks.end());
  checks.insert(checks.end(), work.item.health_checks.begin(), work.item.health_checks.end());
  return checks;
}

// Whether a switch back may need mounts made writable: --remount, or a component's manifest `remount`.
Remount remount_of(const std::vector<Work>& works, const UpgradeOptions& options) {
  const bool any = options.host.remount == Remount::yes ||
                   std::any_of(works.begin(), works.end(),
                               [](const Work& work) { return work.item.spec.remount == Remount::yes; });
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

// Host integration: what --remount (every component) or a manifest's
// "remount" (that component) makes writable for the run.
std::vector<std::string> remount_paths(const std::vector<Work>& works, const StateStore& store, Remount all) {
  std::vector<std::string> paths;
  for (const Work& work : works) {
    const ComponentSpec& spec = work.item.spec;
    if (all == Remount::yes || spec.remount == Remount::yes) {
      const auto written = paths_written(spec.kind, spec.destination, store.component_dir(spec.name));
      paths.insert(paths.end(), written.begin(), written.end());
    }
  }
  return paths;
}

}  // namespace

UpgradeItem resolve_item(ComponentSpec spec, const VersionSources& sources) {
  validate_spec(spec);
  Version target = agree_on_version(spec.version_scheme, sources, spec.name);
  Payload payload = Payload::open(spec.source);
  const PayloadType type = payload.type();
  if (spec.kind == ComponentKind::file && type == PayloadType::directory) {
    throw UsageError("the file kind needs a file as its source; '" + spec.source.string() + "' is a directory");
  }
  if (spec.kind == ComponentKind::tree && type == PayloadType::file && !payload.unsupported_compression().empty()) {
    // libarchive would run the decompressor found on PATH: hoist never runs a program for a payload.
    throw UsageError("the tree kind needs a directory or an archive as its source; " + in_quotes(spec.source.string()) +
                     " is compressed with " + payload.unsupported_compression() +
                     ", which hoist does not read (it runs no external decompressor)");
  }
  if (spec.kind == ComponentKind::tree && type == PayloadType::file) {
    // A compressed archive damaged before its first entry is not "a file": say what is wrong with it.
    if (const std::optional<std::string> problem = payload.compression_problem()) {
      throw Error(ExitCode::verification, "refusing archive " + in_quotes(spec.source.string()) + ": " + *problem);
    }
    throw UsageError("the tree kind needs a directory or an archive as its source; '" + spec.source.string() +
                     "' is neither");
  }
  if (spec.kind == ComponentKind::sync && type != PayloadType::directory) {
    throw UsageError("the sync kind needs a directory as its source; '" + spec.source.string() + "' is not one");
  }
  if (spec.kind == ComponentKind::sysext) {
    // A squashfs/erofs image or a directory, and a destination named to match.
    sysext_image_name(spec.destination, detect_sysext_image(payload));
  }
  std::vector<HealthCheck> checks;
  for (const std::string& text : spec.health_checks) {
    checks.push_back(parse_health_check(text));
  }
  return UpgradeItem{std::move(spec), std::move(target), std::move(payload), std::move(checks)};
}

namespace {

bool is_inside(const std::string& path, const std::string& dir) {
  return path.size() > dir.size() && path.starts_with(dir) && (dir == "/" || path[dir.size()] == '/');
}

}  // namespace

namespace {

// The destination as the host resolves it. A file or sysext destination is a link that hoist itself points at
// the installed version: its own target is not where the component lives, its parent directory's is.
std::string resolved_destination(const HostRoot& root, const ComponentSpec& spec) {
  const Follow follow = spec.kind == ComponentKind::file || spec.kind == ComponentKind::sysext ? Follow::no : Follow::yes;
  auto resolved = root.resolve(normal_destination(spec.destination), follow);
  if (!resolved) {
    throw UsageError("cannot use the destination " + in_quotes(spec.destination) + " of component '" + spec.name +
                     "': " + resolved.error().message);
  }
  if (*resolved == "/") {
    throw UsageError("destination " + in_quotes(spec.destination) + " of component '" + spec.name +
                     "' resolves to the host's root '/' through a host symlink");
  }
  return *resolved;
}

// How a destination is named in a refusal: as given, and where the host's symlinks take it when that differs.
std::string shown(const UpgradeItem& item, const std::string& resolved) {
  const std::string& given = item.spec.destination;
  return normal_destination(given) == resolved ? "'" + given + "'" : "'" + given + "' (on the host: '" + resolved + "')";
}

}  // namespace

// Components of one run must not share or nest destinations: a sync of /usr/local/bin
// would delete the link that a file component put at /usr/local/bin/k3s. Compared as
// the host resolves them: with /srv/b -> /opt/a, /srv/b/x is inside /opt/a.
void check_distinct(const std::vector<UpgradeItem>& items, const HostRoot& root) {
  std::set<std::string> names;
  std::vector<std::pair<std::string, const UpgradeItem*>> destinations;
  for (const auto& item : items) {
    if (!names.insert(item.spec.name).second) {
      throw UsageError("component '" + item.spec.name + "' is given twice");
    }
    const std::string resolved = resolved_destination(root, item.spec);
    for (const auto& [other, other_item] : destinations) {
      if (other == resolved) {
        const std::string normal = normal_destination(item.spec.destination);
        throw UsageError("components '" + other_item->spec.name + "' and '" + item.spec.name +
                         "' have the same destination " +
                         (normal == normal_destination(other_item->spec.destination)
                              ? shown(item, resolved)
                              : shown(*other_item, other) + " and " + shown(item, resolved)));
      }
      const bool inner_is_new = is_inside(resolved, other);
      if (inner_is_new || is_inside(other, resolved)) {
        const UpgradeItem& inner = inner_is_new ? item : *other_item;
        const UpgradeItem& outer = inner_is_new ? *other_item : item;
        throw UsageError("components '" + inner.spec.name + "' and '" + outer.spec.name + "' overlap: " +
                         shown(inner, inner_is_new ? resolved : other) + " is inside " +
                         shown(outer, inner_is_new ? other : resolved));
      }
    }
    destinations.emplace_back(resolved, &item);
  }
}

ExitCode run_upgrade(const Context& context, std::vector<UpgradeItem> items, const UpgradeOptions& options) {
  const HostRoot& root = context.root();
  check_distinct(items, root);
  const StateStore store(root, context.options.state_dir);
  const bool dry_run = options.dry_run == DryRun::yes;
  // SIGTERM/SIGINT stop the run at its safe points (host integration).
  termination::install();

  // A dry run takes no lock: it writes nothing (not even the lock file), and
  // every file it reads is replaced atomically by the runs that write them.
  std::optional<Lock> lock;
  if (!dry_run) {
    lock.emplace(take_run_lock(context));
  }
  // Host integration (reboot handshake, remount, restarts, reboot); declared
  // after the lock so that its remounts are put back before the lock is released.
  HostSteps host(context, k_command, options.host, options.dry_run);

  std::vector<Work> works;
  for (auto& item : items) {
    Work work(std::move(item));
    work.state = store.load(work.item.spec.name);
    if (work.state) {
      check_identity(*work.state, work.item.spec);
      work.reboot_settled =
          host.settle_pending_reboot(store, *work.state, work.item.target.text()) == Handshake::completed;
    }
    work.installer = make_installer(
        root, InstallTarget{work.item.spec.name, work.item.spec.kind, work.item.spec.destination, store.state_dir()},
        options.durability);
    // The host's commit points are the truth when a killed run left the state behind them; the gate must
    // start from what is installed. A dry run only looks.
    if (work.state) {
      const bool pending_rollback = work.state->rollback.has_value();
      const std::string recorded = work.state->current;
      if (agree_with_host(*work.installer, *work.state) && !dry_run) {
        store.save(*work.state);
      }
      // A switch back (or rollback) that a killed run made and did not record is finished as `hoist rollback`
      // finishes one: with its restarts, now, since the gate may refuse the run (the version it left is
      // quarantined) and a refused run does nothing more.
      if (work.state->current != recorded && pending_rollback && !dry_run) {
        const LogFields host_phase{{"phase", "host"}};
        host.after_switch(store, {SwitchedComponent{work.name(), work.item.spec.kind, work.state->current, true}});
        work.state = store.load(work.name());
      }
    }
    if (work.state) {
      work.installer->use_selinux_label(work.state->selinux_label);
    }
    works.push_back(std::move(work));
  }

  // One gate for the run: a refusal of any component refuses all of them.
  for (Work& work : works) {
    const LogFields fields = phase_fields(work, "gate");
    decide(work, &work.item.payload, root, options);
    spdlog::info("gate: {}", work.gate.message);
    if (options.summary != nullptr) {
      options.summary->lines.push_back(work.gate.message);
    }
  }
  for (const Work& work : works) {
    if (work.gate.decision == GateDecision::refused) {
      if (!dry_run) {
        record_all(store, works, outcome::k_refused, work.gate.message, Everyone::no);
      }
      throw Error(ExitCode::refused, work.gate.message);
    }
  }
  const bool anything = std::any_of(works.begin(), works.end(), [](const Work& w) { return w.gate.changes_host(); });
  if (!anything) {
    spdlog::info("nothing to do");
    if (dry_run) {
      for (Work& work : works) {
        std::printf("%s: %s\n", work.name().c_str(), work.gate.message.c_str());
      }
    } else {
      for (Work& work : works) {
        if (work.state) {
          tidy_up(store, work);
        }
        // Without a state, hoist never installed it: the host stays exactly as another installer left it.
        // With restarts still owed, the result stays what it was until after_switch() does them.
        if (work.state && !work.reboot_settled && work.state->owed_restarts.empty()) {
          set_last_result(*work.state, k_command, outcome::k_unchanged, work.item.target.text());
          store.save(*work.state);
        }
      }
      const LogFields fields{{"phase", "host"}};
      host.after_switch(store, switched_components(works));  // --reboot always
      // What an earlier run left owed: its checks were cut short (SIGTERM, a kill) or waited for this boot.
      run_health_phase(context, store, host, names_of(works), options.health, options.probes, options.durability,
                       remount_of(works, options), k_command, options.summary);
    }
    return ExitCode::ok;
  }

  // Verification reads only the payloads: nothing on the host has changed yet.
  try {
    for (Work& work : works) {
      const LogFields fields = phase_fields(work, "verify");
      if (work.gate.changes_host() && !work.item.spec.sha256sums.empty()) {
        work.sums = verify_payload(work.item.spec, work.item.payload);
        spdlog::info("{}: verified {} against {}{}", work.name(), work.item.payload.path().string(),
                     work.item.spec.sha256sums.string(), work.item.spec.public_key.empty() ? "" : " (signed)");
      }
      if (work.gate.changes_host() && work.item.spec.kind == ComponentKind::sysext) {
        verify_sysext_payload(root, work.item.payload, work.item.spec.destination);
        spdlog::info("{}: the extension-release of {} matches the host's os-release", work.name(),
                     work.item.payload.path().string());
      }
    }
  } catch (const Error& e) {
    if (!dry_run) {
      record_all(store, works, outcome::k_failed, e.what(), Everyone::no);
    }
    throw;
  }

  if (dry_run) {
    for (Work& work : works) {
      if (!work.gate.changes_host()) {
        std::printf("%s: %s\n", work.name().c_str(), work.gate.message.c_str());
        continue;
      }
      print_preview(work, work.installer->preview(work.item.payload, work.installed_text(),
                                                  transfer_options(work, nullptr, options)));
    }
    for (Work& work : works) {
      const auto checks = checks_of(work, options);
      if (work.gate.changes_host() && !checks.empty()) {
        std::printf("%s: then health checks: %s (units up %llds, at most %llds)\n", work.name().c_str(),
                    describe(checks).c_str(), static_cast<long long>(options.health.settle.count()),
                    static_cast<long long>(options.health.timeout.count()));
      }
    }
    std::printf("dry run: nothing was changed\n");
    return ExitCode::ok;
  }

  try {
    host.make_writable(remount_paths(works, store, options.host.remount));
    // What killed runs left goes first. A sync's cleanup may finish a rollback
    // and so change what is installed: the gate is asked again.
    for (Work& work : works) {
      if (work.installer->clean_leftovers(work.state ? &*work.state : nullptr)) {
        store.save(*work.state);
        decide(work, &work.item.payload, root, options);
        if (work.gate.decision == GateDecision::refused) {
          throw Error(ExitCode::refused, work.gate.message);
        }
      }
    }
    // Stage everything before switching anything: staging is where a run
    // fails (disk full, a bad archive), and then nothing has switched.
    for (Work& work : works) {
      if (!work.gate.changes_host()) {
        continue;
      }
      throw_if_interrupted("staging " + work.name());
      const LogFields fields = phase_fields(work, "stage");
      const auto start = std::chrono::steady_clock::now();
      ProgressReporter progress(work.name(), options.progress);
      work.staged = true;
      work.stats =
          work.installer->stage(work.item.payload, work.item.target.text(), transfer_options(work, &progress, options));
      progress.finish();
      if (work.item.spec.kind != ComponentKind::sync) {
        const LogFields counts = count_fields(work.stats);
        spdlog::info("{}: staged {} in {:.2f} s: {}, {} written", work.name(), work.item.target.text(),
                     seconds_since(start), describe(work.stats), format_bytes(work.stats.bytes_written));
      }
    }
    for (Work& work : works) {
      if (!work.gate.changes_host()) {
        continue;
      }
      throw_if_interrupted("switching " + work.name());
      const LogFields fields = phase_fields(work, "switch");
      const auto start = std::chrono::steady_clock::now();
      if (work.state) {
        // The intent first: a run killed between the switch and its record leaves the next run, which finds the
        // host switched, what the switch owes. (A first install has no state to carry it yet.)
        work.state->switching = SwitchIntent{work.item.target.text(), now_rfc3339(),
                                             host.restarts_owed_by(work.item.spec.kind),
                                             specs_of(checks_of(work, options))};
        store.save(*work.state);
      }
      ProgressReporter progress(work.name(), options.progress);
      work.committed = true;
      const TransferStats synced =
          work.installer->commit(work.item.payload, work.item.target.text(), work.installed_text(),
                                 transfer_options(work, &progress, options));
      progress.finish();
      if (work.item.spec.kind == ComponentKind::sync) {
        work.stats = synced;
        const LogFields counts = count_fields(synced);
        spdlog::info("{}: synced {} into {} in {:.2f} s: {}, {} written", work.name(), work.item.target.text(),
                     root.display(work.item.spec.destination), seconds_since(start), describe(synced),
                     format_bytes(synced.bytes_written));
      } else {
        spdlog::info("{}: switched {} to {}", work.name(), root.display(work.item.spec.destination),
                     work.item.target.text());
      }
    }
  } catch (const std::exception& e) {
    undo(works);
    // Bad input (an archive entry refused while staging) leaves a first install
    // no state, as a failed verification does: undo() took back what it made.
    const auto* error = dynamic_cast<const Error*>(&e);
    const bool bad_input =
        error != nullptr && (error->code() == ExitCode::verification || error->code() == ExitCode::usage);
    record_all(store, works, outcome::k_failed, e.what(), bad_input ? Everyone::no : Everyone::yes);
    throw;
  }

  const std::string boot_id = read_boot_id(root);
  for (Work& work : works) {
    if (!work.state && !work.gate.changes_host()) {
      continue;  // at the target through another installer: nothing of hoist's to record
    }
    const LogFields fields = phase_fields(work, "record");
    ComponentState state = work.state ? *work.state : new_state(work.item.spec);
    if (work.gate.changes_host()) {
      record_switch(state, work.item.target.text(), work.installer->adopted_version());
      if (std::string label = work.installer->selinux_label(); !label.empty()) {
        state.selinux_label = std::move(label);
      }
      // Owed with the switch, in the same save: a run killed before its restarts leaves them to the next.
      owe_restarts(state, host.restarts_owed_by(work.item.spec.kind));
      // Owed with the switch too: a run killed before they pass leaves them to the next (never counted as passed).
      state.owed_health_checks = specs_of(checks_of(work, options));
      set_last_result(state, k_command, outcome::k_succeeded, work.item.target.text());
    } else if (!work.reboot_settled && state.owed_restarts.empty()) {
      set_last_result(state, k_command, outcome::k_unchanged, work.item.target.text());
    }
    state.boot_id = boot_id;
    store.save(state);
    if (work.gate.changes_host()) {
      work.installer->finish();
      collect_garbage(store, work, state);
    }
  }
  const LogFields fields{{"phase", "host"}};
  host.after_switch(store, switched_components(works));
  run_health_phase(context, store, host, names_of(works), options.health, options.probes, options.durability,
                   remount_of(works, options), k_command, options.summary);
  return ExitCode::ok;
}

}  // namespace hoist
