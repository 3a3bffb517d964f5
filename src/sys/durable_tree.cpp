#include "hoist/sys/durable_tree.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <string>
#include <vector>

#include "hoist/util/fd.hpp"
#include "hoist/util/text.hpp"

namespace hoist {

namespace {

Expected<void> fsync_tree(int dirfd, const std::string& display) {
  const int copy = ::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (copy < 0) {
    return sys_error("open " + in_quotes(display));
  }
  DIR* stream = ::fdopendir(copy);
  if (stream == nullptr) {
    ::close(copy);
    return sys_error("list " + in_quotes(display));
  }
  std::vector<std::pair<std::string, unsigned char>> entries;
  while (const dirent* entry = ::readdir(stream)) {
    const std::string_view name = entry->d_name;
    if (name != "." && name != "..") {
      entries.emplace_back(name, entry->d_type);
    }
  }
  ::closedir(stream);
  for (auto [name, type] : entries) {
    const std::string shown = display + "/" + name;
    if (type == DT_UNKNOWN) {
      // Some filesystems do not fill d_type; never open a device to find out.
      struct stat st {};
      if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        return sys_error("stat " + in_quotes(shown));
      }
      type = S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG : DT_LNK;
    }
    if (type != DT_REG && type != DT_DIR) {
      continue;  // links, fifos, devices: their inodes are written with the directory
    }
    Fd fd(::openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY));
    if (!fd) {
      return sys_error("open " + in_quotes(shown));
    }
    if (type == DT_DIR) {
      if (auto synced = fsync_tree(fd.get(), shown); !synced) {
        return synced;
      }
      continue;
    }
    if (::fsync(fd.get()) != 0) {
      return sys_error("fsync " + in_quotes(shown));
    }
  }
  if (::fsync(dirfd) != 0) {
    return sys_error("fsync directory " + in_quotes(display));
  }
  return {};
}

}  // namespace

bool syncfs_reports_errors(std::string_view kernel_release) {
  int major = 0;
  int minor = 0;
  const char* end = kernel_release.data() + kernel_release.size();
  auto [after_major, error_major] = std::from_chars(kernel_release.data(), end, major);
  if (error_major != std::errc() || after_major == end || *after_major != '.') {
    return false;
  }
  auto [after_minor, error_minor] = std::from_chars(after_major + 1, end, minor);
  if (error_minor != std::errc()) {
    return false;
  }
  return major > 5 || (major == 5 && minor >= 8);
}

Durability default_durability() {
  utsname name{};
  if (::uname(&name) == 0 && syncfs_reports_errors(name.release)) {
    return Durability::syncfs;
  }
  return Durability::per_file_fsync;
}

Expected<void> make_tree_durable(int dirfd, Durability durability, std::string_view display) {
  if (durability == Durability::syncfs) {
    if (::syncfs(dirfd) != 0) {
      return sys_error("syncfs the filesystem of " + in_quotes(display));
    }
    return {};
  }
  return fsync_tree(dirfd, std::string(display));
}

}  // namespace hoist
