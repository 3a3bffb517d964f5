#include "hoist/util/file_io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "hoist/util/fd.hpp"
#include "hoist/util/text.hpp"

namespace hoist {

std::string_view file_type_name(mode_t mode) noexcept {
  switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFIFO: return "a FIFO";
    case S_IFSOCK: return "a socket";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFLNK: return "a symbolic link";
    default: return "of an unknown type";
  }
}

Expected<std::string> read_file_at(int dirfd, const std::string& relpath, std::string_view display, size_t max_bytes) {
  if (relpath.find('\0') != std::string::npos) {  // as a C string it would name another file
    return SysError{"failed to open " + in_quotes(display) + ": the path contains a NUL character", EINVAL};
  }
  Fd fd(::openat(dirfd, relpath.c_str(), k_read_flags));
  if (!fd) {
    return sys_error("open " + in_quotes(display));
  }
  return read_fd(fd.get(), display, max_bytes);
}

Expected<std::string> read_fd(int fd, std::string_view display, size_t max_bytes) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    return sys_error("stat " + in_quotes(display));
  }
  // Only a regular file has an end: a FIFO, a socket or a device would block or never end.
  if (!S_ISREG(st.st_mode)) {
    return SysError{"failed to read " + in_quotes(display) + ": it is " + std::string(file_type_name(st.st_mode)) +
                        ", not a regular file",
                    EINVAL};
  }
  std::string data;
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return sys_error("read " + in_quotes(display));
    }
    if (n == 0) {
      break;
    }
    if (data.size() + static_cast<size_t>(n) > max_bytes) {
      return SysError{"failed to read " + in_quotes(display) + ": larger than " + std::to_string(max_bytes) + " bytes",
                      EFBIG};
    }
    data.append(buffer, static_cast<size_t>(n));
  }
  return data;
}

Expected<void> write_all(int fd, std::string_view data, std::string_view display) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return sys_error("write " + in_quotes(display));
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return {};
}

Expected<void> fsync_fd(int fd, std::string_view display) {
  if (::fsync(fd) != 0) {
    return sys_error("fsync " + in_quotes(display));
  }
  return {};
}

}  // namespace hoist
