#include "hoist/sys/mount_table.hpp"

#include <fcntl.h>
#include <libmount.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <memory>

#include "hoist/util/error.hpp"
#include "hoist/util/file_io.hpp"
#include "hoist/util/text.hpp"

namespace hoist {

namespace {

struct TableDeleter {
  void operator()(libmnt_table* table) const { mnt_unref_table(table); }
};
struct IterDeleter {
  void operator()(libmnt_iter* iter) const { mnt_free_iter(iter); }
};
struct FileCloser {
  void operator()(FILE* file) const { std::fclose(file); }
};

std::string text_of(const char* value) {
  return value == nullptr ? std::string() : std::string(value);
}

// Whether an option string has the option `ro` (libmount's own matcher: it
// knows `ro` from `rootcontext=…`).
bool has_ro(const std::string& options) {
  return mnt_optstr_get_option(options.c_str(), "ro", nullptr, nullptr) == 0;
}

}  // namespace

std::string MountEntry::describe() const {
  std::string text = "" + in_quotes(target) + " (" + fstype + " on " + source;
  if (!root.empty() && root != "/") {
    text += ", a bind of " + root;
  }
  return text + ", " + (mount_read_only ? "ro" : "rw") + ")";
}

Expected<MountEntry> find_mount(int mountinfo_fd, int mount_id, std::string_view display) {
  // libmount parses a stream; give it its own descriptor so that fclose does
  // not close the caller's.
  const int copy = ::fcntl(mountinfo_fd, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) {
    return sys_error("read mount table " + in_quotes(display));
  }
  // From the start, whoever read the descriptor before (a dup shares the offset).
  (void)::lseek(copy, 0, SEEK_SET);
  std::unique_ptr<FILE, FileCloser> stream(::fdopen(copy, "r"));
  if (!stream) {
    ::close(copy);
    return sys_error("read mount table " + in_quotes(display));
  }
  std::unique_ptr<libmnt_table, TableDeleter> table(mnt_new_table());
  if (!table) {
    return SysError{"failed to read mount table " + in_quotes(display) + ": out of memory", ENOMEM};
  }
  const std::string name(display);
  if (const int r = mnt_table_parse_stream(table.get(), stream.get(), name.c_str()); r != 0) {
    return sys_error("parse mount table " + in_quotes(name), r < 0 ? -r : EINVAL);
  }
  std::unique_ptr<libmnt_iter, IterDeleter> iter(mnt_new_iter(MNT_ITER_FORWARD));
  libmnt_fs* fs = nullptr;
  while (mnt_table_next_fs(table.get(), iter.get(), &fs) == 0) {
    if (mnt_fs_get_id(fs) != mount_id) {
      continue;
    }
    MountEntry entry;
    entry.id = mount_id;
    entry.target = text_of(mnt_fs_get_target(fs));
    entry.source = text_of(mnt_fs_get_source(fs));
    entry.fstype = text_of(mnt_fs_get_fstype(fs));
    entry.root = text_of(mnt_fs_get_root(fs));
    entry.vfs_options = text_of(mnt_fs_get_vfs_options(fs));
    entry.fs_options = text_of(mnt_fs_get_fs_options(fs));
    unsigned long flags = 0;
    mnt_optstr_get_flags(entry.vfs_options.c_str(), &flags, mnt_get_builtin_optmap(MNT_LINUX_MAP));
    entry.vfs_flags = flags;
    flags = 0;
    mnt_optstr_get_flags(entry.fs_options.c_str(), &flags, mnt_get_builtin_optmap(MNT_LINUX_MAP));
    entry.fs_flags = flags;
    entry.mount_read_only = has_ro(entry.vfs_options);
    entry.filesystem_read_only = has_ro(entry.fs_options);
    return entry;
  }
  return SysError{"failed to find mount " + std::to_string(mount_id) + " in " + in_quotes(name), ENOENT};
}

Expected<int> mount_id_of(int fd, std::string_view display) {
  struct statx stx {};
  if (::statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_MNT_ID, &stx) == 0 &&
      (stx.stx_mask & STATX_MNT_ID) != 0) {
    return static_cast<int>(stx.stx_mnt_id);
  }
  auto info = read_file_at(AT_FDCWD, "/proc/self/fdinfo/" + std::to_string(fd), "fdinfo", 64U << 10U);
  if (!info) {
    return SysError{"failed to find the mount of " + in_quotes(display) + ": " + info.error().message,
                    info.error().errnum};
  }
  const auto at = info->find("mnt_id:");
  if (at == std::string::npos) {
    return SysError{"failed to find the mount of " + in_quotes(display) + ": no mnt_id in fdinfo", ENOTSUP};
  }
  return std::atoi(info->c_str() + at + 7);
}

}  // namespace hoist
