#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>

#include "commands.hpp"
#include "etcd_count.hpp"
#include "help_format.hpp"
#include "hoist/kube/own_node.hpp"
#include "hoist/kube/plan_progress.hpp"
#include "hoist/model/context.hpp"
#include "hoist/model/manifest.hpp"
#include "hoist/run/progress_reporter.hpp"
#include "hoist/run/upgrade_run.hpp"
#include "hoist/util/error.hpp"
#include "hoist/util/text.hpp"
#include "host_action_options.hpp"
#include "logging.hpp"
#include "node_ready.hpp"
#include "plan_wait.hpp"

namespace hoist::cli {

namespace {

// The flags that describe one component; --manifest replaces all of them.
constexpr const char* k_component_flags[] = {"--component",
                                             "--kind",
                                             "--source",
                                             "--destination",
                                             "--version-scheme",
                                             "--allow-downgrade",
                                             "--keep",
                                             "--checksum",
                                             "--sha256sums",
                                             "--sha256sums-entry",
                                             "--signature",
                                             "--installed-version-from",
                                             "--allow-minor-skip"};

// gzip's best is about 1000:1 and zstd's far more on zeros; real payloads (binaries, images, configs)
// rarely pass 10:1.
constexpr uint64_t k_default_unpack_ratio = 200;

// One GET of the Node: the gate waits for it, so a silent API server must not hold up the run for long.
constexpr std::chrono::seconds k_node_timeout{15};

// The dry run's report on stdout: per component, what its switch would change (or the gate's line when it changes
// nothing), then the health checks the switches would owe. With nothing to change, the gate's lines alone.
// What the dry run says of a version `hoist stage` left: what the switch would do with it.
void print_staged(const ComponentPreview& component) {
  if (component.staged.empty()) {
    return;
  }
  const char* what = !component.staged_is_target ? "for another version: the upgrade removes it"
                     : component.staged_holds    ? "the switch takes it as it is, nothing to stage"
                     : component.changes         ? "it does not hold the payload: it would be staged again"
                                                 : "not switched to";
  std::printf("  staged:    %s at %s (hoist stage): %s\n", component.staged.c_str(), component.staged_at.c_str(), what);
}

void print_preview(const UpgradePreview& preview) {
  for (const ComponentPreview& component : preview.components) {
    if (!component.changes) {
      std::printf("%s: %s\n", component.name.c_str(), component.gate.c_str());
      print_staged(component);
      continue;
    }
    const TransferStats& stats = *component.changes;
    std::printf("%s (%s at %s): %s\n", component.name.c_str(), std::string(to_string(component.kind)).c_str(),
                component.destination.c_str(), component.gate.c_str());
    std::printf("  add:       %8llu files  %s\n", static_cast<unsigned long long>(stats.files_added),
                format_bytes(stats.bytes_added).c_str());
    std::printf("  change:    %8llu files  %s\n", static_cast<unsigned long long>(stats.files_changed),
                format_bytes(stats.bytes_changed).c_str());
    std::printf("  remove:    %8llu files  %s\n", static_cast<unsigned long long>(stats.files_removed),
                format_bytes(stats.bytes_removed).c_str());
    std::printf("  unchanged: %8llu files\n", static_cast<unsigned long long>(stats.files_unchanged));
    print_staged(component);
  }
  if (!preview.changes_host()) {
    return;
  }
  for (const ComponentPreview& component : preview.components) {
    if (component.changes && !component.checks.empty()) {
      std::printf("%s: then health checks: %s (units up %llds, at most %llds)\n", component.name.c_str(),
                  describe(component.checks).c_str(), static_cast<long long>(preview.health_settle.count()),
                  static_cast<long long>(preview.health_timeout.count()));
    }
  }
  std::printf("dry run: nothing was changed\n");
}

// `hoist upgrade` and `hoist stage` take the same components, from the same flags or manifest, so that a Plan's
// prepare step (stage) and its upgrade step decide alike: one class, in two modes.
class UpgradeCommand final : public Command {
 public:
  UpgradeCommand(const LogOptions& log, RunMode mode) : m_log(log), m_mode(mode) {}

  CLI::App* add_to(CLI::App& app) override {
    m_app = m_mode == RunMode::stage
                ? app.add_subcommand("stage",
                                     "decide, verify and stage a new version beside the current one without switching "
                                     "to it (a Plan's prepare step, before the drain); the upgrade then switches")
                : app.add_subcommand("upgrade", "verify, stage and switch to a new version of one or more components");
    m_app->add_option("--component", m_spec.name, "the component's name ([a-z0-9][a-z0-9._-]*)");
    m_app->add_option("--kind", m_kind, "how the component lives on the host")->option_text("tree|file|sysext|sync");
    m_app->add_option("--source", m_spec.source, "the payload: a directory, a file or an archive (container path)");
    m_app->add_option("--destination", m_spec.destination, "where it goes on the host (host path)");
    m_app->add_option("--version", m_version, "the version to install (default: SYSTEM_UPGRADE_PLAN_LATEST_VERSION)");
    m_app->add_option("--version-scheme", m_scheme, "how versions are spelled and ordered")
        ->option_text("semver|k3s|systemd (default: semver)");
    m_app->add_flag("--allow-downgrade", m_allow_downgrade, "install an older version than the current one");
    m_app
        ->add_option("--installed-version-from", m_installed_version_from,
                     "with no state of hoist's, or one the host drifted from, ask the file at the destination (run "
                     "with ARGS in the host root), or the Node this Job runs on (its kubeletVersion), what is "
                     "installed")
        ->option_text("exec:ARGS|node");
    m_app->add_flag("--allow-quarantined", m_allow_quarantined,
                    "install a version that a rollback left (with --manifest too)");
    m_app->add_flag("--allow-minor-skip", m_allow_minor_skip,
                    "k3s scheme: allow an upgrade that skips a Kubernetes minor version");
    m_app
        ->add_option("--keep", m_spec.keep,
                     "versions kept on the host that are not quarantined (quarantined ones go first; never the "
                     "current, the previous or the one the last rollback landed on)")
        ->check(whole_number<unsigned>(1))
        ->default_str(std::to_string(k_default_keep));
    m_app->add_flag("--checksum", m_checksum,
                    "read both sides of every comparison in full, trusting neither the content index nor SHA256SUMS "
                    "(content decides either way; this is only slower)");
    m_app->add_option("--sha256sums", m_spec.sha256sums, "verify the payload against this SHA256SUMS file");
    m_app
        ->add_option("--sha256sums-entry", m_spec.sha256sums_entry,
                     "the name SHA256SUMS lists a file or archive payload under, when not its file name (a "
                     "release's rke2.linux-amd64 for an image's /opt/rke2)")
        ->option_text("NAME");
    m_app->add_option("--signature", m_spec.signature, "a detached signature over the SHA256SUMS file");
    m_app->add_option("--public-key", m_trust.public_key,
                      "the PEM public key (Ed25519 or ECDSA P-256) to check it with; with --manifest, it replaces "
                      "every component's key and every component must be signed");
    m_app->add_flag("--require-signature", m_trust.require_signature,
                    "refuse (exit 5) any component without a signed SHA256SUMS and a key");
    m_app->add_option("--manifest", m_manifest, "upgrade the components a payload manifest (JSON) lists");
    if (m_mode == RunMode::upgrade) {
      m_app->add_flag("--dry-run", m_dry_run, "print what would change; change nothing");
    }
    m_app
        ->add_option("--max-unpacked-bytes", m_max_unpacked_bytes,
                     "refuse an archive payload that unpacks to more than this many bytes (0: no limit)")
        ->check(whole_number<uint64_t>(0))
        ->default_str("0");
    m_app
        ->add_option("--max-unpack-ratio", m_max_unpack_ratio,
                     "refuse an archive payload that unpacks to more than this multiple of its size, once past "
                     "16 MiB (a decompression bomb; 0: no limit)")
        ->check(whole_number<uint64_t>(0))
        ->default_str(std::to_string(k_default_unpack_ratio));
    m_app
        ->add_option("--threads", m_threads,
                     "the worker threads of the transfer and of the payload's verification (default: twice the cores, "
                     "at most 16)")
        ->check(whole_number(1, 64));
    if (m_mode == RunMode::stage) {
      add_stage_options();
      add_datastore_options();
      m_app->footer(std::string(k_stage_examples) + "\n" + k_exit_status_help + "\n" + k_environment_help);
      return m_app;
    }
    m_host.add_to(*m_app);  // --remount, --restart, --reboot…: with --manifest too
    m_app->add_option("--health-check", m_health_checks,
                      "after the switch and its restarts (or the reboot) this must pass, or hoist switches back: "
                      "unit:NAME, exec:PATH [ARGS...], http:URL (loopback), node-ready (repeatable)");
    m_app->add_option("--health-settle", m_health_settle, "seconds a checked unit must stay up without restarting")
        ->check(whole_number<unsigned>(0))
        ->default_str(std::to_string(k_default_health_settle.count()));
    m_app->add_option("--health-timeout", m_health_timeout, "seconds the checks may take to pass, in all")
        ->check(whole_number<unsigned>(1))
        ->default_str(std::to_string(k_default_health_timeout.count()));
    add_datastore_options();
    m_app->add_option("--datastore-timeout", m_datastore_timeout, "seconds a snapshot or a restore may take, each")
        ->check(whole_number<unsigned>(1))
        ->capture_default_str();
    m_app->footer(std::string(k_upgrade_examples) + "\n" + k_exit_status_help + "\n" + k_environment_help);
    return m_app;
  }

  // What a k3s or RKE2 server's upgrade checks and keeps of its datastore: stage checks it as the upgrade will.
  void add_datastore_options() {
    m_app
        ->add_option("--datastore-snapshot", m_datastore_snapshot,
                     "a k3s or RKE2 server's datastore: take a snapshot before the switch (SQLite copied with the "
                     "server stopped, etcd through etcd-snapshot save), or skip it (docs/datastore.md)")
        ->check(one_of({"take", "skip"}))
        ->capture_default_str();
    m_app
        ->add_option("--etcd-health", m_etcd_health,
                     "a k3s or RKE2 server with embedded etcd: check that every member is healthy before anything "
                     "changes, and refuse if one is not, or skip the check (docs/datastore.md)")
        ->check(one_of({"check", "skip"}))
        ->capture_default_str();
  }

  ExitCode run(Context& context) override {
    const bool stage = m_mode == RunMode::stage;
    std::vector<UpgradeItem> items;
    const std::string& env_version = context.suc.plan_latest_version;
    if (!m_manifest.empty()) {
      for (const char* flag : k_component_flags) {
        if (m_app->count(flag) > 0) {
          throw UsageError(std::string(flag) + " cannot be combined with --manifest: the manifest gives it");
        }
      }
      const Manifest manifest = load_manifest(m_manifest);
      for (size_t j = 0; j < manifest.health_checks.size(); ++j) {
        m_health.checks.push_back(
            manifest_check(manifest, manifest.health_checks[j], "$.health_checks[" + std::to_string(j) + "]"));
      }
      for (size_t i = 0; i < manifest.components.size(); ++i) {
        const ComponentSpec& spec = manifest.components[i];
        for (size_t j = 0; j < spec.health_checks.size(); ++j) {
          (void)manifest_check(manifest, spec.health_checks[j],
                               "$.components[" + std::to_string(i) + "].health_checks[" + std::to_string(j) + "]");
        }
        if (spec.installed_version_from.node && m_node_needed_by.empty()) {
          m_node_needed_by =
              "manifest '" + m_manifest + "': $.components[" + std::to_string(i) + "].installed_version_from 'node'";
        }
        ComponentSpec trusted = spec;
        trusted.allow_quarantined = m_allow_quarantined ? AllowQuarantined::yes : AllowQuarantined::no;
        apply_trust_policy(trusted, m_trust, "manifest '" + m_manifest + "': $.components[" + std::to_string(i) + "]");
        const VersionSources sources = version_sources(trusted, m_version, env_version);
        items.push_back(resolve_item(std::move(trusted), sources));
      }
    } else {
      std::string missing;
      for (const char* flag : {"--component", "--kind", "--source", "--destination"}) {
        if (m_app->count(flag) == 0) {
          missing += (missing.empty() ? "" : ", ") + std::string(flag);
        }
      }
      if (!missing.empty()) {
        throw UsageError(std::string(stage ? "stage" : "upgrade") + " needs " + missing + " (or --manifest)");
      }
      m_spec.kind = parse_component_kind(m_kind);
      m_spec.version_scheme = parse_version_scheme(m_scheme);
      m_spec.allow_downgrade = m_allow_downgrade ? AllowDowngrade::yes : AllowDowngrade::no;
      m_spec.allow_minor_skip = m_allow_minor_skip ? AllowMinorSkip::yes : AllowMinorSkip::no;
      m_spec.allow_quarantined = m_allow_quarantined ? AllowQuarantined::yes : AllowQuarantined::no;
      if (m_app->count("--installed-version-from") > 0) {
        m_spec.installed_version_from = parse_installed_version_from(m_installed_version_from);
        if (m_spec.installed_version_from.node) {
          m_node_needed_by = "--installed-version-from node";
        }
      }
      m_spec.compare = m_checksum ? Compare::checksum : Compare::content;
      apply_trust_policy(m_spec, m_trust, "");
      items.push_back(resolve_item(m_spec, version_sources(m_spec, m_version, env_version)));
    }
    for (const auto& text : m_health_checks) {
      m_health.checks.push_back(parse_health_check(text));
    }
    m_health.settle = std::chrono::seconds(m_health_settle);
    m_health.timeout = std::chrono::seconds(m_health_timeout);
    UpgradeOptions options;
    options.health = m_health;
    options.probes.root = &context.root();
    // `stage` owes no checks: the switch does.
    const bool wants_node = !stage && (std::any_of(items.begin(), items.end(),
                                                   [&](const UpgradeItem& item) {
                                                     return std::any_of(item.health_checks.begin(),
                                                                        item.health_checks.end(), is_node_ready);
                                                   }) ||
                                       std::any_of(m_health.checks.begin(), m_health.checks.end(), is_node_ready));
    // Made here, before the lock and the gate: outside a Job the Node could never be read. One for both uses.
    std::shared_ptr<const OwnNode> own_node;
    if (wants_node) {
      own_node = std::make_shared<const OwnNode>(context.suc, "--health-check node-ready");
      options.probes.node_ready = node_ready_probe(own_node);
    }
    if (!m_node_needed_by.empty()) {
      if (!own_node) {
        own_node = std::make_shared<const OwnNode>(context.suc, m_node_needed_by);
      }
      options.node_version_source = "the Node " + escaped(own_node->name()) + "'s kubeletVersion";
      options.node_kubelet_version = [own_node] {
        return NodeView::from_json(own_node->read(std::chrono::steady_clock::now() + k_node_timeout)).kubelet_version;
      };
    }
    options.progress = progress_style_for_stderr(m_log.format);
    options.durability = default_durability();
    if (stage) {
      options.host.remount = m_stage_remount ? Remount::yes : Remount::no;
      for (const auto& unit : m_stage_restart_units) {
        options.host.restart_units.push_back(unit_name(unit));
      }
    } else {
      options.host = m_host.actions(context);
    }
    options.max_unpacked_bytes = m_max_unpacked_bytes;
    options.max_unpack_ratio = static_cast<double>(m_max_unpack_ratio);
    options.threads = m_threads;
    options.summary = &m_summary;
    options.datastore.policy = parse_datastore_snapshot_policy(m_datastore_snapshot);
    options.datastore.timeout = std::chrono::seconds(m_datastore_timeout);
    options.datastore.etcd_members = etcd_member_counter(context.root());
    if (m_etcd_health == "check") {
      options.datastore.etcd_health = etcd_health_checker(context.root());
    }
    if (m_dry_run) {
      print_preview(preview_upgrade(context, std::move(items), options));
      return ExitCode::ok;
    }
    if (stage) {
      // The Plan waited for first (an agent's servers), then the gate and the staging: one prepare container
      // does both, in this order, before SUC cordons the node.
      if (!m_wait.plan.empty()) {
        m_waited = wait_for_plan_of_job(context, m_wait);
      }
      return run_stage(context, std::move(items), options);
    }
    return run_upgrade(context, std::move(items), options);
  }

  [[nodiscard]] bool reports_outcome() const override { return !m_dry_run; }
  [[nodiscard]] std::vector<LogField> log_fields(const Context& context) const override {
    std::vector<LogField> fields;
    if (!m_spec.name.empty()) {
      fields.emplace_back("component", m_spec.name);
    }
    // --version, else the version SUC gives (munged: '+' spelled '-'); the phases' lines carry the one resolved.
    if (const std::string& version = m_version.empty() ? context.suc.plan_latest_version : m_version;
        !version.empty()) {
      fields.emplace_back("version", version);
    }
    return fields;
  }
  [[nodiscard]] std::vector<std::string> summary() const override {
    std::vector<std::string> lines;
    if (!m_waited.empty()) {
      lines.push_back(m_waited);
    }
    lines.insert(lines.end(), m_summary.lines.begin(), m_summary.lines.end());
    return lines;
  }
  [[nodiscard]] std::vector<std::string> rolled_back() const override { return m_summary.rolled_back; }
  [[nodiscard]] bool changed_nothing() const override { return m_summary.changed_nothing; }

 private:
  static bool is_node_ready(const HealthCheck& check) { return check.kind == HealthCheck::Kind::node_ready; }

  // What `stage` takes beyond the components: the mounts to make writable, and the Plan to wait for first.
  void add_stage_options() {
    m_app
        ->add_option("--restart", m_stage_restart_units,
                     "a unit the upgrade step restarts (its --restart; repeatable): stage restarts nothing, but a "
                     "k3s or RKE2 server among them has its datastore checked as the upgrade checks it")
        ->option_text("UNIT");
    m_app->add_flag("--remount", m_stage_remount,
                    "make the mounts written to writable for the staging (in the host's mount namespace: the prepare "
                    "container must then be privileged), then read-only again");
    m_app->add_option("--wait-for-plan", m_wait.plan,
                      "first wait until this Plan is complete, as 'hoist prepare PLAN' does (an agent Plan's servers)");
    m_app->add_option("-n,--namespace", m_wait.namespace_,
                      "the namespace of --wait-for-plan's Plan (default: the service account's)");
    m_app
        ->add_option("--wait-timeout", m_wait.timeout_seconds,
                     "seconds to wait for --wait-for-plan's Plan before failing: the Plan's jobActiveDeadlineSecs less "
                     "the staging, the drain and the upgrade")
        ->check(number_of_seconds(Zero::refused))
        ->capture_default_str();
    m_app->add_option("--node-version", m_wait.node_version,
                      "with --wait-for-plan: also require this kubelet version on every node that Plan selects");
    m_app->add_option("--kubeconfig", m_wait.kubeconfig,
                      "with --wait-for-plan, outside the cluster: a kubeconfig (default: as 'hoist prepare')");
  }

  // A manifest's check, parsed; an error names the manifest and the check's place in it.
  [[nodiscard]] HealthCheck manifest_check(const Manifest& manifest, const std::string& text,
                                           const std::string& where) const {
    try {
      return parse_health_check(text);
    } catch (const UsageError& e) {
      throw UsageError("invalid manifest '" + m_manifest + "': " + where + ": " +
                       (manifest.quoting == InputQuoting::none ? "not a valid value " + value_not_shown(m_manifest)
                                                               : std::string(e.what())));
    }
  }

  static constexpr const char* k_upgrade_examples =
      "Examples:\n"
      "  hoist upgrade --manifest /payload/hoist.json --dry-run\n"
      "  hoist upgrade --component k3s --kind file --source /payload/k3s \\\n"
      "      --destination /usr/local/bin/k3s --version v1.31.2+k3s1 \\\n"
      "      --version-scheme k3s --restart k3s.service --health-check node-ready\n"
      "  hoist upgrade --component app --kind tree --source /payload/app.tar.zst \\\n"
      "      --destination /opt/app --version 1.2.0 --sha256sums /payload/SHA256SUMS \\\n"
      "      --keep 3\n";
  static constexpr const char* k_stage_examples =
      "Examples:\n"
      "  hoist stage --manifest /payload/hoist.json --restart k3s.service \\\n"
      "      --lock-timeout 60\n"
      "  hoist stage --manifest /payload/hoist.json --wait-for-plan k3s-server \\\n"
      "      --node-version v1.31.2+k3s1 --wait-timeout 1200\n";

  const LogOptions& m_log;
  const RunMode m_mode;
  CLI::App* m_app = nullptr;
  bool m_stage_remount = false;
  std::vector<std::string> m_stage_restart_units;
  PlanWait m_wait;
  /// What the wait for --wait-for-plan's Plan found, for the termination message.
  std::string m_waited;
  ComponentSpec m_spec;
  std::string m_kind;
  std::string m_version;
  std::string m_scheme = "semver";
  bool m_allow_downgrade = false;
  bool m_allow_quarantined = false;
  bool m_allow_minor_skip = false;
  TrustPolicy m_trust;
  RunSummary m_summary;
  std::string m_installed_version_from;
  /// The flag or manifest key that asks for the Node's kubelet version (`installed_version_from` `node`), or "".
  std::string m_node_needed_by;
  bool m_checksum = false;
  bool m_dry_run = false;
  uint64_t m_max_unpacked_bytes = 0;
  uint64_t m_max_unpack_ratio = k_default_unpack_ratio;
  unsigned m_threads = 0;
  std::string m_manifest;
  HostActionOptions m_host;
  std::vector<std::string> m_health_checks;
  unsigned m_health_settle = static_cast<unsigned>(k_default_health_settle.count());
  unsigned m_health_timeout = static_cast<unsigned>(k_default_health_timeout.count());
  HealthPolicy m_health;
  std::string m_datastore_snapshot = "take";
  std::string m_etcd_health = "check";
  unsigned m_datastore_timeout = 300;
};

}  // namespace

std::unique_ptr<Command> make_upgrade_command(const LogOptions& log) {
  return std::make_unique<UpgradeCommand>(log, RunMode::upgrade);
}

std::unique_ptr<Command> make_stage_command(const LogOptions& log) {
  return std::make_unique<UpgradeCommand>(log, RunMode::stage);
}

}  // namespace hoist::cli
