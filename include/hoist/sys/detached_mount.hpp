#pragma once

#include <string>
#include <string_view>

#include "hoist/util/expected.hpp"
#include "hoist/util/fd.hpp"

namespace hoist {

/// A filesystem mounted read-only and attached nowhere (fsopen/fsmount, Linux
/// 5.2): no mount point, no mount namespace and nothing in any mount table; its
/// files are reached only through fd(), with the *at() calls. Closing the
/// descriptor unmounts it, so nothing outlives this object, not even after a
/// crash.
class DetachedMount {
 public:
  /// Mounts the block device `device` as `fstype` (squashfs, erofs, …),
  /// read-only, nodev, nosuid, noexec. `display` names the image in errors.
  static Expected<DetachedMount> mount_read_only(const std::string& fstype, const std::string& device,
                                                 std::string_view display);

  /// The root directory of the mounted filesystem (an O_PATH-like mount fd).
  [[nodiscard]] int fd() const noexcept { return m_fd.get(); }

 private:
  explicit DetachedMount(Fd fd) : m_fd(std::move(fd)) {}
  Fd m_fd;
};

}  // namespace hoist
