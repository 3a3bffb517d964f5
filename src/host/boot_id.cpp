#include "hoist/host/boot_id.hpp"

#include <fcntl.h>

#include "hoist/util/file_io.hpp"

namespace hoist {

std::string read_boot_id(const HostRoot& root) {
  constexpr const char* k_path = "/proc/sys/kernel/random/boot_id";
  std::string text;
  if (auto fd = root.open(k_path, k_read_flags); fd) {
    if (auto read = read_fd(fd->get(), root.display(k_path), 4096)) {
      text = *read;
    }
  } else if (auto own = read_file_at(AT_FDCWD, k_path, k_path, 4096)) {
    text = *own;
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) {
    text.pop_back();
  }
  return text;
}

}  // namespace hoist
