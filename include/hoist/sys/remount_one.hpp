#pragma once

#include <string_view>

#include "hoist/sys/mount_table.hpp"
#include "hoist/util/expected.hpp"
#include "hoist/util/fd.hpp"

namespace hoist {

/// What a remount made writable, and so what must be made read-only again.
enum class RemountScope {
  mount,  ///< only this mount point's own flag (MS_REMOUNT|MS_BIND): other mounts of the filesystem stay as they are
  filesystem,  ///< the filesystem itself (MS_REMOUNT): it was mounted read-only as a whole
};

std::string_view to_string(RemountScope scope);

/// Opens the root of the mount `entry` (its target, in this process's mount
/// namespace) O_PATH, checking that the path leads to that very mount: a
/// mount point covered by another mount is refused (EBUSY) rather than the
/// wrong mount being changed.
Expected<Fd> open_mount_root(const MountEntry& entry);

/// Makes the read-only mount `entry`, whose root is open at `mount_root`,
/// writable. When only the mount is read-only (a read-only bind mount of a
/// writable filesystem), only its flag is cleared: MS_REMOUNT|MS_BIND with its
/// other flags (nosuid, nodev, noexec, atime) kept. When the filesystem itself
/// is read-only, the filesystem is remounted read-write (MS_REMOUNT), which
/// also clears this mount's flag; other mounts of it keep their own flags.
/// Returns which was done.
Expected<RemountScope> remount_writable(const MountEntry& entry, int mount_root);

/// Undoes remount_writable(): the same scope, read-only again. A filesystem
/// that has files open for writing refuses (EBUSY).
Expected<void> remount_read_only(const MountEntry& entry, RemountScope scope, int mount_root);

}  // namespace hoist
