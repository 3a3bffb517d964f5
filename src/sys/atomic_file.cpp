#include "hoist/sys/atomic_file.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "hoist/util/fd.hpp"
#include "hoist/util/file_io.hpp"
#include "hoist/util/text.hpp"

namespace hoist {

Expected<void> write_file_atomic(int dirfd, const std::string& name, std::string_view data, mode_t mode,
                                 std::string_view display) {
  std::string temp;
  Fd fd;
  for (int attempt = 0; attempt < 8 && !fd; ++attempt) {
    temp = temporary_name(name);
    fd.reset(::openat(dirfd, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
    if (!fd && errno != EEXIST) {
      return sys_error("create a temporary file for " + in_quotes(display));
    }
  }
  if (!fd) {
    return sys_error("create a temporary file for " + in_quotes(display), EEXIST);
  }
  auto discard = [&]() { ::unlinkat(dirfd, temp.c_str(), 0); };
  // The umask may have narrowed the mode given to openat.
  if (::fchmod(fd.get(), mode) != 0) {
    discard();
    return sys_error("set the mode of " + in_quotes(display));
  }
  if (auto written = write_all(fd.get(), data, display); !written) {
    discard();
    return written;
  }
  if (auto synced = fsync_fd(fd.get(), display); !synced) {
    discard();
    return synced;
  }
  if (::renameat(dirfd, temp.c_str(), dirfd, name.c_str()) != 0) {
    const int saved = errno;
    discard();
    return sys_error("rename a temporary file to " + in_quotes(display), saved);
  }
  // The rename is durable only once the directory entry is on disk.
  if (::fsync(dirfd) != 0 && errno != EBADF && errno != EINVAL) {
    return sys_error("fsync the directory of " + in_quotes(display));
  }
  return {};
}

Expected<void> rename_new_entry(int dirfd, const std::string& name, std::string_view what, std::string_view display,
                                const std::function<int(const std::string& temp)>& make) {
  std::string temp;
  for (int attempt = 0;; ++attempt) {
    temp = temporary_name(name);
    if (make(temp) == 0) {
      break;
    }
    if (errno != EEXIST || attempt == 8) {
      return sys_error("create " + std::string(what) + " beside " + in_quotes(display));
    }
  }
  if (::renameat(dirfd, temp.c_str(), dirfd, name.c_str()) != 0) {
    const int saved = errno;
    ::unlinkat(dirfd, temp.c_str(), 0);
    return sys_error("rename " + std::string(what) + " over " + in_quotes(display), saved);
  }
  // The rename is durable only once the directory entry is on disk.
  if (::fsync(dirfd) != 0) {
    return sys_error("fsync the directory of " + in_quotes(display));
  }
  return {};
}

Expected<void> link_file_atomic(int dirfd, const std::string& from, const std::string& name, std::string_view display) {
  return rename_new_entry(dirfd, name, "a link to " + in_quotes(from), display, [&](const std::string& temp) {
    return ::linkat(dirfd, from.c_str(), dirfd, temp.c_str(), 0);
  });
}

void remove_stale_temporaries(int dirfd) {
  const int copy = ::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (copy < 0) {
    return;
  }
  DIR* dir = ::fdopendir(copy);
  if (dir == nullptr) {
    ::close(copy);
    return;
  }
  while (const dirent* entry = ::readdir(dir)) {
    if (std::string_view(entry->d_name).starts_with(k_temp_prefix)) {
      ::unlinkat(dirfd, entry->d_name, 0);
    }
  }
  ::closedir(dir);
}

}  // namespace hoist
