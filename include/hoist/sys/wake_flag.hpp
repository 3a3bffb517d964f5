#pragma once

#include <chrono>

#include "hoist/util/expected.hpp"
#include "hoist/util/fd.hpp"

namespace hoist {

/// A flag that one thread raises to wake another out of a blocking wait: an
/// eventfd that waits on a socket also poll(2) for. Once raised it stays raised
/// until clear(), so a wake-up between two waits is not lost.
class WakeFlag {
 public:
  /// Creates the eventfd.
  static Expected<WakeFlag> create();

  /// Raises the flag; safe from any thread, never blocks.
  void raise() const noexcept;
  /// Lowers the flag.
  void clear() const noexcept;
  /// Whether the flag is raised.
  [[nodiscard]] bool raised() const noexcept;
  /// Sleeps until the flag is raised (returns true) or `timeout` passes (false):
  /// an interruptible sleep for backoff.
  [[nodiscard]] bool wait_for(std::chrono::milliseconds timeout) const noexcept;
  /// The descriptor that polls readable while the flag is raised.
  [[nodiscard]] int fd() const noexcept { return m_fd.get(); }

 private:
  explicit WakeFlag(Fd fd) : m_fd(std::move(fd)) {}
  Fd m_fd;
};

}  // namespace hoist
