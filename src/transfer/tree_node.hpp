#pragma once

// Internal to the transfer engine: one entry of a payload directory, read,
// compared with an existing entry, and written somewhere else.

#include <sys/stat.h>

#include <functional>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "hoist/sys/data_copier.hpp"
#include "hoist/sys/metadata.hpp"
#include "hoist/sys/sha256.hpp"
#include "hoist/transfer/content_index.hpp"
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
  struct stat st {};    ///< the lstat it was read from
  Fd fd;                ///< regular files: open for reading, once open_source() opened it
  std::string symlink;  ///< symlinks: the target
  int dirfd = -1;       ///< regular files: where open_source() opens it (non-owning)
  const char* name = nullptr;
};

/// Reads entry `name` of the payload directory `dirfd`; `st` is its lstat.
/// A regular file is not opened unless reading its xattrs needs it (an
/// unchanged file's data is never read): open_source() opens it, or takes
/// `opened`, the file as the read-ahead opened it. `dirfd` and `name` must
/// outlive the node. Throws Failure naming `display`.
SourceNode read_source(int dirfd, const char* name, const struct stat& st, std::string_view display, Fd opened = Fd());

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

/// Where an entry is, for compare_node() and the content index: its directory's path relative to the tree
/// ("" the root) and its name.
struct EntryPath {
  std::string_view dir;
  std::string_view name;
  [[nodiscard]] std::string relpath() const;
};

/// What compare_node() found.
struct Compared {
  Outcome outcome = Outcome::added;
  /// A regular file's SHA-256, when the comparison learned it (from the payload's SHA256SUMS or by reading it):
  /// the digest of the bytes `existing` holds too when the outcome is unchanged.
  std::optional<Sha256Digest> digest;
  /// The payload file's stamp to record beside `digest` (recordable_source()): known when the digest was read from
  /// it or vouched for by its stamp, not when the payload's SHA256SUMS listed it.
  SourceStamp source;
};

/// Whether `existing` (entry `at.name` of `dirfd`) already is `source`: the same type, attributes (size, mtime,
/// mode, owner) and xattrs, the same target for symlinks, and for regular files the same bytes. The bytes are
/// compared by SHA-256: the payload's digest is what `options.payload_digests` lists (the verified SHA256SUMS),
/// else what `options.known` recorded of the payload file while it is the inode it was read from (its source
/// stamp), else it is read; the existing file's is what `options.known` vouches for (its content index, while
/// the inode is still the one indexed), else it is read. Compare::checksum reads both. Size and mtime never
/// vouch for content. Directories compare by metadata only.
Compared compare_node(SourceNode& source, const ExistingNode& existing, int dirfd, EntryPath at,
                      const TransferOptions& options, std::string_view source_display, std::string_view display);

/// The payload's digest of regular file `relpath`, as `options.payload_digests` lists it; nullopt without them,
/// with Compare::checksum, or when the name is not listed.
std::optional<Sha256Digest> listed_digest(const TransferOptions& options, const std::string& relpath);

/// `source`'s stamp when `options.source_stamps_before_ns` lets it be recorded beside the digest of its bytes
/// (its ctime lies before that time), else an unknown one.
SourceStamp recordable_source(const SourceNode& source, const TransferOptions& options);

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
/// cloned). `progress` gets the bytes copied so far of big files. For a regular
/// file, `written` (when given) gets the SHA-256 of the bytes written and the
/// new inode's stamp once its metadata is set.
uint64_t write_node(SourceNode& source, const WriteTarget& target, DataCopier& copier, std::string_view source_display,
                    std::string_view target_display, const CopyProgress& progress = {},
                    ContentIndex::Entry* written = nullptr);

/// The stamp of entry `name` of `dirfd` now (an lstat), for the content index. Throws Failure naming `display`.
FileStamp stamp_of(int dirfd, const char* name, std::string_view display);

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
/// TransferStats::bytes_total. Walks with the threads of `pool`, which must be idle;
/// stops early, with what it counted so far, once `stop` is requested.
uint64_t tree_bytes(int dir, std::string_view display, WorkPool& pool, const std::stop_token& stop);

}  // namespace hoist::transfer
