#pragma once

#include <sys/stat.h>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hoist/sys/host_root.hpp"
#include "hoist/util/expected.hpp"
#include "hoist/util/fd.hpp"

namespace hoist {

/// A directory on the host, opened readable (so that it can be listed and
/// fsynced, which an O_PATH descriptor cannot), with the name it has in
/// messages. The *at() calls of the installers all go through one of these.
class HostDir {
 public:
  /// Opens `host_path` resolved inside `root`. ENOENT is returned as it is.
  static Expected<HostDir> open(const HostRoot& root, const std::string& host_path);

  /// `mkdir -p` of `host_path` inside `root`, then opens it. The directory
  /// that receives each new entry is fsynced, so that a directory created here
  /// is still there after a crash. The host paths of the directories it made
  /// are appended to `made` (outermost first), for remove_made().
  static Expected<HostDir> create(const HostRoot& root, const std::string& host_path, mode_t mode = 0755,
                                  std::vector<std::string>* made = nullptr);

  /// Removes the directories that create() made (innermost first) while they
  /// are empty, so that a run that failed leaves the host as it found it; stops
  /// quietly at the first that is not empty. Clears `made`.
  [[nodiscard]] static Expected<void> remove_made(const HostRoot& root, std::vector<std::string>& made);

  /// Opens the subdirectory `name` (a single component, never followed when it
  /// is a symlink).
  [[nodiscard]] Expected<HostDir> child(const std::string& name) const;

  /// Creates the subdirectory `name` (mode 0755), fsyncs this directory, and
  /// opens it. EEXIST is returned as it is.
  [[nodiscard]] Expected<HostDir> make_child(const std::string& name) const;

  [[nodiscard]] int fd() const noexcept { return m_fd.get(); }
  /// The directory's path in messages (`/host/opt/k3s`).
  [[nodiscard]] const std::string& display() const noexcept { return m_display; }
  /// An entry's path in messages (`/host/opt/k3s/current`).
  [[nodiscard]] std::string display(std::string_view name) const;

  /// lstat of the entry `name`; nullopt when it does not exist.
  [[nodiscard]] std::optional<struct stat> stat(const std::string& name) const;

  /// The names of the entries (without `.` and `..`), unsorted.
  [[nodiscard]] Expected<std::vector<std::string>> list() const;

  /// fsync of the directory.
  [[nodiscard]] Expected<void> sync() const;

  /// Removes the entry `name` and everything under it so that no crash can
  /// leave it half removed under its own name: renamed to a temporary name
  /// first (which the next run's cleanup removes), then removed.
  [[nodiscard]] Expected<void> remove_entry(const std::string& name) const;

  /// Removes every entry whose name `is_leftover` accepts (with everything
  /// under it), returning how many it removed.
  [[nodiscard]] Expected<int> remove_leftovers(const std::function<bool(std::string_view)>& is_leftover) const;

 private:
  HostDir(Fd fd, std::string display) : m_fd(std::move(fd)), m_display(std::move(display)) {}
  Fd m_fd;
  std::string m_display;
};

}  // namespace hoist
