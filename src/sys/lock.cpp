#include "hoist/sys/lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <thread>

#include <fmt/format.h>

#include "hoist/sys/stop_signals.hpp"
#include "hoist/util/text.hpp"

namespace hoist {

long Lock::recorded_pid(int fd) {
  char buffer[32] = {};
  const ssize_t n = ::pread(fd, buffer, sizeof buffer - 1, 0);
  if (n <= 0) {
    return 0;
  }
  return std::strtol(buffer, nullptr, 10);
}

Expected<Lock> Lock::acquire(const HostRoot& root, const std::string& host_path, std::chrono::milliseconds timeout,
                             const OnWait& on_wait) {
  const std::string shown = root.display(host_path);
  auto parent = root.open_parent(host_path);
  if (!parent && parent.error().errnum == ENOENT) {
    const size_t slash = host_path.rfind('/');
    if (slash != std::string::npos && slash > 0) {
      if (auto made = root.make_directories(host_path.substr(0, slash)); !made) {
        return made.error();
      }
      parent = root.open_parent(host_path);
    }
  }
  if (!parent) {
    return parent.error();
  }
  auto& [dirfd, name] = *parent;
  // A lock file is never a symlink: following one could let the host redirect
  // our O_CREAT to any file.
  Fd fd(::openat(dirfd.get(), name.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!fd) {
    return sys_error("open lock file " + in_quotes(shown));
  }

  // Polling with LOCK_NB keeps the process single-threaded and signal-safe; a
  // lock wait is rare and short, so a 10..200 ms back-off costs nothing.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto delay = std::chrono::milliseconds(10);
  bool announced = false;
  while (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) {
      continue;
    }
    if (errno != EWOULDBLOCK) {
      return sys_error("lock " + in_quotes(shown));
    }
    const long holder = recorded_pid(fd.get());
    if (!announced && on_wait) {
      on_wait(holder);
    }
    announced = true;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      std::string message = "failed to lock " + in_quotes(shown) + ": still held";
      if (holder > 0) {
        message += " by pid " + std::to_string(holder);
      }
      message += fmt::format(" after {:g} s (--lock-timeout)", static_cast<double>(timeout.count()) / 1000.0);
      return SysError{message, ETIMEDOUT};
    }
    const auto pause = std::min<std::chrono::steady_clock::duration>(delay, deadline - now);
    // SIGTERM/SIGINT end the wait at once (sys/stop_signals.hpp), when handled.
    if (const WakeFlag* stop = stop_signals::wake_flag(); stop != nullptr) {
      if (stop->wait_for(std::chrono::duration_cast<std::chrono::milliseconds>(pause))) {
        return SysError{"failed to lock " + in_quotes(shown) + ": stopped by " +
                            std::string(stop_signals::received_name()) + " while waiting for it",
                        EINTR};
      }
    } else {
      std::this_thread::sleep_for(pause);
    }
    delay = std::min(delay * 2, std::chrono::milliseconds(200));
  }
  // Record the holder for the messages of those who wait (information only:
  // the flock itself is the lock).
  const std::string pid = std::to_string(::getpid()) + "\n";
  // A failed write leaves the waiters' messages without the pid. Kept in a variable, not cast to void:
  // _FORTIFY_SOURCE declares pwrite warn_unused_result, and GCC does not take a cast as a use.
  [[maybe_unused]] const bool recorded =
      ::ftruncate(fd.get(), 0) == 0 && ::pwrite(fd.get(), pid.data(), pid.size(), 0) >= 0;
  return Lock(std::move(fd));
}

}  // namespace hoist
