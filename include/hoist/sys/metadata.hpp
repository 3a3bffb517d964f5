#pragma once

#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hoist/util/expected.hpp"

namespace hoist {

/// The inode metadata that rsync -aHAX keeps (besides xattrs): what hoist
/// compares in its quick check and applies to what it writes. Numeric ids only.
struct NodeMeta {
  mode_t mode = 0;  ///< file type and permission bits (with setuid, setgid, sticky)
  uid_t uid = 0;
  gid_t gid = 0;
  struct timespec mtime {};  ///< nanoseconds kept
  uint64_t size = 0;         ///< regular files only
  dev_t rdev = 0;            ///< character and block devices only

  [[nodiscard]] static NodeMeta from_stat(const struct stat& st) noexcept;
  [[nodiscard]] mode_t type() const noexcept { return mode & S_IFMT; }
};

/// rsync's quick check: same type, permission bits, owner, mtime (ns), and for
/// regular files the size, for devices the device number.
[[nodiscard]] bool same_attributes(const NodeMeta& a, const NodeMeta& b) noexcept;

/// One extended attribute, POSIX ACLs included (`system.posix_acl_access`,
/// `system.posix_acl_default`, in the kernel's binary xattr form).
struct Xattr {
  std::string name;
  std::string value;
  bool operator==(const Xattr&) const = default;
};

/// The xattrs of one inode, sorted by name.
using Xattrs = std::vector<Xattr>;

/// The xattr that an LSM gives every new inode by itself. Kept when the payload
/// has none (removing it would leave the file unlabeled), set when it has one.
inline constexpr std::string_view k_selinux_xattr = "security.selinux";

/// Whether `existing` carries the xattrs of `payload`, as apply_metadata() would
/// leave them: equal, except that a security.selinux label only on `existing` counts as equal.
[[nodiscard]] bool same_xattrs(const Xattrs& payload, const Xattrs& existing);

/// A directory entry, addressed by its parent directory and name, and possibly
/// also open as `fd` (then fd-based calls are used). Without an fd, xattrs are
/// read with getxattrat(2) and listxattrat(2) where the kernel has them (Linux
/// 6.13), else through `/proc/self/fd/<dirfd>/<name>` with the l*xattr calls;
/// neither ever follows the name.
struct NodeRef {
  int dirfd = -1;
  const char* name = nullptr;
  int fd = -1;
};

/// Whether read_xattrs() reads an entry given by directory and name as cheaply
/// as an open one: the *xattrat calls work (one system call per list or value).
/// Without them, it goes through /proc, which costs about as much as opening
/// the entry. Probed once; a seccomp filter that refuses them counts as no.
[[nodiscard]] bool xattrs_readable_by_name() noexcept;

/// Reads all xattrs of `node`, sorted. A filesystem without xattrs gives none.
/// `display` is the path named in errors.
Expected<Xattrs> read_xattrs(NodeRef node, std::string_view display);

/// The security.selinux label of the open file `fd`, without the NUL the kernel
/// ends it with; empty when it has none (or the filesystem keeps no labels).
/// Fails naming `display` when it cannot be read or is not printable text.
Expected<std::string> read_selinux_label(int fd, std::string_view display);

/// What may already be on an inode that apply_metadata() sets the xattrs of.
enum class ExistingXattrs {
  none,       ///< a new inode in a directory without a default ACL: only set what the payload has
  reconcile,  ///< anything: list the inode's xattrs and remove those the payload lacks
};

/// The owner and permission bits of an inode just created, when the caller
/// knows them: apply_metadata() then skips a chown or chmod that would change nothing.
struct InitialMode {
  uid_t uid = 0;
  gid_t gid = 0;
  mode_t perms = 0;
};

/// Gives `node` the owner, xattrs, mode and mtime of the payload's entry, in the
/// order that keeps them all: chown first (it clears setuid/setgid and
/// security.capability), then xattrs (ACLs change the group bits, capabilities
/// must follow chown), then chmod, then the mtime (atime is left alone, as rsync
/// -a does). Symlinks get no chmod. `display` is the path named in errors.
Expected<void> apply_metadata(NodeRef node, const NodeMeta& meta, const Xattrs& xattrs, ExistingXattrs existing,
                              std::string_view display, const InitialMode* initial = nullptr);

/// The process's umask, read without changing it for long (call while single-threaded).
mode_t current_umask() noexcept;

/// Sets only the mtime of `node` (a symlink's own time, never its target's).
Expected<void> apply_mtime(NodeRef node, const struct timespec& mtime, std::string_view display);

/// Reads a symlink's target.
Expected<std::string> read_symlink(int dirfd, const char* name, std::string_view display);

}  // namespace hoist
