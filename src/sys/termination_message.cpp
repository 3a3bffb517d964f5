#include "hoist/sys/termination_message.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "hoist/util/fd.hpp"

namespace hoist {

Expected<void> write_termination_message(const std::string& path, std::string_view text) {
  // No O_CREAT: the kubelet made the file; without it there is no pod to tell.
  Fd fd(::open(path.c_str(), O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (!fd) {
    return sys_error("open '" + path + "'");
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return SysError{"failed to write '" + path + "': not a regular file", EINVAL};
  }
  if (::ftruncate(fd.get(), 0) != 0) {
    return sys_error("truncate '" + path + "'");
  }
  text = text.substr(0, std::min(text.size(), k_termination_message_max));
  while (!text.empty()) {
    const ssize_t n = ::write(fd.get(), text.data(), text.size());
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return sys_error("write '" + path + "'");
    }
    text.remove_prefix(static_cast<size_t>(n));
  }
  return {};
}

}  // namespace hoist
