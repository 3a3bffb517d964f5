#include "hoist/sys/atomic_symlink.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "hoist/sys/atomic_file.hpp"
#include "hoist/util/text.hpp"

namespace hoist {

Expected<void> replace_symlink(int dirfd, const std::string& name, const std::string& target,
                               std::string_view display) {
  std::string temp;
  for (int attempt = 0;; ++attempt) {
    temp = temporary_name(name);
    if (::symlinkat(target.c_str(), dirfd, temp.c_str()) == 0) {
      break;
    }
    if (errno != EEXIST || attempt == 8) {
      return sys_error("create a symlink to " + in_quotes(target) + " beside " + in_quotes(display));
    }
  }
  if (::renameat(dirfd, temp.c_str(), dirfd, name.c_str()) != 0) {
    const int saved = errno;
    ::unlinkat(dirfd, temp.c_str(), 0);
    return sys_error("rename a symlink to " + in_quotes(target) + " over " + in_quotes(display), saved);
  }
  // The rename is durable only once the directory entry is on disk.
  if (::fsync(dirfd) != 0) {
    return sys_error("fsync the directory of " + in_quotes(display));
  }
  return {};
}

Expected<std::string> read_symlink(int dirfd, const std::string& name, std::string_view display) {
  std::string target(256, '\0');
  for (;;) {
    const ssize_t n = ::readlinkat(dirfd, name.c_str(), target.data(), target.size());
    if (n < 0) {
      return sys_error("read symlink " + in_quotes(display));
    }
    if (static_cast<size_t>(n) < target.size()) {
      target.resize(static_cast<size_t>(n));
      return target;
    }
    target.resize(target.size() * 2);
  }
}

}  // namespace hoist
