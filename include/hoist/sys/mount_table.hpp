#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

#include "hoist/util/expected.hpp"

namespace hoist {

/// One mount of a mountinfo table, as libmount parses it.
struct MountEntry {
  int id = 0;                         ///< the mount id (mountinfo's first field, statx's stx_mnt_id)
  std::string target;                 ///< the mount point, in the namespace the table was read in
  std::string source;                 ///< the device or source (`/dev/sda1`, `overlay`)
  std::string fstype;                 ///< `ext4`, `squashfs`, …
  std::string root;                   ///< the directory of the filesystem mounted here (`/` unless a bind of a subtree)
  std::string vfs_options;            ///< the mount's own options (`ro,nosuid,relatime`)
  std::string fs_options;             ///< the filesystem's (superblock's) options (`ro,errors=remount-ro`)
  unsigned long vfs_flags = 0;        ///< vfs_options as MS_* flags (MS_RDONLY, MS_NOSUID, …)
  unsigned long fs_flags = 0;         ///< fs_options' generic flags (MS_RDONLY, MS_SYNCHRONOUS, MS_LAZYTIME, …)
  bool mount_read_only = false;       ///< this mount is read-only (its own flag)
  bool filesystem_read_only = false;  ///< the filesystem itself is mounted read-only (superblock)

  /// `'/opt' (ext4 on /dev/loop0, ro)`, for messages.
  [[nodiscard]] std::string describe() const;
};

/// Finds the mount with id `mount_id` in the mountinfo text readable at
/// `mountinfo_fd` (a `/proc/<pid>/mountinfo` opened in the namespace wanted:
/// the kernel fixes the namespace at open), read from its start. ENOENT when
/// no mount has that id.
/// `display` names the table in errors.
Expected<MountEntry> find_mount(int mountinfo_fd, int mount_id, std::string_view display);

/// The id of the mount that holds the open file `fd` (statx STATX_MNT_ID,
/// Linux 5.8; else the `mnt_id` line of /proc/self/fdinfo, Linux 3.15).
Expected<int> mount_id_of(int fd, std::string_view display);

}  // namespace hoist
