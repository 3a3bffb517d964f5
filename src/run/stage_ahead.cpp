// `hoist stage`: the phases of an UpgradeRun in RunMode::stage, which decide and stage before the drain what the
// upgrade only switches to after it (ARCHITECTURE.md, "Staged ahead"), and what both modes do with a version staged
// for another target.
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <string>

#include "hoist/host/interrupted.hpp"
#include "hoist/model/state_update.hpp"
#include "hoist/run/progress_reporter.hpp"
#include "hoist/util/error.hpp"
#include "hoist/util/text.hpp"
#include "upgrade_phases.hpp"

namespace hoist {

namespace {

using Work = UpgradeRun::Work;

// Left free above what a staging writes: its directories, metadata and index take some, and the host writes on.
constexpr uint64_t k_space_margin = 64ULL << 20U;

// The free bytes of the filesystem that holds `host_path`, or of the nearest directory above it that exists (a
// first install makes the rest), and which directory that is.
std::pair<uint64_t, std::string> free_bytes_at(const HostRoot& root, std::string host_path) {
  for (;;) {
    auto fd = root.open(host_path, O_PATH | O_DIRECTORY);
    if (fd) {
      struct statvfs vfs {};
      if (::fstatvfs(fd->get(), &vfs) != 0) {
        throw Failure(system_message("look at the free space of " + in_quotes(root.display(host_path)), errno));
      }
      return {static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize, host_path};
    }
    const size_t slash = host_path.rfind('/');
    if (host_path == "/" || slash == std::string::npos) {
      throw Failure(fd.error().message);
    }
    host_path = slash == 0 ? "/" : host_path.substr(0, slash);
  }
}

// Where a component's staging writes: beside the current version (tree), under the state directory (file, sysext),
// or the destination itself (sync).
std::string staging_place(const Work& work, const StateStore& store) {
  const ComponentSpec& spec = work.item.spec;
  switch (spec.kind) {
    case ComponentKind::file:
    case ComponentKind::sysext: return store.component_dir(spec.name);
    case ComponentKind::tree:
    case ComponentKind::sync: return spec.destination;
  }
  return spec.destination;
}

}  // namespace

bool UpgradeRun::staged_ahead(const Work& work) const {
  return work.state && work.state->staged && work.state->staged->version == work.item.target.text() &&
         work.installer->has_complete(work.state->staged->version);
}

void UpgradeRun::drop_stale_staged(Work& work, ComponentState& state) {
  const std::string version = state.staged->version;
  const bool kept =
      version == state.current || std::any_of(state.versions.begin(), state.versions.end(),
                                              [&](const VersionRecord& record) { return record.version == version; });
  if (!kept && work.installer->has_complete(version)) {
    try {
      work.installer->remove_version(version);
      spdlog::info("{}: removed {}, which `hoist stage` staged at {} for a switch that did not come", work.name(),
                   version, state.staged->started_at);
    } catch (const std::exception& e) {
      spdlog::warn("{}: could not remove the staged {}: {}", work.name(), version, e.what());
      return;  // the record stays, so that the next run tries again
    }
  }
  state.staged.reset();
}

ExitCode UpgradeRun::stage_only() {
  read_states();
  if (!gate()) {
    // The target is installed: a version staged for another one is of no use.
    for (Work& work : m_works) {
      if (work.state && work.state->staged && work.state->staged->version != work.item.target.text()) {
        drop_stale_staged(work, *work.state);
        m_store.save(*work.state);
      }
    }
    return ExitCode::ok;
  }
  verify();
  preflight();
  check_space();
  try {
    remount();
    clean_leftovers();
    check_switches();
    stage_ahead();
  } catch (const std::exception& e) {
    (void)undo(e);  // nothing was switched
    throw;
  }
  return ExitCode::ok;
}

void UpgradeRun::check_space() {
  try {
    for (Work& work : m_works) {
      if (!work.gate.changes_host() || work.staged_ahead) {
        continue;  // nothing to write, or written already
      }
      const LogFields fields = phase_fields(work, "space");
      const Payload& payload = work.item.payload;
      uint64_t need = 0;
      if (payload.type() == PayloadType::file ||
          (payload.type() == PayloadType::archive && work.item.spec.kind != ComponentKind::tree &&
           work.item.spec.kind != ComponentKind::sync)) {
        // The file and sysext kinds write every version whole: the payload file's size.
        struct stat st {};
        const Fd file = payload.reopen();
        if (::fstat(file.get(), &st) == 0) {
          need = static_cast<uint64_t>(st.st_size);
        }
      } else {
        // A tree links what did not change from the current version, and a sync leaves it in place: what a dry
        // run would add or change is what takes space.
        const TransferStats stats =
            work.installer->preview(payload, work.installed_text(), transfer_options(work, nullptr));
        need = stats.bytes_added + stats.bytes_changed;
      }
      const auto [free, where] = free_bytes_at(m_root, staging_place(work, m_store));
      if (free < need + k_space_margin) {
        throw Failure(work.name() + ": not enough free space to stage " + work.item.target.text() + " in " +
                      m_root.display(where) + ": it needs " + format_bytes(need + k_space_margin) + " (" +
                      format_bytes(need) + " and 64 MiB to spare), " + format_bytes(free) +
                      " are free; nothing was changed");
      }
      spdlog::info("{}: {} to stage in {}, {} free", work.name(), format_bytes(need), m_root.display(where),
                   format_bytes(free));
    }
  } catch (const Failure& e) {
    record_outcome(outcome::k_failed, e.what(), Everyone::no);
    throw;
  }
}

void UpgradeRun::check_switches() {
  for (Work& work : m_works) {
    if (work.gate.changes_host()) {
      const LogFields fields = phase_fields(work, "stage");
      work.installer->check_switch();
    }
  }
}

void UpgradeRun::stage_ahead() {
  for (Work& work : m_works) {
    if (!work.gate.changes_host()) {
      continue;
    }
    const LogFields fields = phase_fields(work, "stage");
    const std::string& target = work.item.target.text();
    if (work.item.spec.kind == ComponentKind::sync) {
      spdlog::info(
          "{}: nothing to stage: a sync writes {} in place, which is its switch; {} is decided and verified, "
          "and the upgrade syncs it",
          work.name(), m_root.display(work.item.spec.destination), target);
      continue;
    }
    throw_if_interrupted("staging " + work.name());
    const auto start = std::chrono::steady_clock::now();
    // The record first, the staging after: whatever a kill leaves under the version's name is then named by the
    // state, for the next run to reuse or remove. A version staged for another target goes before this one takes
    // its space.
    if (!work.state) {
      work.state = new_state(work.item.spec);
    }
    if (work.state->staged && work.state->staged->version != target) {
      drop_stale_staged(work, *work.state);
    }
    if (!work.state->staged) {
      work.state->staged =
          StagedVersion{target, now_rfc3339(), m_context.suc.plan_name, m_context.suc.plan_latest_hash};
    }
    m_store.save(*work.state);
    ProgressReporter progress(work.name(), m_options.progress);
    work.staged = true;
    work.stats = work.installer->stage(work.item.payload, target, transfer_options(work, &progress));
    progress.finish();
    const std::string beside = work.installed_text().empty() ? "" : " beside " + work.installed_text();
    set_last_result(*work.state, m_command, outcome::k_succeeded, target,
                    "staged" + beside + ", not switched to: the upgrade switches to it");
    m_store.save(*work.state);
    const LogFields counts = count_fields(work.stats);
    spdlog::info("{}: staged {}{} in {:.2f} s: {}, {} written; not switched to", work.name(), target, beside,
                 seconds_since(start), describe(work.stats), format_bytes(work.stats.bytes_written));
  }
}

}  // namespace hoist
