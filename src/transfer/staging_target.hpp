#pragma once

// Internal to the transfer engine: what the directory stager and the archive
// stager write into, and the old version they take unchanged files from.

#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_set>

#include "hoist/sys/metadata.hpp"
#include "hoist/util/fd.hpp"
#include "tree_node.hpp"

namespace hoist::transfer {

/// The inodes of link_dest that a staged version took over (by a hard link) for
/// an unchanged file. Each is taken once: two names of the payload that are two
/// files must stay two inodes, even when they were one hard-link group in the old
/// version (rsync --link-dest joins them). Thread-safe.
class LinkDestClaims {
 public:
  /// Whether the staging may hard-link the link_dest file `st` (its lstat, taken
  /// before any link of this run): true the first time for an inode, and always
  /// for an inode that had one name then (no other name can lead to it).
  bool claim(const struct stat& st);

 private:
  std::mutex m_mutex;
  std::unordered_set<ino_t> m_taken;  ///< link_dest is one filesystem
};

/// The staging directory of stage_tree() and the link_dest it compares with:
/// both open, the staging filesystem, their names in messages, the ids and
/// umask new inodes are made with, and the hard link that takes an unchanged
/// file over from link_dest. Thread-safe once constructed.
class StagingTarget {
 public:
  /// Opens `staging_dir` and `link_dest` (-1: none) again, leaving both to the
  /// caller. Throws Failure naming the directory that could not be opened.
  StagingTarget(int staging_dir, int link_dest);

  /// The staging directory (owned here).
  [[nodiscard]] int staging() const noexcept { return m_staging.get(); }
  /// link_dest (owned here), or -1 without one.
  [[nodiscard]] int compare() const noexcept { return m_compare.get(); }
  [[nodiscard]] bool has_compare() const noexcept { return m_compare.valid(); }
  /// The staging directory's st_dev, for DataCopier.
  [[nodiscard]] dev_t staging_dev() const noexcept { return m_staging_dev; }

  /// The path of `relpath` in the staging directory ("" is the directory), for messages.
  [[nodiscard]] std::string staging_display(std::string_view relpath = {}) const;
  /// The path of `relpath` in link_dest, for messages.
  [[nodiscard]] std::string compare_display(std::string_view relpath = {}) const;

  /// Removes the staging directory's default ACL: every new entry would inherit
  /// it. (The payload root's own ACLs are set at the end.) Throws Failure.
  void remove_default_acl() const;

  /// Where write_node() creates entry `name` of the staging directory `dirfd`:
  /// a directory of ours, so the inode is the creator's.
  [[nodiscard]] WriteTarget write_target(int dirfd, const char* name) const;

  /// What a new regular file of mode `mode` is created with (initial_mode() of write_target()).
  [[nodiscard]] InitialMode new_file_mode(mode_t mode) const;

  /// The ids and umask new inodes get.
  [[nodiscard]] const Creator& creator() const noexcept { return m_creator; }

  /// Hard-links link_dest's unchanged file `name` of `compare_dir` (`existing`
  /// is its lstat, `relpath` its path in both trees) as `name` of the staging
  /// directory `target_dir`. False when it has to be copied instead: across
  /// filesystems (then never again), at the link limit, or when another name of
  /// this payload took that inode. Throws Failure on any other error.
  bool link_unchanged(int compare_dir, int target_dir, const std::string& name, std::string_view relpath,
                      const struct stat& existing);

 private:
  std::string m_staging_display;
  std::string m_compare_display;
  Fd m_staging;
  Fd m_compare;
  dev_t m_staging_dev = 0;
  Creator m_creator = Creator::of_process();
  std::atomic<bool> m_link_works{true};
  LinkDestClaims m_claims;
};

}  // namespace hoist::transfer
