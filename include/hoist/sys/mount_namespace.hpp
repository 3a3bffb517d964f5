#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include "hoist/util/expected.hpp"
#include "hoist/util/fd.hpp"

namespace hoist {

/// A mount namespace, held open by its nsfs file (`/proc/<pid>/ns/mnt`).
class MountNamespace {
 public:
  /// The host's mount namespace as a hostPID pod sees it: that of PID 1.
  static constexpr const char* k_host_path = "/proc/1/ns/mnt";

  /// Opens the namespace file at `path`. EACCES/EPERM (no CAP_SYS_PTRACE over
  /// that process) and ENOENT (no such process) are returned as they are.
  static Expected<MountNamespace> open(const std::string& path);
  /// This process's own mount namespace.
  static Expected<MountNamespace> own();

  /// Whether both are the same namespace: the same nsfs inode.
  [[nodiscard]] bool same_as(const MountNamespace& other) const noexcept {
    return m_dev == other.m_dev && m_ino == other.m_ino;
  }
  /// `mnt:[<inode>]`, as /proc shows it.
  [[nodiscard]] std::string name() const;
  [[nodiscard]] const std::string& path() const noexcept { return m_path; }

  /// setns(2) into the namespace; the root and working directory become the
  /// namespace's root. The kernel refuses (EINVAL) a process with a second
  /// thread, so this is for a single-threaded process: in hoist, a forked
  /// helper, whatever threads its parent had.
  [[nodiscard]] Expected<void> enter() const;

  /// Reads the regular file at the absolute `path` as this namespace sees it (resolved from its root, symlinks
  /// followed), at most `max_bytes`: nullopt when it does not exist. A forked helper enters the namespace and
  /// sends the content back, so this process stays where it is, whatever threads it has.
  [[nodiscard]] Expected<std::optional<std::string>> read_file(const std::string& path, size_t max_bytes) const;

 private:
  MountNamespace(Fd fd, std::string path, dev_t dev, ino_t ino)
      : m_fd(std::move(fd)), m_path(std::move(path)), m_dev(dev), m_ino(ino) {}
  Fd m_fd;
  std::string m_path;
  dev_t m_dev;
  ino_t m_ino;
};

}  // namespace hoist
