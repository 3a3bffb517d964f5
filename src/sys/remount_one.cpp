#include "hoist/sys/remount_one.hpp"
#include "hoist/util/text.hpp"

#include <fcntl.h>
#include <sys/mount.h>

#include <cerrno>

namespace hoist {

namespace {

// The mount's own flags that MS_REMOUNT|MS_BIND sets all at once: any left out
// would be cleared.
constexpr unsigned long k_mount_flags =
    MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME | MS_NODIRATIME | MS_RELATIME | MS_STRICTATIME;

// The superblock's flags that a filesystem remount would otherwise clear.
constexpr unsigned long k_filesystem_flags = MS_SYNCHRONOUS | MS_DIRSYNC | MS_LAZYTIME | MS_MANDLOCK | MS_I_VERSION;

std::string fd_path(int fd) {
  return "/proc/self/fd/" + std::to_string(fd);
}

Expected<void> remount(const MountEntry& entry, RemountScope scope, int mount_root, bool read_only) {
  unsigned long flags = MS_REMOUNT | (entry.vfs_flags & k_mount_flags & ~MS_RDONLY);
  if (scope == RemountScope::mount) {
    flags |= MS_BIND;
  } else {
    // A remount of the filesystem resets the superblock flags it is not given.
    flags |= entry.fs_flags & k_filesystem_flags;
  }
  if (read_only) {
    flags |= MS_RDONLY;
  }
  // Through the descriptor of the mount root: the path cannot have changed
  // since open_mount_root() checked it.
  if (::mount(nullptr, fd_path(mount_root).c_str(), nullptr, flags, nullptr) != 0) {
    const std::string what = std::string(scope == RemountScope::mount ? "remount mount '" : "remount filesystem '") +
                             entry.target + "' (" + entry.fstype + " on " + entry.source + ") " +
                             (read_only ? "read-only" : "read-write");
    const int error = errno;
    if (error == EACCES && !read_only) {
      // The kernel's answer when the block device under the filesystem is
      // read-only (a loop device set up with -r, a write-protected disk).
      return SysError{
          system_message(what, error) + " (the block device is read-only; it cannot be made writable by a remount)",
          error};
    }
    return sys_error(what);
  }
  return {};
}

}  // namespace

std::string_view to_string(RemountScope scope) {
  return scope == RemountScope::mount ? "the mount point" : "the filesystem";
}

Expected<Fd> open_mount_root(const MountEntry& entry) {
  Fd fd(::open(entry.target.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!fd) {
    return sys_error("open mount point " + in_quotes(entry.target));
  }
  auto id = mount_id_of(fd.get(), entry.target);
  if (!id) {
    return id.error();
  }
  if (*id != entry.id) {
    return SysError{"failed to open mount point " + in_quotes(entry.target) + ": another mount covers it", EBUSY};
  }
  return fd;
}

Expected<RemountScope> remount_writable(const MountEntry& entry, int mount_root) {
  const RemountScope scope = entry.filesystem_read_only ? RemountScope::filesystem : RemountScope::mount;
  if (auto done = remount(entry, scope, mount_root, false); !done) {
    return done.error();
  }
  return scope;
}

Expected<void> remount_read_only(const MountEntry& entry, RemountScope scope, int mount_root) {
  return remount(entry, scope, mount_root, true);
}

}  // namespace hoist
