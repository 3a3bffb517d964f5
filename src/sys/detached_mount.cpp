#include "hoist/sys/detached_mount.hpp"
#include "hoist/util/text.hpp"

#include <sys/mount.h>

#include <cerrno>

namespace hoist {

Expected<DetachedMount> DetachedMount::mount_read_only(const std::string& fstype, const std::string& device,
                                                       std::string_view display) {
  const std::string what = "mount " + in_quotes(display) + " (" + fstype + " on " + device + ")";
  Fd context(::fsopen(fstype.c_str(), FSOPEN_CLOEXEC));
  if (!context) {
    return sys_error(what);
  }
  if (::fsconfig(context.get(), FSCONFIG_SET_STRING, "source", device.c_str(), 0) != 0 ||
      ::fsconfig(context.get(), FSCONFIG_SET_FLAG, "ro", nullptr, 0) != 0 ||
      ::fsconfig(context.get(), FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) != 0) {
    return sys_error(what);
  }
  Fd mount(::fsmount(context.get(), FSMOUNT_CLOEXEC,
                     MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC));
  if (!mount) {
    return sys_error(what);
  }
  return DetachedMount(std::move(mount));
}

}  // namespace hoist
