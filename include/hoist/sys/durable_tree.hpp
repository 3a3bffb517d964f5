#pragma once

#include <string_view>

#include "hoist/util/expected.hpp"

namespace hoist {

/// How a freshly written tree is made durable before it is switched to.
enum class Durability {
  per_file_fsync,  ///< fsync every file and directory of the tree, one by one
  syncfs,          ///< one syncfs(2) of the filesystem that holds the tree
};

/// The strategy hoist uses: syncfs(2) where the kernel reports writeback errors
/// through it (Linux 5.8 and later; before, syncfs returned 0 even when a page
/// failed to reach the disk, so it could not be trusted), else per-file fsync.
/// syncfs is much faster on trees of many small files (docs/how-it-works.md, "Durability").
Durability default_durability();

/// Whether the running kernel's syncfs(2) reports writeback errors: the release
/// string (`uname -r`, e.g. "6.1.0-18-amd64") is 5.8 or later.
bool syncfs_reports_errors(std::string_view kernel_release);

/// Makes everything under the directory `dirfd` (readable, not O_PATH) durable
/// the way `durability` says. Per-file fsync opens every regular file and
/// directory under it (never following symlinks; a symlink's inode is made
/// durable by the fsync of its directory). `display` names the tree in errors.
Expected<void> make_tree_durable(int dirfd, Durability durability, std::string_view display);

}  // namespace hoist
