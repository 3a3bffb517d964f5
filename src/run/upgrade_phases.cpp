// The phases of an upgrade that write: verify (which only reads, and gates the writing), remount, clean_leftovers,
// stage, switch_over, undo and record. ARCHITECTURE.md, "Commit points and crash safety", says what a kill
// between any two of their writes leaves.
#include "upgrade_phases.hpp"

#include <spdlog/spdlog.h>

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "datastore_snapshot.hpp"
#include "health_phase.hpp"
#include "hoist/host/boot_id.hpp"
#include "hoist/host/interrupted.hpp"
#include "hoist/host/writable_mounts.hpp"
#include "hoist/model/state_update.hpp"
#include "hoist/run/progress_reporter.hpp"
#include "hoist/util/error.hpp"
#include "hoist/verify/payload_verification.hpp"
#include "hoist/verify/sysext_image.hpp"

namespace hoist {

using Work = UpgradeRun::Work;

LogFields count_fields(const TransferStats& s) {
  return LogFields{{"files_added", s.files_added},     {"files_changed", s.files_changed},
                   {"files_removed", s.files_removed}, {"files_unchanged", s.files_unchanged},
                   {"bytes_added", s.bytes_added},     {"bytes_changed", s.bytes_changed},
                   {"bytes_removed", s.bytes_removed}, {"bytes_written", s.bytes_written}};
}

std::string describe(const TransferStats& s) {
  return fmt::format("{} added ({}), {} changed ({}), {} removed ({}), {} unchanged", s.files_added,
                     format_bytes(s.bytes_added), s.files_changed, format_bytes(s.bytes_changed), s.files_removed,
                     format_bytes(s.bytes_removed), s.files_unchanged);
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

namespace {

/// A payload file changed less than this long before a transfer began is read again by the next one: within a
/// filesystem's timestamp granularity (a second, or two on FAT), a write after its reading could leave its ctime
/// as it was.
constexpr std::chrono::seconds k_source_settle{2};

/// TransferOptions::source_stamps_before_ns for a transfer that starts now.
int64_t source_stamps_before_ns() {
  const auto now = std::chrono::system_clock::now() - k_source_settle;
  return std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
}

// What --remount (every component) or a manifest's "remount" (that component) makes writable for the run.
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

LogFields phase_fields(const Work& work, const char* phase) {
  return LogFields{{"component", work.name()}, {"version", work.item.target.text()}, {"phase", phase}};
}

// Verification reads only the payloads: nothing on the host has changed yet. A version that `hoist stage` staged
// and verified before the drain is not read again: its content index vouches for its bytes, which stage() compares
// with the sums checked here (signature included).
void UpgradeRun::verify() {
  try {
    for (Work& work : m_works) {
      const LogFields fields = phase_fields(work, "verify");
      if (work.gate.changes_host() && !work.item.spec.sha256sums.empty()) {
        const Payload& payload = work.item.payload;
        check_sums_entry_applies(work.item.spec, payload);
        // Not under --checksum, which trusts no listed digest: then the payload is read and verified as always.
        if (work.staged_ahead && payload.type() != PayloadType::archive && work.item.spec.compare == Compare::content) {
          Sha256Sums sums = load_payload_sums(work.item.spec);
          // A file payload the sums do not list is refused by the verification proper (exit 5).
          const bool listed = payload.type() == PayloadType::directory ||
                              sums.entries().find(sums_entry_name(work.item.spec, payload.path())) != nullptr;
          if (listed) {
            work.sums = std::move(sums);
            work.verification_deferred = true;
          }
        }
        if (!work.verification_deferred) {
          verify_payload_of(work);
        }
        if (payload.type() != PayloadType::directory) {
          if (const Sha256Digest* listed = work.sums->entries().find(sums_entry_name(work.item.spec, payload.path()))) {
            work.payload_file_digest = *listed;
          }
        }
      }
      if (work.gate.changes_host() && work.item.spec.kind == ComponentKind::sysext) {
        verify_sysext_payload(m_root, work.item.payload, work.item.spec.destination);
        spdlog::info("{}: the extension-release of {} matches the host's os-release", work.name(),
                     work.item.payload.path().string());
      }
    }
  } catch (const Error& e) {
    if (m_dry_run == DryRun::no) {
      record_outcome(outcome::k_failed, e.what(), Everyone::no);
    }
    throw;
  }
}

void UpgradeRun::verify_payload_of(Work& work) {
  const Payload& payload = work.item.payload;
  const ComponentSpec& spec = work.item.spec;
  // Not under --checksum, which trusts no index.
  std::optional<IndexedTree> installed;
  if (payload.type() == PayloadType::directory && spec.compare == Compare::content) {
    installed = work.installer->installed_tree(work.installed_text());
  }
  try {
    work.sums = verify_payload(spec, payload, installed ? &*installed : nullptr, &work.unread, m_options.threads);
  } catch (const Interrupted&) {
    throw;
  } catch (const Error& e) {
    // Which component, which payload and which sums file: a Plan's manifest lists several.
    throw Error(e.code(), fmt::format("{}: {} does not verify against {}: {}", work.name(), payload.path().string(),
                                      spec.sha256sums.string(), e.what()));
  }
  const auto unread = std::count(work.unread.begin(), work.unread.end(), true);
  spdlog::info("{}: verified {} against {}{}{}", work.name(), payload.path().string(), spec.sha256sums.string(),
               spec.public_key.empty() ? "" : " (signed)",
               unread == 0 ? std::string()
                           : fmt::format(" ({} of its files unread: the installed {} holds them as listed)", unread,
                                         work.installed_text()));
}

void UpgradeRun::preflight() {
  try {
    for (Work& work : m_works) {
      if (!work.gate.changes_host() || work.item.spec.kind != ComponentKind::file) {
        continue;  // a k3s or RKE2 server is one binary: the file kind
      }
      const LogFields fields = phase_fields(work, "preflight");
      std::uint64_t staged = 0;
      if (work.item.payload.type() != PayloadType::directory) {
        struct stat st {};
        const Fd payload = work.item.payload.reopen();
        if (::fstat(payload.get(), &st) == 0) {
          staged = static_cast<std::uint64_t>(st.st_size);
        }
      }
      work.server = preflight_server(m_root, work.item.spec, m_host->restarts_owed_by(work.item.spec.kind), staged,
                                     m_store.state_dir(), m_options.datastore.policy);
      if (work.server) {
        const ServerDatastore& server = work.server->server;
        spdlog::info("{}: a {} server: {}", work.name(), server.product, server.found);
        if (!work.server->snapshot) {
          spdlog::warn(
              "{}: no snapshot of the {} datastore ({}): a failed upgrade is switched back only when {} "
              "cannot have moved it",
              work.name(), to_string(server.kind),
              server.kind == DatastoreKind::external ? "hoist cannot take one" : "--datastore-snapshot=skip",
              work.item.target.text());
        }
        check_etcd_health(work, server);
      }
    }
  } catch (const Failure& e) {
    record_outcome(outcome::k_failed, e.what(), Everyone::no);
    throw;
  }
}

// k3s's documentation wants every etcd member healthy before a server goes: a server restarted while another member
// is down can leave etcd without a quorum.
void UpgradeRun::check_etcd_health(const Work& work, const ServerDatastore& server) const {
  if (server.kind != DatastoreKind::etcd || !m_options.datastore.etcd_health) {
    return;
  }
  const EtcdHealth health = m_options.datastore.etcd_health(server);
  if (!health.known || health.unhealthy.empty()) {
    return;
  }
  std::string why;
  for (const auto& line : health.unhealthy) {
    why += (why.empty() ? "" : "; ") + line;
  }
  throw Failure(fmt::format(
      "{}: refusing to upgrade the {} server while its etcd is not healthy ({} of {} member(s): {}): restarting a "
      "server now could leave etcd without a quorum; nothing was changed. Bring the members back, or pass "
      "--etcd-health=skip to go on anyway",
      work.name(), server.product, health.unhealthy.size(), health.members, why));
}

void UpgradeRun::snapshot() {
  for (Work& work : m_works) {
    if (!work.server || !work.server->snapshot || !work.gate.changes_host() || !work.state ||
        work.installed_text().empty() || work.installed_text() == work.item.target.text()) {
      continue;  // a first install or a repair has no datastore of another version to keep
    }
    throw_if_interrupted("snapshotting the datastore of " + work.name());
    const LogFields fields = phase_fields(work, "snapshot");
    const ServerDatastore& server = work.server->server;
    const std::string from = work.installed_text();
    const std::string to = work.item.target.text();
    if (server.kind == DatastoreKind::sqlite) {
      // Stopped for the copy: started again by the switch's restart, or by the next run when this one dies.
      owe_restarts(*work.state, {server.unit});
      m_store.save(*work.state);
      work.stopped_unit = server.unit;
    }
    // etcd's members, asked while the old version runs it (after a failed switch it may not run at all): recorded
    // with the snapshot, for deciding whether this server alone can restore it.
    const int members = etcd_member_count(m_options.datastore, server, nullptr);
    const auto start = std::chrono::steady_clock::now();
    DatastoreSnapshot taken = take_datastore_snapshot(m_root, *m_host, server, from, to,
                                                      sqlite_snapshot_dir(m_store.state_dir(), work.name(), from, to),
                                                      m_options.datastore.timeout);
    taken.etcd_members = members;
    spdlog::info("{}: snapshot of the {} datastore of {} in {:.2f} s: {} ({})", work.name(), taken.kind, from,
                 seconds_since(start), m_root.display(taken.path), format_bytes(taken.bytes));
    // One snapshot a switch: a retried run replaces what an earlier attempt took.
    auto& snapshots = work.state->datastore_snapshots;
    std::vector<DatastoreSnapshot> replaced;
    for (const auto& old : snapshots) {
      if (old.from == from && old.to == to && old.path != taken.path) {
        replaced.push_back(old);
      }
    }
    std::erase_if(snapshots, [&](const DatastoreSnapshot& s) { return s.from == from && s.to == to; });
    snapshots.push_back(std::move(taken));
    m_store.save(*work.state);
    for (const auto& old : replaced) {
      try {
        remove_datastore_snapshot(m_root, old);
      } catch (const std::exception& e) {
        spdlog::warn("{}: could not remove the older snapshot {}: {}", work.name(), m_root.display(old.path), e.what());
      }
    }
  }
}

void UpgradeRun::reach_the_bus() {
  for (const Work& work : m_works) {
    const auto units = m_host->restarts_owed_by(work.item.spec.kind);
    if (!work.gate.changes_host() || units.empty()) {
      continue;
    }
    try {
      (void)m_host->bus();
    } catch (const Failure& e) {
      std::string names;
      for (const auto& unit : units) {
        names += (names.empty() ? "" : ", ") + unit;
      }
      throw Failure(work.name() + ": cannot restart " + names + " after the switch to " + work.item.target.text() +
                    ": " + e.what());
    }
    return;  // one connection serves every restart of the run
  }
}

void UpgradeRun::remount() {
  m_host->make_writable(remount_paths(m_works, m_store, m_options.host.remount));
}

// What killed runs left goes first. A sync's cleanup may finish a rollback and so change what is installed: the gate
// is asked again.
void UpgradeRun::clean_leftovers() {
  for (Work& work : m_works) {
    if (work.installer->clean_leftovers(work.state ? &*work.state : nullptr)) {
      m_store.save(*work.state);
      decide(work);
      if (work.gate.decision == GateDecision::refused) {
        throw Error(ExitCode::refused, work.gate.message);
      }
    }
  }
}

// Everything is staged before anything is switched: staging is where a run fails (disk full, a bad archive), and
// then nothing has switched.
void UpgradeRun::stage() {
  for (Work& work : m_works) {
    if (!work.gate.changes_host()) {
      continue;
    }
    throw_if_interrupted("staging " + work.name());
    const LogFields fields = phase_fields(work, "stage");
    const auto start = std::chrono::steady_clock::now();
    if (work.state && work.state->staged && work.state->staged->version != work.item.target.text()) {
      // Staged for a target this run does not install: its space goes before this run's staging takes more.
      drop_stale_staged(work, *work.state);
      m_store.save(*work.state);
    }
    if (work.staged_ahead) {
      const StagedVersion& staged = *work.state->staged;
      const bool holds = work.installer->holds(staged.version, work.item.payload, transfer_options(work, nullptr));
      if (holds && work.verification_deferred) {
        // holds() compared the staged copy, through its index, with the digests the sums list; what is left of
        // the verification is that they list every payload file and nothing else.
        check_payload_listing(*work.sums, work.item.spec, work.item.payload);
      }
      if (holds) {
        spdlog::info("{}: switching to {} as `hoist stage` staged it at {}{} (it holds the payload{}: {:.2f} s)",
                     work.name(), staged.version, staged.started_at,
                     staged.plan.empty() ? std::string() : " for plan " + staged.plan,
                     work.verification_deferred ? ", checked against its verified sums through its content index" : "",
                     seconds_since(start));
      } else {
        spdlog::warn("{}: the {} that `hoist stage` staged at {} does not hold the payload: staging it again",
                     work.name(), staged.version, staged.started_at);
        if (work.verification_deferred) {
          verify_payload_of(work);
          work.verification_deferred = false;
        }
      }
    }
    ProgressReporter progress(work.name(), m_options.progress);
    work.staged = true;
    work.stats = work.installer->stage(work.item.payload, work.item.target.text(), transfer_options(work, &progress));
    progress.finish();
    if (work.item.spec.kind != ComponentKind::sync) {
      const LogFields counts = count_fields(work.stats);
      spdlog::info("{}: staged {} in {:.2f} s: {}, {} written", work.name(), work.item.target.text(),
                   seconds_since(start), describe(work.stats), format_bytes(work.stats.bytes_written));
    }
  }
}

void UpgradeRun::switch_over() {
  for (Work& work : m_works) {
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
                                           m_host->restarts_owed_by(work.item.spec.kind), specs_of(checks_of(work))};
      m_store.save(*work.state);
    }
    ProgressReporter progress(work.name(), m_options.progress);
    work.committed = true;
    const TransferStats synced = work.installer->commit(work.item.payload, work.item.target.text(),
                                                        work.installed_text(), transfer_options(work, &progress));
    progress.finish();
    if (work.item.spec.kind == ComponentKind::sync) {
      work.stats = synced;
      const LogFields counts = count_fields(synced);
      spdlog::info("{}: synced {} into {} in {:.2f} s: {}, {} written", work.name(), work.item.target.text(),
                   m_root.display(work.item.spec.destination), seconds_since(start), describe(synced),
                   format_bytes(synced.bytes_written));
    } else {
      spdlog::info("{}: switched {} to {}", work.name(), m_root.display(work.item.spec.destination),
                   work.item.target.text());
    }
  }
}

// The switches made so far are undone (newest first) and what was staged is removed: the host goes back to the old
// versions. Errors here are logged: the error that started it is what the run reports.
std::string UpgradeRun::undo(const std::exception& failure) {
  std::string stuck;  // the switches that could not be undone
  for (auto it = m_works.rbegin(); it != m_works.rend(); ++it) {
    const LogFields fields = phase_fields(*it, "undo");
    bool switched_back = !it->committed;
    try {
      if (it->committed) {
        it->installer->undo_commit();
        switched_back = true;
        spdlog::info("{}: switched back to {}", it->name(),
                     it->installed_text().empty() ? "nothing" : it->installed_text());
      }
      if (it->staged) {
        it->installer->discard_staged();
      }
    } catch (const std::exception& e) {
      spdlog::error("{}: could not undo: {}", it->name(), e.what());
      if (!switched_back) {
        // The link names the new version: the next run finds it there and records it (host_truth).
        stuck += fmt::format("; {}: could not switch back to {} ({}): it stays on {} until the next run records it",
                             it->name(), it->installed_text().empty() ? "nothing" : it->installed_text(), e.what(),
                             it->item.target.text());
      }
    }
  }
  // `hoist stage` recorded what it was staging before it began: a version it took back is no longer staged.
  for (Work& work : m_works) {
    if (work.state && work.state->staged && !work.installer->has_complete(work.state->staged->version)) {
      work.state->staged.reset();
    }
  }
  // Bad input (an archive entry refused while staging) leaves a first install no state, as a failed verification
  // does: the undo took back what it made.
  const auto* error = dynamic_cast<const Error*>(&failure);
  const bool bad_input =
      error != nullptr && (error->code() == ExitCode::verification || error->code() == ExitCode::usage);
  record_outcome(outcome::k_failed, std::string(failure.what()) + stuck, bad_input ? Everyone::no : Everyone::yes);
  // A server stopped for its snapshot runs the old version again; its start stays owed when this fails.
  for (Work& work : m_works) {
    if (work.stopped_unit.empty() || dynamic_cast<const Interrupted*>(&failure) != nullptr) {
      continue;
    }
    try {
      m_host->after_switch(m_store, {SwitchedComponent{work.name(), work.item.spec.kind, work.installed_text(), false}},
                           AfterRestarts::no_reboot);
    } catch (const std::exception& e) {
      spdlog::error("{}: could not start {} again: {}", work.name(), work.stopped_unit, e.what());
    }
  }
  return stuck;
}

void UpgradeRun::record() {
  const std::string boot_id = read_boot_id(m_root);
  for (Work& work : m_works) {
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
      // Owed with the switch, in the same save: a run killed before its restarts leaves them to the next. They
      // replace what the version switched away from still owed: this run's command says what to restart now.
      state.owed_restarts = m_host->restarts_owed_by(work.item.spec.kind);
      // Owed with the switch too: a run killed before they pass leaves them to the next (never counted as passed).
      state.owed_health_checks = specs_of(checks_of(work));
      set_last_result(state, m_command, outcome::k_succeeded, work.item.target.text());
    } else {
      const std::string settled = settle_owed(work, state);
      if (!work.reboot_settled && state.owed_restarts.empty()) {
        set_last_result(state, m_command, outcome::k_unchanged, work.item.target.text(), settled);
      }
    }
    state.boot_id = boot_id;
    m_store.save(state);
    if (work.gate.changes_host()) {
      work.installer->finish();
      collect_garbage(work, state);
    }
  }
}

void UpgradeRun::collect_garbage(Work& work, ComponentState& state) {
  // The retention also takes what was staged for another version than the one now current.
  if (state.staged && state.staged->version != state.current) {
    drop_stale_staged(work, state);
  }
  for (const auto& version : versions_to_collect(state, work.item.spec.keep)) {
    try {
      work.installer->remove_version(version);
      forget_version(state, version);
      // A snapshot holds its version's datastore: it goes with that version.
      std::erase_if(state.datastore_snapshots, [&](const DatastoreSnapshot& snapshot) {
        if (snapshot.from != version) {
          return false;
        }
        try {
          remove_datastore_snapshot(m_root, snapshot);
          spdlog::info("{}: removed the datastore snapshot {} of {}", work.name(), m_root.display(snapshot.path),
                       version);
          return true;
        } catch (const std::exception& e) {
          spdlog::warn("{}: could not remove the datastore snapshot {}: {}", work.name(), m_root.display(snapshot.path),
                       e.what());
          return false;
        }
      });
      spdlog::info("{}: removed version {} (--keep {})", work.name(), version, work.item.spec.keep);
    } catch (const std::exception& e) {
      spdlog::warn("{}: could not remove version {}: {}", work.name(), version, e.what());
    }
  }
  m_store.save(state);
  std::string kept;
  for (const auto& record : state.versions) {
    kept += (kept.empty() ? "" : ", ") + record.version;
  }
  spdlog::info("{}: kept versions: {}", work.name(), kept);
}

// The checks a component's switch makes owed: that a sysext is merged (first: the others may need what it brings),
// the run's, then its own.
std::vector<HealthCheck> UpgradeRun::checks_of(const Work& work) const {
  std::vector<HealthCheck> checks;
  if (work.item.spec.kind == ComponentKind::sysext) {
    checks.push_back(sysext_merge_check(work.item.spec.destination));
  }
  checks.insert(checks.end(), m_options.health.checks.begin(), m_options.health.checks.end());
  checks.insert(checks.end(), work.item.health_checks.begin(), work.item.health_checks.end());
  return checks;
}

TransferOptions UpgradeRun::transfer_options(const Work& work, ProgressReporter* progress) const {
  TransferOptions options;
  options.compare = work.item.spec.compare;
  options.max_unpacked_bytes = m_options.max_unpacked_bytes;
  options.max_unpack_ratio = m_options.max_unpack_ratio;
  options.threads = m_options.threads;
  options.source_stamps_before_ns = source_stamps_before_ns();
  if (progress != nullptr) {
    options.on_progress = [progress](const TransferStats& stats) { progress->update(stats); };
  }
  if (work.sums) {
    options.check_staged = [&work](int /*staging_dir*/, const ContentIndex& staged) {
      verify_staged_tree(*work.sums, work.item.spec, work.item.payload, staged, &work.unread);
    };
    // The verified sums stand for the payload's bytes where they list them: a payload file whose digest the old
    // version's index also vouches for is not read at all.
    if (work.item.payload.type() == PayloadType::directory) {
      options.payload_digests = &work.sums->entries();
    }
  }
  if (work.payload_file_digest) {
    options.payload_file_digest = &*work.payload_file_digest;
  }
  return options;
}

}  // namespace hoist
