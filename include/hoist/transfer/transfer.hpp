#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "hoist/sys/sha256.hpp"
#include "hoist/transfer/content_index.hpp"
#include "hoist/transfer/payload.hpp"

namespace hoist {

/// The threads of a transfer, and of the verification of a directory payload: `asked` (--threads), or twice the
/// cores (at most 16) when 0. A walk of small files waits on the disk about as long as it computes, so a second
/// thread per core keeps both the disk and the core busy.
inline unsigned transfer_threads(unsigned asked) {
  if (asked != 0) {
    return asked;
  }
  return std::clamp(2 * std::thread::hardware_concurrency(), 2U, 16U);
}

/// What a transfer did (or, in a dry run, would do), relative to the tree it
/// compares against: the current version for staged kinds, the destination
/// itself for the sync kind.
struct TransferStats {
  uint64_t files_added = 0;      ///< entries of any type that did not exist
  uint64_t files_changed = 0;    ///< entries that existed with other content or metadata
  uint64_t files_removed = 0;    ///< entries that exist only in the compared tree
  uint64_t files_unchanged = 0;  ///< entries kept as they were (hard-linked in staged kinds)
  uint64_t bytes_added = 0;      ///< regular-file bytes of added entries
  uint64_t bytes_changed = 0;    ///< regular-file bytes of changed entries (new size)
  uint64_t bytes_removed = 0;    ///< regular-file bytes of removed entries
  uint64_t bytes_written = 0;    ///< file data actually written (not linked, not cloned)
  uint64_t bytes_total = 0;      ///< the payload's regular-file bytes, when known ahead (for progress)
  uint64_t bytes_done = 0;       ///< regular-file bytes processed so far (for progress)
  /// bytes_total is the size of the tree compared against (its content index's), not a count of the payload's:
  /// counting those takes a walk of their inodes of its own, which costs about as much as a re-run's comparison.
  bool bytes_total_estimated = false;
};

/// How an existing regular file is found to hold the payload's bytes. Its metadata (type, mode, owner, size,
/// mtime, xattrs) must match either way; what differs is what vouches for the content. Never size and mtime:
/// reproducible images give every file one mtime, so a changed file often keeps both.
enum class Compare {
  content,   ///< by SHA-256: the payload's from its SHA256SUMS, the old file's from its content index, else read
  checksum,  ///< by SHA-256 of both sides, each read in full (--checksum): no index, no listed digest trusted
};

/// Whether anything is written.
enum class DryRun { no, yes };

struct TransferOptions {
  Compare compare = Compare::content;
  DryRun dry_run = DryRun::no;
  /// Called every so often from the transferring thread with the running totals.
  std::function<void(const TransferStats&)> on_progress;
  /// Worker threads; 0 picks twice the number of cores (at most 16).
  unsigned threads = 0;
  /// Archive payloads: refuse when the unpacked size passes this many bytes (0: no limit)…
  uint64_t max_unpacked_bytes = 0;
  /// …or passes this multiple of the archive's size (a decompression bomb; 0: no limit). The ratio
  /// applies once the unpacked size passes k_unpack_ratio_floor: a small archive of a few
  /// compressible files may have any ratio.
  double max_unpack_ratio = 0;
  static constexpr uint64_t k_unpack_ratio_floor = 16ULL << 20U;
  /// The content index of link_dest (stage_tree) or of the destination (sync_tree) as hoist last wrote it;
  /// nullptr when there is none: then their files' bytes are read to compare them.
  const ContentIndex* known = nullptr;
  /// Directory payloads: the SHA-256 that the verified SHA256SUMS lists for each payload file (by relative path),
  /// or nullptr: then the payload's files are read to compare them.
  const DigestTable* payload_digests = nullptr;
  /// File and archive payloads: the SHA-256 that the verified SHA256SUMS lists for the payload file itself, or
  /// nullptr: then it is read to compare it (the file kind's installers; an archive's entries are always read).
  const Sha256Digest* payload_file_digest = nullptr;
  /// Directory payloads: a payload file whose ctime is before this wall-clock time (ns since the epoch) gets its
  /// stamp recorded beside the digest read from it (ContentIndex::Entry::source), and a payload file that `known`
  /// recorded so and that is unchanged since is not read again. 0 records none. It must lie before the transfer's
  /// start by more than the filesystems' timestamp granularity: a file written again within the tick of its last
  /// change could keep its ctime, and one whose ctime is that much older than its reading cannot.
  int64_t source_stamps_before_ns = 0;
  /// When given, gets the content index of what the transfer left: every regular file of the staged tree (or of
  /// the synced destination), the SHA-256 of its bytes and its stamp.
  ContentIndex* produced = nullptr;
  /// stage_tree, sync_tree: called with the staging (or synced) directory and its content index once the tree is
  /// complete, before the caller makes it durable, to check what was written (verification of a directory
  /// payload's copy); it throws to refuse it, and the caller then removes the staging or undoes the sync.
  std::function<void(int staging_dir, const ContentIndex& staged)> check_staged;
};

/// Writes the payload (a directory or an archive) as a complete new tree into
/// `staging_dir`, an empty directory opened O_DIRECTORY. rsync -aHAX semantics:
/// regular files, directories, symlinks (never followed), hard links within the
/// payload, fifos and device nodes, mode, numeric uid/gid, nanosecond mtimes,
/// xattrs and POSIX ACLs, chown before chmod. A file unchanged (by `compare`)
/// relative to the same path under `link_dest` (the current version's tree, or
/// -1 for none) is hard-linked from there instead of written (rsync --link-dest).
/// Data is copied with FICLONE, else copy_file_range, else read/write.
/// Does not fsync: the caller makes the whole staging durable before switching.
/// With DryRun::yes nothing is written and the stats say what would change.
/// Otherwise, once staged, an archive payload must be unchanged since it was
/// opened (Payload::check_unchanged) and options.check_staged must accept the tree.
///
/// Archive entries with `..`, absolute names, names through a symlink made
/// earlier in the archive, hard links to anything outside the payload, or names
/// with NUL or newline throw hoist::Error(ExitCode::verification) naming the
/// entry. Other failures throw hoist::Failure. On a throw, what was written so
/// far stays in `staging_dir` for the caller to remove.
TransferStats stage_tree(const Payload& payload, int staging_dir, int link_dest, const TransferOptions& options);

/// rsync -aHAX --delete of the payload into `dest_dir` in place (the sync kind):
/// each changed file is written to a temporary name in its directory and
/// renamed over the old one; deletions come after all updates. Every entry that
/// is replaced or deleted is first kept under `backup_dir` (a directory on the
/// same filesystem, empty), and the names of entries that did not exist before
/// are recorded there too, so that restore_sync_backup() can undo the sync.
/// Once synced, options.check_staged (when set, and not in a dry run) must accept `dest_dir`.
TransferStats sync_tree(const Payload& payload, int dest_dir, int backup_dir, const TransferOptions& options);

/// Undoes one sync_tree: puts back every kept entry and removes the entries the
/// sync added, each atomically (rename).
void restore_sync_backup(int dest_dir, int backup_dir);

}  // namespace hoist
