#pragma once

// Internal to the transfer engine: one entry of a payload directory, read,
// compared with an existing entry, and written somewhere else.

#include <sys/stat.h>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hoist/sys/data_copier.hpp"
#include "hoist/sys/metadata.hpp"
#include "hoist/transfer/payload.hpp"
#include "hoist/transfer/transfer.hpp"
#include "hoist/util/fd.hpp"
#include "hoist/util/work_pool.hpp"
#include "read_ahead.hpp"
#include "transfer_counters.hpp"

namespace hoist::transfer {

/// An entry of the payload, everything rsync -aHAX copies of it.
struct SourceNode {
  NodeMeta meta;
  Xattrs xattrs;
  dev_t dev = 0;        ///< the payload filesystem, for DataCopier
  Fd fd;                ///< regular files: open for reading, once open_source() opened it
  std::string symlink;  ///< symlinks: the target
  int dirfd = -1;       ///< regular files: where open_source() opens it (non-owning)
  const char* name = nullptr;
};

/// Reads entry `name` of the payload directory `dirfd`; `st` is its lstat.
/// A regular file is not opened unless reading its xattrs needs it (an
/// unchanged file's data is never read): open_source() opens it. `dirfd` and
/// `name` must outlive the node. Throws Failure naming `display`.
SourceNode read_source(int dirfd, const char* name, const struct stat& st, std::string_view display);

/// The regular file `node` open for reading (opened on the first call).
int open_source(SourceNode& node, std::string_view display);

/// The existing entry `name` in `dirfd` (-1: there is none), as far as a comparison needs it.
struct ExistingNode {
  bool present = false;
  struct stat st {};
};

/// lstat of `name` in `dirfd`; absent when `dirfd` is -1 or the name does not exist.
ExistingNode stat_existing(int dirfd, const char* name, std::string_view display);

/// The entry of ReadAhead's skip directory as it saw it; nullopt when it did not look.
std::optional<ExistingNode> existing_seen(const ReadAhead::Seen* seen);

/// Whether `existing` (entry `name` of `dirfd`) already is `source`: same type,
/// quick-check attributes and xattrs, the same target for symlinks, and with
/// Compare::checksum the same content. Directories compare by metadata only.
Outcome compare_node(SourceNode& source, const ExistingNode& existing, int dirfd, const char* name, Compare compare,
                     std::string_view source_display, std::string_view display);

/// Who owns an inode that write_node() creates.
enum class NewOwner {
  creator,  ///< the process's euid and egid (no setgid directory above it)
  unknown,  ///< maybe a setgid directory's group: always chown
};

/// The process's umask (which narrows the modes given to open) and effective
/// ids: what the inodes it creates get. Read once, not per file.
struct Creator {
  mode_t umask = 077;
  uid_t uid = 0;
  gid_t gid = 0;

  /// This process's, read with current_umask(): call while single-threaded.
  static Creator of_process();
};

/// Where write_node() writes.
struct WriteTarget {
  int dirfd = -1;
  const char* name = nullptr;
  dev_t dev = 0;  ///< st_dev of the target filesystem
  ExistingXattrs inherited = ExistingXattrs::none;
  NewOwner owner = NewOwner::unknown;
  Creator creator;
};

/// What write_node() makes a new inode of mode `mode` with in `target`: the
/// creator's ids, and the final permission bits where the umask lets them
/// through (else 0600, until apply_metadata() sets them).
InitialMode initial_mode(const WriteTarget& target, mode_t mode);

/// Creates `source` (not a directory) as `target`, which must not exist: data,
/// then metadata (apply_metadata's order). Returns the data bytes written (0 when
/// cloned). `progress` gets the bytes copied so far of big files.
uint64_t write_node(SourceNode& source, const WriteTarget& target, DataCopier& copier, std::string_view source_display,
                    std::string_view target_display, const CopyProgress& progress = {});

/// Counts the entries and regular-file bytes of `name` in `dirfd` and, for a
/// directory, of everything under it: what removing it removes.
void count_tree(int dirfd, const char* name, uint64_t& files, uint64_t& bytes, std::string_view display);

/// The old directory `name` in `dirfd` whose place an entry of another type
/// takes: what is under it counts as removed (the directory itself as changed).
void count_replaced(Counters& counters, int dirfd, const std::string& name, std::string_view display);

/// The payload directory, opened (again) from its path.
Fd open_payload_root(const Payload& payload);

/// One name of a payload inode that has several: the walk sets them aside, and
/// they are made after it, when the first name of each inode exists.
struct LinkMember {
  std::string parent;  ///< relative path of the directory
  std::string name;
  struct stat st;
  bool fresh = false;  ///< sync: the directory was made by this sync
};

/// Sorts `members` by inode, then by path, and calls `group(first, end)` for
/// the names of each inode, [first, end) in path order.
void for_each_link_group(std::vector<LinkMember>& members, const std::function<void(size_t, size_t)>& group);

/// The regular-file bytes under the open directory `dir`, each inode once:
/// TransferStats::bytes_total. Walks with the threads of `pool`, which must be idle.
uint64_t tree_bytes(int dir, std::string_view display, WorkPool& pool);

}  // namespace hoist::transfer
