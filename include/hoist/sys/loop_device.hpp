#pragma once

#include <string>
#include <string_view>

#include "hoist/util/expected.hpp"
#include "hoist/util/fd.hpp"

namespace hoist {

/// A loop device attached read-only to a file, for mounting a disk image
/// without writing to it. It is attached with LO_FLAGS_AUTOCLEAR: the kernel
/// detaches it once the last user is gone (this object's descriptor and any
/// mount of it), so no exit path, a crash included, leaves it attached.
class LoopDevice {
 public:
  /// Attaches a free loop device (LOOP_CTL_GET_FREE on /dev/loop-control) to
  /// the regular file open at `file_fd`, read-only. LOOP_CONFIGURE (Linux 5.8)
  /// is tried first, then LOOP_SET_FD with LOOP_SET_STATUS64; a device that
  /// another process took between the two steps is skipped. `display` names
  /// the file in errors.
  static Expected<LoopDevice> attach_read_only(int file_fd, std::string_view display);

  /// The device's name, `/dev/loopN`, for messages: the node may not exist (a container's /dev is
  /// filled when it starts); the device is then opened through a node of hoist's own, removed at once.
  [[nodiscard]] const std::string& path() const noexcept { return m_path; }
  /// What to mount the device from: its descriptor's link in /proc/self/fd, which reaches the device
  /// whether or not /dev has a node for it.
  [[nodiscard]] std::string source() const { return "/proc/self/fd/" + std::to_string(m_fd.get()); }
  [[nodiscard]] int fd() const noexcept { return m_fd.get(); }

 private:
  LoopDevice(Fd fd, std::string path) : m_fd(std::move(fd)), m_path(std::move(path)) {}
  Fd m_fd;
  std::string m_path;
};

}  // namespace hoist
