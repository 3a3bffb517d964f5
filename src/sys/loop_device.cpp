#include "hoist/sys/loop_device.hpp"
#include "hoist/util/text.hpp"

#include <fcntl.h>
#include <linux/loop.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "hoist/util/file_io.hpp"

namespace hoist {

namespace {

// Binds `file_fd` to the open loop device. EBUSY: another process bound it
// first; the caller picks another device.
int configure(int loop_fd, int file_fd) {
  loop_config config{};
  config.fd = static_cast<__u32>(file_fd);
  config.info.lo_flags = LO_FLAGS_READ_ONLY | LO_FLAGS_AUTOCLEAR;
  if (::ioctl(loop_fd, LOOP_CONFIGURE, &config) == 0) {
    return 0;
  }
  if (errno != EINVAL && errno != ENOTTY) {
    return errno;
  }
  // Before Linux 5.8: bind, then set the flags. The window between the two is
  // why LOOP_CONFIGURE exists; a crash in it leaves a device without autoclear.
  if (::ioctl(loop_fd, LOOP_SET_FD, file_fd) != 0) {
    return errno;
  }
  loop_info64 info{};
  info.lo_flags = LO_FLAGS_READ_ONLY | LO_FLAGS_AUTOCLEAR;
  if (::ioctl(loop_fd, LOOP_SET_STATUS64, &info) != 0) {
    const int saved = errno;
    ::ioctl(loop_fd, LOOP_CLR_FD, 0);
    return saved;
  }
  return 0;
}

// The device number of loop device `index`, as sysfs gives it ("7:12\n").
Expected<dev_t> device_number(int index, const std::string& path) {
  const std::string sysfs = "/sys/block/loop" + std::to_string(index) + "/dev";
  auto text = read_file_at(AT_FDCWD, sysfs, sysfs, 64);
  if (!text) {
    return SysError{"failed to find the device number of " + in_quotes(path) + ": " + text.error().message,
                    text.error().errnum};
  }
  unsigned major = 0;
  unsigned minor = 0;
  char end = 0;
  if (std::sscanf(text->c_str(), "%u:%u%c", &major, &minor, &end) != 3 || end != '\n') {
    return SysError{"failed to find the device number of " + in_quotes(path) + ": " + in_quotes(sysfs) + " holds " +
                        in_quotes(*text) + ", not MAJOR:MINOR",
                    EINVAL};
  }
  return ::makedev(major, minor);
}

// Opens loop device `index` when /dev has no node for it: a container's /dev is filled when the container
// starts, and the kernel adds a loop device when every one is taken. The node is made under a name of
// this process's own in /dev and removed as soon as it is open; only a kill between the two leaves it, in
// the container's own /dev when hoist runs in one.
Expected<Fd> open_without_node(int index, const std::string& path) {
  auto number = device_number(index, path);
  if (!number) {
    return number.error();
  }
  const std::string node = "/dev/.hoist-loop" + std::to_string(index) + "." + std::to_string(::getpid());
  if (::mknod(node.c_str(), S_IFBLK | 0600, *number) != 0) {
    return sys_error("open " + in_quotes(path) + ": /dev has no node for it, and making one as " + in_quotes(node) +
                     " failed");
  }
  Fd loop(::open(node.c_str(), O_RDONLY | O_CLOEXEC));
  const int saved = errno;
  ::unlink(node.c_str());
  if (!loop) {
    return sys_error("open " + in_quotes(path) + " through " + in_quotes(node), saved);
  }
  return loop;
}

}  // namespace

Expected<LoopDevice> LoopDevice::attach_read_only(int file_fd, std::string_view display) {
  Fd control(::open("/dev/loop-control", O_RDWR | O_CLOEXEC));
  if (!control) {
    return sys_error("open '/dev/loop-control' (to attach " + in_quotes(display) + ")");
  }
  // A few rounds: a free device can be taken by someone else before we bind it.
  constexpr int k_attempts = 16;
  int last_errno = EBUSY;
  for (int attempt = 0; attempt < k_attempts; ++attempt) {
    const int index = ::ioctl(control.get(), LOOP_CTL_GET_FREE);
    if (index < 0) {
      return sys_error("find a free loop device for " + in_quotes(display));
    }
    std::string path = "/dev/loop" + std::to_string(index);
    Fd loop(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!loop && errno == ENOENT) {
      auto opened = open_without_node(index, path);
      if (!opened) {
        return SysError{opened.error().message + " (to attach " + in_quotes(display) + ")", opened.error().errnum};
      }
      loop = std::move(*opened);
    }
    if (!loop) {
      return sys_error("open " + in_quotes(path) + " (to attach " + in_quotes(display) + ")");
    }
    last_errno = configure(loop.get(), file_fd);
    if (last_errno == 0) {
      return LoopDevice(std::move(loop), std::move(path));
    }
    if (last_errno != EBUSY) {
      return sys_error("attach " + in_quotes(display) + " to " + in_quotes(path), last_errno);
    }
  }
  return sys_error("attach " + in_quotes(display) + " to a loop device", last_errno);
}

}  // namespace hoist
