#pragma once

// Internal to the transfer engine: the walk of a payload directory that the
// tree stager (stage_tree) and the tree syncer (sync_tree) share.

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <functional>
#include <mutex>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "hoist/sys/data_copier.hpp"
#include "hoist/sys/directory.hpp"
#include "hoist/sys/metadata.hpp"
#include "hoist/transfer/payload.hpp"
#include "hoist/transfer/transfer.hpp"
#include "hoist/util/work_pool.hpp"
#include "read_ahead.hpp"
#include "transfer_counters.hpp"
#include "tree_node.hpp"

namespace hoist::transfer {

/// A payload directory's own attributes and xattrs, which its copy gets last.
struct DirMeta {
  NodeMeta meta;
  Xattrs xattrs;
};

/// Those of the open directory `fd`, and its device in `dev` when asked.
DirMeta read_dir_meta(int fd, std::string_view display, dev_t* dev = nullptr);

/// Throws the Failure of an lstat of `name` in the directory named `display`.
[[noreturn]] void throw_stat_failure(std::string_view display, const std::string& name, int error);

/// Hands the entries of the payload directory `source_dir` (`display` in
/// errors) to `visit(name, st, seen)` in their order, each with its lstat: the
/// one the read-ahead took (`seen`, else nullptr) where it took one, and the
/// file it opened, which the visit may take (take_source()). The
/// read-ahead reads what `reading()` says the walk will read, but for the files
/// `recorded` holds; while it says nothing, it is asked again as the walk goes
/// (ReadAhead). False when `pool` was cancelled before the last entry.
template <typename Visit>
bool walk_entries(int source_dir, int skip_dir, const std::vector<DirEntry>& entries, std::string_view display,
                  const std::function<Reading()>& reading, RecordedSources recorded, const WorkPool& pool,
                  Visit&& visit) {
  ReadAhead ahead(source_dir, skip_dir, entries, reading(), recorded, reading);
  for (size_t i = 0; i < entries.size(); ++i) {
    if (pool.cancelled()) {
      return false;
    }
    ahead.before(i);
    const std::string& name = entries[i].name;
    ReadAhead::Seen* seen = ahead.seen(i);
    struct stat st {};
    if (seen != nullptr) {
      st = seen->source;
    } else if (::fstatat(source_dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      throw_stat_failure(display, name, errno);
    }
    visit(name, st, seen);
  }
  return true;
}

/// What the tree stager and the tree syncer share: the payload and the
/// options, the counters and the threads, and the hard-linked names that the
/// walk sets aside for after it.
class PayloadWalk {
 protected:
  PayloadWalk(const Payload& payload, const TransferOptions& options);

  [[nodiscard]] std::string payload_display(std::string_view relpath) const;

  /// Walks the payload from its root directory `root`: `walk_root` runs on
  /// the threads (beside the progress total's count, when progress is asked
  /// for), and the call returns once every task it started has finished.
  void walk(int root, std::function<void()> walk_root);

  /// The progress total: tree_bytes() of the payload on the calling thread, until `stop`.
  void count_total(int root, const std::stop_token& stop);

  /// Sets aside a name of an inode with several, for after the walk.
  void set_aside_link(std::string_view parent, const std::string& name, const struct stat& st, bool fresh);

  /// Whether the walk hands the entry `st` to a task of its own: a big file,
  /// so that two big files of one directory are copied by two threads.
  [[nodiscard]] bool own_task(const struct stat& st) const;

  const Payload& m_payload;
  const TransferOptions& m_options;
  const bool m_dry;
  dev_t m_source_dev = 0;
  Counters m_counters;
  DataCopier m_copier;
  WorkPool m_pool;
  std::mutex m_mutex;  ///< guards m_links, and what the walks of the derived classes gather
  std::vector<LinkMember> m_links;
};

}  // namespace hoist::transfer
