#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "hoist/sys/host_root.hpp"
#include "hoist/util/expected.hpp"
#include "hoist/util/fd.hpp"

namespace hoist {

/// An exclusive flock(2) on a lock file inside the host root. The kernel drops
/// it when the holder exits, however it exits, so a killed run never leaves a
/// stale lock behind. Released when the object dies.
class Lock {
 public:
  /// Called once, when the lock is found held, with the holder's pid as the
  /// lock file records it (0 when unknown), before waiting.
  using OnWait = std::function<void(long holder_pid)>;

  /// Takes the lock on `host_path` (its directory is created if missing),
  /// waiting up to `timeout`. A timeout is returned as a SysError with errnum
  /// ETIMEDOUT and a message that names the lock file.
  static Expected<Lock> acquire(const HostRoot& root, const std::string& host_path, std::chrono::milliseconds timeout,
                                const OnWait& on_wait = {});

  /// The pid recorded in a lock file (0 when there is none).
  static long recorded_pid(int fd);

 private:
  explicit Lock(Fd fd) : m_fd(std::move(fd)) {}
  Fd m_fd;
};

}  // namespace hoist
