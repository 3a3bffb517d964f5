#include "hoist/sys/wake_flag.hpp"

#include <poll.h>
#include <sys/eventfd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

namespace hoist {

Expected<WakeFlag> WakeFlag::create() {
  // EFD_NONBLOCK: clear() must not block when the flag is already down.
  Fd fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!fd) {
    return sys_error("create an eventfd");
  }
  return WakeFlag(std::move(fd));
}

void WakeFlag::raise() const noexcept {
  const std::uint64_t one = 1;
  // Can only fail when the counter would overflow, i.e. when it is raised already.
  [[maybe_unused]] const auto written = ::write(m_fd.get(), &one, sizeof one);
}

void WakeFlag::clear() const noexcept {
  std::uint64_t value = 0;
  [[maybe_unused]] const auto read = ::read(m_fd.get(), &value, sizeof value);
}

bool WakeFlag::raised() const noexcept {
  return wait_for(std::chrono::milliseconds(0));
}

bool WakeFlag::wait_for(std::chrono::milliseconds timeout) const noexcept {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd entry{m_fd.get(), POLLIN, 0};
    const int ready = ::poll(&entry, 1, static_cast<int>(std::max<long long>(left.count(), 0)));
    if (ready < 0 && errno == EINTR) {
      continue;
    }
    return ready == 1;
  }
}

}  // namespace hoist
