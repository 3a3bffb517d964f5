// The sync kind (ARCHITECTURE.md, "On-host layout"): the payload synced into the destination in place,
// rsync -aHAX --delete style, by sync_tree(); every entry it replaces or
// deletes is kept in a backup beside the destination, on the same filesystem,
// so that one rollback (restore_sync_backup) can undo the last sync.
//
//   <parent>/.<name>.hoist-sync/pending.<v>    the backup of a sync to <v> in progress
//   <parent>/.<name>.hoist-sync/undo.<v>@<u>   the backup that undoes the completed sync from <u> to <v>
//   <parent>/.<name>.hoist-sync/repair.<v>     the backup of a re-sync of <v> over drift (discarded)
//   <parent>/.<name>.hoist-sync/restoring.<v>  a rollback from <v> in progress
//   <state>/<component>/.index/<v>              the destination's content index as the sync to <v> left it
//                                               (content_indexes.hpp), written before the sync's commit point
//
// The names are the commit points: a sync is complete once `pending.<v>` is
// renamed to `undo.<v>@<u>`, a rollback once `restoring.<v>` is gone. The next run
// undoes a sync that was killed (restores `pending.<v>`) and finishes a
// rollback that was killed (restores the rest of `restoring.<v>`).
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <optional>
#include <utility>
#include <vector>

#include "content_indexes.hpp"
#include "hoist/install/installer.hpp"
#include "hoist/model/state_update.hpp"
#include "hoist/sys/atomic_file.hpp"
#include "hoist/sys/host_dir.hpp"
#include "hoist/util/error.hpp"
#include "hoist/util/text.hpp"

namespace hoist {

namespace {

constexpr std::string_view k_pending = "pending.";
constexpr std::string_view k_undo = "undo.";
constexpr std::string_view k_repair = "repair.";
constexpr std::string_view k_restoring = "restoring.";

std::string entry(std::string_view prefix, const std::string& version) {
  return std::string(prefix) + version;
}

// `undo.<to>@<from>`: '@' is in no version scheme, so the name splits back.
std::string undo_entry(const std::string& to, const std::string& from) {
  return entry(k_undo, to) + "@" + from;
}

// The (to, from) of an undo entry's name; nullopt for any other name.
std::optional<std::pair<std::string, std::string>> parse_undo(std::string_view name) {
  if (!name.starts_with(k_undo)) {
    return std::nullopt;
  }
  name.remove_prefix(k_undo.size());
  const size_t at = name.find('@');
  if (at == std::string_view::npos) {
    return std::nullopt;
  }
  return std::pair<std::string, std::string>(name.substr(0, at), name.substr(at + 1));
}

bool has_changes(const TransferStats& stats) {
  return stats.files_added + stats.files_changed + stats.files_removed > 0;
}

class SyncInstaller final : public Installer {
 public:
  SyncInstaller(const HostRoot& root, InstallTarget target, Durability durability)
      : m_root(root), m_target(std::move(target)), m_durability(durability), m_indexes(m_root, m_target) {
    const std::filesystem::path dest(m_target.destination);
    m_backups_path = (dest.parent_path() / ("." + dest.filename().string() + ".hoist-sync")).string();
  }

  Integrity integrity(const std::string& version, const Payload* payload) override {
    auto dest = HostDir::open(m_root, m_target.destination);
    if (!dest) {
      return Integrity::damaged;
    }
    if (payload == nullptr) {
      return Integrity::intact;
    }
    const std::optional<ContentIndex> known = m_indexes.load(version);
    TransferOptions dry;
    dry.dry_run = DryRun::yes;
    dry.known = known ? &*known : nullptr;
    return has_changes(sync_tree(*payload, dest->fd(), -1, dry)) ? Integrity::damaged : Integrity::intact;
  }

  std::string host_current(const ComponentState& state) override {
    auto backups = HostDir::open(m_root, m_backups_path);
    if (!backups || state.current.empty()) {
      return {};
    }
    const std::vector<std::string> names = backups->list().value();
    if (state.rollback && state.rollback->from == state.current) {
      // The rollback's commit is the rename of its backup to restoring.<from>: once that name exists, or the
      // backup is gone (restored and removed), the host is on its way to, or at, the target.
      const bool begun = std::find(names.begin(), names.end(), entry(k_restoring, state.current)) != names.end();
      const bool backup_left = std::any_of(names.begin(), names.end(), [&](const std::string& name) {
        const auto undo = parse_undo(name);
        return undo && undo->first == state.current;
      });
      return begun || !backup_left ? state.rollback->to : state.current;
    }
    for (const auto& name : names) {
      // Renamed from pending.<v> only once the sync to <v> was complete and durable.
      if (const auto undo = parse_undo(name); undo && undo->second == state.current && undo->first != state.current) {
        return undo->first;
      }
    }
    return state.current;
  }

  bool clean_leftovers(ComponentState* state) override {
    if (state != nullptr) {
      // The destination is the current version, or (a sync from it that a killed run completed) one newer: the
      // index of any other version describes nothing on the host any more.
      m_indexes.clean([&](const std::string& v) {
        return v == state->current || v == state->previous || (state->switching && v == state->switching->to);
      });
    }
    auto backups = HostDir::open(m_root, m_backups_path);
    if (!backups) {
      return false;
    }
    bool state_changed = false;
    const std::vector<std::string> names = backups->list().value();
    for (const auto& name : names) {
      if (name.starts_with(k_temp_prefix) || name.starts_with(k_repair)) {
        // Trash of a removal, or the backup of an interrupted repair: the
        // destination is a mix of drift and the current version, and the next
        // integrity check repairs it again.
        backups->remove_entry(name).value();
      } else if (name.starts_with(k_pending)) {
        spdlog::info("{}: undoing the interrupted sync to {}", m_target.component, name.substr(k_pending.size()));
        restore(*backups, name);
      } else if (const auto undo = parse_undo(name); undo && state != nullptr) {
        // The backup of the current version's sync stays, and so does that of a
        // sync *from* it that a killed run completed and did not record; older
        // ones are what a killed run did not get to drop (finish()).
        if (undo->first != state->current && undo->second != state->current) {
          backups->remove_entry(name).value();
        }
      } else if (name.starts_with(k_restoring)) {
        const std::string from = name.substr(k_restoring.size());
        spdlog::info("{}: finishing the interrupted rollback from {}", m_target.component, from);
        restore(*backups, name);
        if (state != nullptr && state->current == from) {
          if (!state->rollback || state->rollback->from != from) {
            // Begun by a hoist that recorded no intent: its target was the previous version.
            state->rollback = RollbackIntent{from, state->previous, now_rfc3339(), {}, "", true, "", ""};
          }
          record_rollback(*state);
          state_changed = true;
        }
      }
    }
    return state_changed;
  }

  TransferStats stage(const Payload& /*payload*/, const std::string& /*version*/,
                      const TransferOptions& /*options*/) override {
    return {};
  }

  std::optional<IndexedTree> installed_tree(const std::string& installed) override {
    std::optional<ContentIndex> known = m_indexes.load(installed, ContentIndexes::Damaged::quiet);
    if (!known) {
      return std::nullopt;
    }
    auto dest = HostDir::open(m_root, m_target.destination);
    Fd dir(dest ? ::fcntl(dest->fd(), F_DUPFD_CLOEXEC, 0) : -1);
    if (!dir) {
      return std::nullopt;
    }
    return IndexedTree{std::move(dir), std::move(*known)};
  }

  // A sync stages nothing: the sync is its switch.
  bool has_complete(const std::string& /*version*/) override { return false; }
  bool holds(const std::string& /*version*/, const Payload& /*payload*/, const TransferOptions& /*options*/) override {
    return false;
  }

  // What commit() checks once it has made the directories, decided without making them: the destination a
  // directory, and the backups' directory beside it on its filesystem (a destination that is a mount point is not).
  void check_switch() override {
    auto dest = HostDir::open(m_root, m_target.destination);
    if (!dest) {
      if (dest.error().errnum == ENOENT) {
        return;  // a first sync makes it, beside its parent's backups
      }
      throw Failure("cannot sync " + m_target.component + ": " + dest.error().message);
    }
    auto backups = HostDir::open(m_root, m_backups_path);
    if (!backups) {
      backups = HostDir::open(m_root, std::filesystem::path(m_backups_path).parent_path().string());
    }
    if (backups) {
      check_same_filesystem(*dest, *backups);
    }
  }

  TransferStats commit(const Payload& payload, const std::string& version, const std::string& installed,
                       const TransferOptions& options) override {
    HostDir dest = HostDir::create(m_root, m_target.destination, 0755, &m_made).value();
    HostDir backups = HostDir::create(m_root, m_backups_path, 0700, &m_made).value();
    check_same_filesystem(dest, backups);
    const bool repair = installed == version;
    if (!repair && backups.stat(undo_entry(version, installed))) {
      // Renamed to undo.<v>@<u> only after the sync was durable: a killed run
      // finished it and died before recording the state.
      spdlog::info("{}: the sync to {} was completed by an interrupted run", m_target.component, version);
      m_committed = undo_entry(version, installed);
      return {};
    }
    const std::string name = entry(repair ? k_repair : k_pending, version);
    HostDir backup = backups.make_child(name).value();
    TransferStats stats;
    try {
      const std::optional<ContentIndex> known = m_indexes.load(installed);
      ContentIndex produced;
      TransferOptions sync_options = options;
      sync_options.known = known ? &*known : nullptr;
      sync_options.produced = &produced;
      stats = sync_tree(payload, dest.fd(), backup.fd(), sync_options);
      make_durable(dest, backups);
      // Before the commit point: a committed sync always has its index. Killed before the rename, the sync is
      // undone by the next run and this index describes nothing, so that run's clean_leftovers() removes it. A
      // sync that changed nothing links the index it was compared with instead of writing the same bytes again.
      m_indexes.save_like(version, produced, installed, known ? &*known : nullptr, &m_made);
    } catch (...) {
      try {
        restore(backups, name);
      } catch (const std::exception& e) {
        spdlog::error("{}: {} (the next run undoes the sync)", m_target.component, e.what());
      }
      throw;
    }
    if (repair) {
      // The destination is the current version again, so the backup that
      // undoes its sync (undo.<v>@<u>) still applies; this one holds drift only.
      backups.remove_entry(name).value();
      return stats;
    }
    const std::string undo = undo_entry(version, installed);
    if (::renameat(backups.fd(), name.c_str(), backups.fd(), undo.c_str()) != 0) {
      throw Failure(system_message(
          "rename " + in_quotes(backups.display(name)) + " to " + in_quotes(backups.display(undo)), errno));
    }
    backups.sync().value();
    m_committed = undo;
    return stats;
  }

  void finish() override {
    if (m_committed.empty()) {
      return;
    }
    // One rollback: only the backup of the last sync is kept, and the indexes of its two versions.
    HostDir backups = HostDir::open(m_root, m_backups_path).value();
    const std::vector<std::string> names = backups.list().value();
    for (const auto& name : names) {
      if (name.starts_with(k_undo) && name != m_committed) {
        backups.remove_entry(name).value();
      }
    }
    if (const auto undo = parse_undo(m_committed)) {
      m_indexes.clean([&](const std::string& v) { return v == undo->first || v == undo->second; });
    }
  }

  void undo_commit() override {
    if (m_committed.empty()) {
      return;
    }
    HostDir backups = HostDir::open(m_root, m_backups_path).value();
    restore(backups, m_committed);
    m_committed.clear();
  }

  void discard_staged() override {
    // A first install takes back the destination and backup directories that commit() made.
    HostDir::remove_made(m_root, m_made).value();
  }

  TransferStats preview(const Payload& payload, const std::string& installed, const TransferOptions& options) override {
    TransferOptions dry = options;
    dry.dry_run = DryRun::yes;
    auto dest = HostDir::open(m_root, m_target.destination);
    if (!dest) {
      // Nothing there yet: everything is added, as a staging would count it.
      const HostDir root = HostDir::open(m_root, "/").value();
      return stage_tree(payload, root.fd(), -1, dry);
    }
    const std::optional<ContentIndex> known = m_indexes.load(installed);
    dry.known = known ? &*known : nullptr;
    return sync_tree(payload, dest->fd(), -1, dry);
  }

  void check_rollback(const std::string& version, const std::string& current) override {
    auto backups = HostDir::open(m_root, m_backups_path);
    if (!backups || find_undo(*backups, current).empty()) {
      throw UsageError("cannot roll back " + m_target.component + " to " + version + ": the backup of the sync to " +
                       current + " ('" + m_root.display(m_backups_path + "/" + undo_entry(current, version)) +
                       "') does not exist");
    }
  }

  void rollback(const std::string& /*version*/, const std::string& current) override {
    HostDir backups = HostDir::open(m_root, m_backups_path).value();
    const std::string undo = find_undo(backups, current);
    const std::string restoring = entry(k_restoring, current);
    if (::renameat(backups.fd(), undo.c_str(), backups.fd(), restoring.c_str()) != 0) {
      throw Failure(system_message(
          "rename " + in_quotes(backups.display(undo)) + " to " + in_quotes(backups.display(restoring)), errno));
    }
    backups.sync().value();
    restore(backups, restoring);
  }

  void remove_version(const std::string& /*version*/) override {}

 private:
  // The name of the backup that undoes the sync to `to`, "" when there is none.
  static std::string find_undo(const HostDir& backups, const std::string& to) {
    const std::vector<std::string> names = backups.list().value();
    for (const auto& name : names) {
      if (const auto parsed = parse_undo(name); parsed && parsed->first == to) {
        return name;
      }
    }
    return {};
  }

  void check_same_filesystem(const HostDir& dest, const HostDir& backups) const {
    struct stat a {};
    struct stat b {};
    if (::fstat(dest.fd(), &a) != 0 || ::fstat(backups.fd(), &b) != 0) {
      throw Failure(system_message("stat " + in_quotes(dest.display()), errno));
    }
    if (a.st_dev != b.st_dev) {
      throw Failure("cannot sync " + in_quotes(dest.display()) + ": its backup '" + backups.display() +
                    "' must be on the same filesystem (is the destination a mount point?)");
    }
  }

  void make_durable(const HostDir& dest, const HostDir& backups) const {
    make_tree_durable(dest.fd(), m_durability, dest.display()).value();
    if (m_durability == Durability::per_file_fsync) {
      make_tree_durable(backups.fd(), m_durability, backups.display()).value();
    }
  }

  // Puts back what the backup `name` kept, makes it durable, removes the backup.
  void restore(const HostDir& backups, const std::string& name) {
    HostDir dest = HostDir::open(m_root, m_target.destination).value();
    HostDir backup = backups.child(name).value();
    restore_sync_backup(dest.fd(), backup.fd());
    make_durable(dest, backups);
    backups.remove_entry(name).value();
  }

  const HostRoot& m_root;
  InstallTarget m_target;
  Durability m_durability;
  ContentIndexes m_indexes;
  std::string m_backups_path;
  std::string m_committed;          ///< the undo.<v>@<u> backup of this object's commit
  std::vector<std::string> m_made;  ///< the directories commit() made (host paths), for discard_staged()
};

}  // namespace

std::unique_ptr<Installer> make_sync_installer(const HostRoot& root, InstallTarget target, Durability durability) {
  return std::make_unique<SyncInstaller>(root, std::move(target), durability);
}

}  // namespace hoist
