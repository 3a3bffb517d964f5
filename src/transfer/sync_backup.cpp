#include "sync_backup.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <optional>
#include <vector>

#include "hoist/sys/atomic_file.hpp"
#include "hoist/sys/directory.hpp"
#include "hoist/sys/metadata.hpp"
#include "hoist/sys/temporary_name.hpp"
#include "hoist/transfer/sync_journal.hpp"
#include "hoist/transfer/transfer.hpp"
#include "hoist/util/error.hpp"
#include "hoist/util/file_io.hpp"
#include "transfer_support.hpp"

namespace hoist {

namespace transfer {

namespace {

std::vector<std::string_view> components(std::string_view relpath) {
  std::vector<std::string_view> parts;
  while (!relpath.empty()) {
    const size_t slash = relpath.find('/');
    parts.push_back(relpath.substr(0, slash));
    relpath = slash == std::string_view::npos ? std::string_view() : relpath.substr(slash + 1);
  }
  return parts;
}

/// Opens (and makes, 0700, where missing) the directory at `relpath` under `root`.
Fd make_directories(int root, std::string_view relpath, const std::string& display) {
  Fd current(::openat(root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  std::string path = display;
  for (const std::string_view part : components(relpath)) {
    const std::string name(part);
    path += "/" + name;
    if (::mkdirat(current.get(), name.c_str(), 0700) != 0 && errno != EEXIST) {
      throw Failure(system_message("create directory " + in_quotes(path), errno));
    }
    current = open_directory(current.get(), name.c_str(), path).value();
  }
  return current;
}

}  // namespace

SyncJournal::SyncJournal(int backup_dir, std::string backup_display)
    : m_display(std::move(backup_display)),
      m_tag(random_token(16)),
      m_backup(reopen_directory(backup_dir, m_display).value()) {
  struct stat st {};
  if (::fstat(m_backup.get(), &st) != 0) {
    throw Failure(system_message("stat " + in_quotes(m_display), errno));
  }
  m_dev = st.st_dev;
  m_ino = st.st_ino;
  if (::mkdirat(m_backup.get(), k_kept_tree_name, 0700) != 0) {
    throw Failure(system_message("create directory " + in_quotes(m_display + "/" + k_kept_tree_name), errno));
  }
  m_tree = open_directory(m_backup.get(), k_kept_tree_name, m_display + "/" + k_kept_tree_name).value();
  m_journal.reset(::openat(m_backup.get(), k_journal_name, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0600));
  if (!m_journal) {
    throw Failure(system_message("create " + in_quotes(m_display + "/" + k_journal_name), errno));
  }
}

void SyncJournal::write_record(const SyncRecord& record) {
  // One write per record (O_APPEND): a kill leaves whole records, and the last one at worst cut short.
  // The tag goes first, before the first change: a sync that changes nothing leaves an empty journal.
  std::string text =
      m_tag_recorded ? std::string() : encode_sync_record({SyncRecord::Kind::temporaries, m_tag, {}}) + '\0';
  m_tag_recorded = true;
  text += encode_sync_record(record);
  write_all(m_journal.get(), std::string_view(text.c_str(), text.size() + 1), m_display + "/" + k_journal_name).value();
}

int SyncJournal::container(std::string_view relpath) {
  // Changes come directory by directory: most calls ask for the same directory as the last one.
  if (!m_container || relpath != m_container_path) {
    m_container = make_directories(m_tree.get(), relpath, m_display + "/" + k_kept_tree_name);
    m_container_path = relpath;
  }
  return m_container.get();
}

void SyncJournal::before_change(std::string_view relpath, int dest_dir) {
  std::lock_guard lock(m_mutex);
  if (!m_changed.emplace(relpath).second) {
    return;
  }
  const std::string display = m_display + "/" + k_kept_tree_name + (relpath.empty() ? "" : "/") + std::string(relpath);
  struct stat st {};
  if (::fstat(dest_dir, &st) != 0) {
    throw Failure(system_message("stat the directory " + in_quotes(relpath), errno));
  }
  const Xattrs xattrs = read_xattrs(NodeRef{-1, nullptr, dest_dir}, relpath).value();
  // The old owner, mode and xattrs live on an empty directory at the same path in the backup.
  apply_metadata(NodeRef{-1, nullptr, container(relpath)}, NodeMeta::from_stat(st), xattrs, ExistingXattrs::reconcile,
                 display)
      .value();
  write_record(SyncRecord{SyncRecord::Kind::directory, std::string(relpath), st.st_mtim});
}

bool SyncJournal::changed(std::string_view relpath) {
  std::lock_guard lock(m_mutex);
  return m_changed.count(std::string(relpath)) > 0;
}

void SyncJournal::added(std::string_view relpath) {
  std::lock_guard lock(m_mutex);
  write_record(SyncRecord{SyncRecord::Kind::added, std::string(relpath), {}});
}

void SyncJournal::keep_by_link(int dest_dir, const std::string& name, std::string_view relpath) {
  std::lock_guard lock(m_mutex);
  write_record(SyncRecord{SyncRecord::Kind::kept, std::string(relpath), {}});
  const auto [parent, kept_name_view] = split_parent(relpath);
  const std::string kept_name(kept_name_view);
  if (::linkat(dest_dir, name.c_str(), container(parent), kept_name.c_str(), 0) != 0) {
    throw Failure(system_message("keep " + in_quotes(relpath) + " in " + in_quotes(m_display), errno));
  }
}

void SyncJournal::keep_by_rename(int dest_dir, const std::string& name, std::string_view relpath) {
  std::lock_guard lock(m_mutex);
  write_record(SyncRecord{SyncRecord::Kind::kept, std::string(relpath), {}});
  const auto [parent, kept_name_view] = split_parent(relpath);
  const std::string kept_name(kept_name_view);
  if (::renameat(dest_dir, name.c_str(), container(parent), kept_name.c_str()) != 0) {
    throw Failure(system_message("move " + in_quotes(relpath) + " into " + in_quotes(m_display), errno));
  }
}

}  // namespace transfer

void restore_sync_backup(int dest_dir, int backup_dir) {
  using transfer::split_parent;
  const std::string dest_display = fd_display(dest_dir);
  const std::string backup_display = fd_display(backup_dir);
  const Fd backup = reopen_directory(backup_dir, backup_display).value();
  const std::string journal_display = backup_display + "/" + transfer::k_journal_name;
  auto read = read_file_at(backup.get(), transfer::k_journal_name, journal_display, size_t{1} << 32U);
  if (!read && read.error().errnum == ENOENT) {
    return;  // the sync was killed before it began: it changed nothing
  }
  const std::string journal = std::move(read).value();
  const std::vector<std::string_view> records = split_sync_journal(journal);
  // The tag of the sync's temporaries; a journal of an older hoist has none, and its temporaries only the prefix.
  std::string tag;
  if (!records.empty()) {
    if (const auto first = decode_sync_record(records.front()); first && first->kind == SyncRecord::Kind::temporaries) {
      tag = first->relpath;
    }
  }
  const auto is_temporary = [&tag](std::string_view name) {
    return tag.empty() ? name.starts_with(k_temp_prefix) : is_temporary_name(name, tag);
  };
  const Fd tree_root =
      open_directory(backup.get(), transfer::k_kept_tree_name, backup_display + "/" + transfer::k_kept_tree_name)
          .value();
  const Fd dest = reopen_directory(dest_dir, dest_display).value();
  DirCursor dests(dest.get(), dest_display);
  DirCursor kept(tree_root.get(), backup_display + "/" + transfer::k_kept_tree_name);
  auto dest_path = [&](std::string_view relpath) {
    return relpath.empty() ? dest_display : dest_display + "/" + std::string(relpath);
  };
  for (auto it = records.rbegin(); it != records.rend(); ++it) {
    const std::optional<SyncRecord> record = decode_sync_record(*it);
    if (!record) {
      throw Failure("failed to restore from " + in_quotes(journal_display) + ": record " +
                    std::to_string(records.rend() - it) + " is malformed");
    }
    if (record->kind == SyncRecord::Kind::temporaries) {
      continue;
    }
    const std::string_view relpath = record->relpath;
    if (record->kind == SyncRecord::Kind::directory) {
      const int dir = dests.open_if_present(relpath).value();
      const int old = kept.open_if_present(relpath).value();
      if (dir < 0 || old < 0) {
        continue;
      }
      // Every temporary of the sync was made after its directory's D record: a killed sync's are found here.
      for (const DirEntry& entry : read_directory(dir, dest_path(relpath)).value()) {
        if (is_temporary(entry.name)) {
          remove_tree(dir, entry.name.c_str(), dest_path(join_path(relpath, entry.name))).value();
        }
      }
      struct stat st {};
      if (::fstat(old, &st) != 0) {
        throw Failure(system_message("stat the kept directory " + in_quotes(relpath), errno));
      }
      NodeMeta meta = NodeMeta::from_stat(st);
      meta.mtime = record->mtime;
      apply_metadata(NodeRef{-1, nullptr, dir}, meta, read_xattrs(NodeRef{-1, nullptr, old}, relpath).value(),
                     ExistingXattrs::reconcile, dest_path(relpath))
          .value();
      continue;
    }
    const auto [parent, name_view] = split_parent(relpath);
    const std::string name(name_view);
    const int dir = dests.open_if_present(parent).value();
    if (dir < 0) {
      continue;
    }
    if (record->kind == SyncRecord::Kind::added) {
      remove_tree(dir, name.c_str(), dest_path(relpath)).value();
    } else {
      const int old_dir = kept.open_if_present(parent).value();
      struct stat old {};
      if (old_dir < 0 || ::fstatat(old_dir, name.c_str(), &old, AT_SYMLINK_NOFOLLOW) != 0) {
        continue;  // killed between the record and the keeping: the destination still has the old entry
      }
      struct stat now {};
      const bool present = ::fstatat(dir, name.c_str(), &now, AT_SYMLINK_NOFOLLOW) == 0;
      // rename replaces a non-directory atomically; a directory in the way (or a directory
      // coming back) needs the way cleared first.
      if (present && (S_ISDIR(now.st_mode) || S_ISDIR(old.st_mode))) {
        remove_tree(dir, name.c_str(), dest_path(relpath)).value();
      }
      if (::renameat(old_dir, name.c_str(), dir, name.c_str()) != 0) {
        throw Failure(system_message("put back " + in_quotes(dest_path(relpath)), errno));
      }
    }
  }
}

}  // namespace hoist
