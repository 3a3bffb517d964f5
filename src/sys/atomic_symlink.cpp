#include "hoist/sys/atomic_symlink.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "hoist/sys/atomic_file.hpp"
#include "hoist/util/text.hpp"

namespace hoist {

Expected<void> replace_symlink(int dirfd, const std::string& name, const std::string& target,
                               std::string_view display) {
  return rename_new_entry(dirfd, name, "a symlink to " + in_quotes(target), display,
                          [&](const std::string& temp) { return ::symlinkat(target.c_str(), dirfd, temp.c_str()); });
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
