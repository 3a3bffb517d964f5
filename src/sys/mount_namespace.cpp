#include "hoist/sys/mount_namespace.hpp"
#include "hoist/util/text.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>

#include <cerrno>

namespace hoist {

Expected<MountNamespace> MountNamespace::open(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    return sys_error("open mount namespace " + in_quotes(path));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return sys_error("stat mount namespace " + in_quotes(path));
  }
  return MountNamespace(std::move(fd), path, st.st_dev, st.st_ino);
}

Expected<MountNamespace> MountNamespace::own() {
  return open("/proc/self/ns/mnt");
}

std::string MountNamespace::name() const {
  return "mnt:[" + std::to_string(m_ino) + "]";
}

Expected<void> MountNamespace::enter() const {
  if (::setns(m_fd.get(), CLONE_NEWNS) != 0) {
    return sys_error("enter mount namespace " + in_quotes(m_path) + " (" + name() + ")");
  }
  return {};
}

}  // namespace hoist
