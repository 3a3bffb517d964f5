#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <string_view>
#include <utility>

#include "hoist/util/expected.hpp"
#include "hoist/util/fd.hpp"

namespace hoist {

/// Whether the last component of a path may be a symlink that is followed.
enum class Follow { yes, no };

/// How paths are resolved inside the root.
enum class Resolver {
  automatic,  ///< openat2(RESOLVE_IN_ROOT) when the kernel has it, else the walk
  walk,       ///< the portable component-by-component walk (forced in tests)
};

/// The host's root filesystem as the container sees it (`/host` in a SUC Job).
///
/// Every host path is resolved *inside* this root, the way the host itself would
/// resolve it after a chroot: absolute symlinks restart at the root and `..`
/// never climbs above it. String-prefixing is never used: `/host/var/run` is a
/// symlink to `/run`, which by prefixing would land in the container's own `/run`.
class HostRoot {
 public:
  /// Opens `dir` as the root. The path must name a directory.
  static Expected<HostRoot> open(const std::filesystem::path& dir, Resolver resolver = Resolver::automatic);

  /// The `--host-root` default: `/host` when it is a directory, else `/`.
  static std::filesystem::path default_path();

  /// The container engine's marker file this process sees (`/run/.containerenv` of podman and CRI-O,
  /// `/.dockerenv` of Docker), or an empty path outside a container (or under an engine that leaves none).
  static std::filesystem::path container_marker();

  /// The root as the container sees it.
  [[nodiscard]] const std::filesystem::path& path() const noexcept { return m_path; }
  [[nodiscard]] int fd() const noexcept { return m_fd.get(); }
  [[nodiscard]] Resolver resolver() const noexcept { return m_resolver; }

  /// Opens `host_path` (a path as the host sees it; relative paths start at the
  /// root too) resolved inside the root. `flags` are open(2) flags; O_CLOEXEC is
  /// always added. With Follow::no a symlink as last component is not followed
  /// (O_NOFOLLOW; with O_PATH the link itself is opened).
  [[nodiscard]] Expected<Fd> open(std::string_view host_path, int flags, Follow follow = Follow::yes,
                                  mode_t mode = 0) const;

  /// Reads the whole regular file at `host_path` (resolved inside the root, symlinks followed), as read_fd does:
  /// opened with k_read_flags, anything but a regular file or a file over `max_bytes` refused, errors naming it
  /// as display() shows it.
  [[nodiscard]] Expected<std::string> read_file(std::string_view host_path, size_t max_bytes = 1U << 20U) const;

  /// Opens the directory that holds `host_path`'s last component (resolved inside
  /// the root) and returns it with that component's name, for the *at() calls
  /// that create, rename or remove it. Refuses paths whose last component is
  /// empty, `.` or `..`.
  [[nodiscard]] Expected<std::pair<Fd, std::string>> open_parent(std::string_view host_path) const;

  /// The host path that `host_path` names once the host has resolved its
  /// symlinks: the longest part of it that exists, resolved inside the root,
  /// then the rest as written ("/" when it is the root itself). With Follow::no
  /// the last component is not followed (a link that hoist itself manages).
  /// A path with a `..` component is refused (EINVAL).
  /// Lets destinations be compared as the host sees them: `/srv/b/x` is inside
  /// `/opt/a` when `/srv/b` is a link to `/opt/a`.
  [[nodiscard]] Expected<std::string> resolve(std::string_view host_path, Follow follow) const;

  /// Replaces the file at `host_path` with `data` through write_file_atomic() (a fsynced temporary renamed over
  /// it, then the directory fsynced: a reader never sees half a file), its directory made when missing. Errors
  /// name the path as display() shows it.
  [[nodiscard]] Expected<void> replace_file(std::string_view host_path, std::string_view data, mode_t mode) const;

  /// `mkdir -p` inside the root; returns the final directory opened O_DIRECTORY.
  [[nodiscard]] Expected<Fd> make_directories(std::string_view host_path, mode_t mode = 0755) const;

  /// How a host path is named in messages: the container path (`/host/opt/k3s`),
  /// or the host path itself when the root is `/`.
  [[nodiscard]] std::string display(std::string_view host_path) const;

 private:
  HostRoot(std::filesystem::path path, Fd fd, Resolver resolver)
      : m_path(std::move(path)), m_fd(std::move(fd)), m_resolver(resolver) {}

  [[nodiscard]] SysError nul_in_path(std::string_view host_path) const;
  [[nodiscard]] Expected<Fd> open_walk(std::string_view host_path, int flags, Follow follow, mode_t mode) const;

  std::filesystem::path m_path;
  Fd m_fd;
  Resolver m_resolver;
};

}  // namespace hoist
