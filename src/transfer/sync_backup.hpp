#pragma once

// Internal to the transfer engine: what sync_tree() keeps so that
// restore_sync_backup() can undo it.
//
// The backup directory holds
//   tree/     the replaced and deleted entries, at their relative paths, and
//             for each directory whose entries or metadata change an empty
//             directory with its old owner, mode and xattrs;
//   journal   one record per change, written before the change
//             (hoist/transfer/sync_journal.hpp: added, kept at tree/<path>, directory mtime).
// Restoring replays the journal backwards, so each directory gets its old
// mtime back after everything inside it is back.

#include <sys/types.h>

#include <mutex>
#include <string>
#include <string_view>
#include <unordered_set>

#include "hoist/transfer/sync_journal.hpp"
#include "hoist/util/fd.hpp"

namespace hoist::transfer {

/// The name of the journal file in the backup directory.
inline constexpr const char* k_journal_name = "journal";
/// The directory of kept entries in the backup directory.
inline constexpr const char* k_kept_tree_name = "tree";

/// Writes the backup of one sync. Thread-safe.
class SyncJournal {
 public:
  /// Starts the backup in `backup_dir` (an empty directory on the destination's filesystem).
  SyncJournal(int backup_dir, std::string backup_display);

  /// Call before the first change inside directory `relpath` of the
  /// destination (open as `dest_dir`) or to its metadata: keeps its owner,
  /// mode, xattrs and mtime, once.
  void before_change(std::string_view relpath, int dest_dir);

  /// Whether before_change() was called for `relpath`.
  [[nodiscard]] bool changed(std::string_view relpath);

  /// Records that `relpath` is about to be created.
  void added(std::string_view relpath);

  /// Keeps the entry `name` of `dest_dir`, the old `relpath` about to be
  /// replaced, as a hard link in the backup: the destination keeps it until the
  /// rename over it. Not for directories.
  void keep_by_link(int dest_dir, const std::string& name, std::string_view relpath);

  /// Moves the entry `name` of `dest_dir`, the old `relpath`, into the backup
  /// (a deletion, or a directory that an entry of another type replaces).
  void keep_by_rename(int dest_dir, const std::string& name, std::string_view relpath);

  /// The tag of this sync's temporary names (temporary_name()), recorded first in the journal so that a
  /// restore removes the sync's temporaries and no host file that merely looks like one.
  [[nodiscard]] const std::string& tag() const noexcept { return m_tag; }

  /// The backup directory's identity, so that a walk of the destination can skip it.
  [[nodiscard]] dev_t dev() const noexcept { return m_dev; }
  [[nodiscard]] ino_t ino() const noexcept { return m_ino; }

 private:
  /// Appends `record` (the tag's record first, once). Call with m_mutex held.
  void write_record(const SyncRecord& record);
  /// tree/<relpath>, made where missing; the last one stays open for the next call. Call with m_mutex held.
  int container(std::string_view relpath);

  std::string m_display;
  std::string m_tag;
  bool m_tag_recorded = false;
  Fd m_backup;
  Fd m_tree;
  Fd m_journal;
  dev_t m_dev = 0;
  ino_t m_ino = 0;
  std::mutex m_mutex;
  std::unordered_set<std::string> m_changed;
  std::string m_container_path;
  Fd m_container;
};

}  // namespace hoist::transfer
