#include "hoist/sys/metadata.hpp"
#include "hoist/util/text.hpp"

#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdint>

namespace hoist {

namespace {

/// The l*xattr path of an entry that is not open: the kernel resolves the
/// /proc magic link to the directory and then never follows `name`.
std::string proc_path(NodeRef node) {
  return "/proc/self/fd/" + std::to_string(node.dirfd) + "/" + node.name;
}

bool xattrs_unsupported(int errnum) {
  return errnum == ENOTSUP || errnum == ENOSYS;
}

// getxattrat(2) and listxattrat(2), Linux 6.13: the same numbers on every architecture hoist builds for
// (the unified syscall table; alpha alone numbers them otherwise).
constexpr long k_sys_getxattrat = 464;
constexpr long k_sys_listxattrat = 465;

/// getxattrat's `struct xattr_args` (linux/xattr.h of 6.13; not in older headers).
struct XattrArgs {
  alignas(8) uint64_t value;
  uint32_t size;
  uint32_t flags;
};

/// Whether the *xattrat calls work: 0 not known yet, 1 yes, -1 no (an older
/// kernel, or a seccomp filter that refuses them).
std::atomic<int> g_at_calls{0};

bool refused_call(int errnum) {
  return errnum == ENOSYS || errnum == EPERM;
}

bool at_calls() noexcept {
  int known = g_at_calls.load(std::memory_order_relaxed);
  if (known == 0) {
    const long rc = ::syscall(k_sys_listxattrat, AT_FDCWD, "/", AT_SYMLINK_NOFOLLOW, nullptr, size_t{0});
    known = rc >= 0 || !refused_call(errno) ? 1 : -1;
    g_at_calls.store(known, std::memory_order_relaxed);
  }
  return known > 0;
}

/// An *xattrat call that was refused although the probe passed (a filter
/// installed since): use the /proc paths from now on.
bool fell_back(ssize_t rc) {
  if (rc >= 0 || !refused_call(errno)) {
    return false;
  }
  g_at_calls.store(-1, std::memory_order_relaxed);
  return true;
}

/// `path` is the /proc path of a node without fd, made only when the *xattrat calls are not used.
ssize_t list_names(NodeRef node, std::string& path, char* buffer, size_t size) {
  if (node.fd >= 0) {
    return ::flistxattr(node.fd, buffer, size);
  }
  if (path.empty() && at_calls()) {
    const auto rc =
        static_cast<ssize_t>(::syscall(k_sys_listxattrat, node.dirfd, node.name, AT_SYMLINK_NOFOLLOW, buffer, size));
    if (!fell_back(rc)) {
      return rc;
    }
  }
  if (path.empty()) {
    path = proc_path(node);
  }
  return ::llistxattr(path.c_str(), buffer, size);
}

ssize_t get_value(NodeRef node, std::string& path, const char* name, void* buffer, size_t size) {
  if (node.fd >= 0) {
    return ::fgetxattr(node.fd, name, buffer, size);
  }
  if (path.empty() && at_calls()) {
    XattrArgs args{reinterpret_cast<uintptr_t>(buffer), static_cast<uint32_t>(size), 0};
    const auto rc = static_cast<ssize_t>(
        ::syscall(k_sys_getxattrat, node.dirfd, node.name, AT_SYMLINK_NOFOLLOW, name, &args, sizeof args));
    if (!fell_back(rc)) {
      return rc;
    }
  }
  if (path.empty()) {
    path = proc_path(node);
  }
  return ::lgetxattr(path.c_str(), name, buffer, size);
}

/// The NUL-separated names, or an empty string when there are none.
Expected<std::string> read_names(NodeRef node, std::string& path, std::string_view display) {
  // Almost every file has no xattrs or a few short ones: try a stack buffer before asking for the size.
  std::array<char, 1024> small{};
  ssize_t n = list_names(node, path, small.data(), small.size());
  if (n >= 0) {
    return std::string(small.data(), static_cast<size_t>(n));
  }
  std::string names;
  while (n < 0) {
    if (xattrs_unsupported(errno)) {
      return std::string();
    }
    if (errno != ERANGE) {
      return sys_error("list the xattrs of " + in_quotes(display));
    }
    // Another process may add names between the two calls: ERANGE again means ask again.
    n = list_names(node, path, nullptr, 0);
    if (n < 0) {
      continue;
    }
    if (n == 0) {
      return std::string();
    }
    names.resize(static_cast<size_t>(n));
    n = list_names(node, path, names.data(), names.size());
  }
  names.resize(static_cast<size_t>(n));
  return names;
}

/// The value, or nullopt-like false in `present` when the name went away meanwhile.
Expected<std::string> read_value(NodeRef node, std::string& path, const char* name, std::string_view display,
                                 bool& present) {
  present = true;
  std::array<char, 256> small{};
  ssize_t n = get_value(node, path, name, small.data(), small.size());
  if (n >= 0) {
    return std::string(small.data(), static_cast<size_t>(n));
  }
  std::string value;
  while (n < 0) {
    if (errno == ENODATA) {
      present = false;
      return std::string();
    }
    if (errno != ERANGE) {
      return sys_error("read xattr " + in_quotes(name) + " of " + in_quotes(display));
    }
    n = get_value(node, path, name, nullptr, 0);
    if (n < 0) {
      continue;
    }
    if (n == 0) {
      return std::string();
    }
    value.resize(static_cast<size_t>(n));
    n = get_value(node, path, name, value.data(), value.size());
  }
  value.resize(static_cast<size_t>(n));
  return value;
}

Expected<void> set_xattrs(NodeRef node, const Xattrs& xattrs, ExistingXattrs existing, std::string_view display) {
  const bool by_fd = node.fd >= 0;
  std::string path;
  if (!by_fd && (existing == ExistingXattrs::reconcile || !xattrs.empty())) {
    path = proc_path(node);
  }
  if (existing == ExistingXattrs::reconcile) {
    auto names = read_names(node, path, display);
    if (!names) {
      return names.error();
    }
    for (size_t start = 0; start < names->size();) {
      const char* name = names->data() + start;
      const std::string_view view(name);
      start += view.size() + 1;
      const bool wanted = std::any_of(xattrs.begin(), xattrs.end(), [&](const Xattr& x) { return x.name == view; });
      if (wanted || view == k_selinux_xattr) {
        continue;
      }
      const int rc = by_fd ? ::fremovexattr(node.fd, name) : ::lremovexattr(path.c_str(), name);
      if (rc != 0 && errno != ENODATA) {
        return sys_error("remove xattr " + in_quotes(view) + " of " + in_quotes(display));
      }
    }
  }
  for (const Xattr& x : xattrs) {
    const int rc = by_fd ? ::fsetxattr(node.fd, x.name.c_str(), x.value.data(), x.value.size(), 0)
                         : ::lsetxattr(path.c_str(), x.name.c_str(), x.value.data(), x.value.size(), 0);
    if (rc != 0) {
      return sys_error("set xattr " + in_quotes(x.name) + " on " + in_quotes(display));
    }
  }
  return {};
}

}  // namespace

NodeMeta NodeMeta::from_stat(const struct stat& st) noexcept {
  NodeMeta meta;
  meta.mode = st.st_mode;
  meta.uid = st.st_uid;
  meta.gid = st.st_gid;
  meta.mtime = st.st_mtim;
  if (S_ISREG(st.st_mode)) {
    meta.size = static_cast<uint64_t>(st.st_size);
  }
  if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
    meta.rdev = st.st_rdev;
  }
  return meta;
}

bool same_attributes(const NodeMeta& a, const NodeMeta& b) noexcept {
  return a.mode == b.mode && a.uid == b.uid && a.gid == b.gid && a.mtime.tv_sec == b.mtime.tv_sec &&
         a.mtime.tv_nsec == b.mtime.tv_nsec && a.size == b.size && a.rdev == b.rdev;
}

bool same_xattrs(const Xattrs& payload, const Xattrs& existing) {
  if (payload == existing) {
    return true;
  }
  auto selinux =
      std::find_if(existing.begin(), existing.end(), [](const Xattr& x) { return x.name == k_selinux_xattr; });
  const bool payload_has_label =
      std::any_of(payload.begin(), payload.end(), [](const Xattr& x) { return x.name == k_selinux_xattr; });
  if (selinux == existing.end() || payload_has_label) {
    return false;
  }
  Xattrs without_label = existing;
  without_label.erase(without_label.begin() + (selinux - existing.begin()));
  return payload == without_label;
}

bool xattrs_readable_by_name() noexcept {
  return at_calls();
}

Expected<std::string> read_selinux_label(int fd, std::string_view display) {
  // A label is a context of a few dozen bytes; 4 KiB is far more than any policy writes.
  std::string value(4096, '\0');
  const ssize_t n = ::fgetxattr(fd, k_selinux_xattr.data(), value.data(), value.size());
  if (n < 0) {
    if (errno == ENODATA || errno == ENOTSUP) {
      return std::string();
    }
    return sys_error("read the SELinux label of " + in_quotes(display));
  }
  value.resize(static_cast<size_t>(n));
  if (!value.empty() && value.back() == '\0') {
    value.pop_back();
  }
  if (std::any_of(value.begin(), value.end(), [](char c) { return c < 0x21 || c > 0x7e; })) {
    return SysError{"the SELinux label of " + in_quotes(display) + " is not a printable context: " + escaped(value),
                    EINVAL};
  }
  return value;
}

Expected<Xattrs> read_xattrs(NodeRef node, std::string_view display) {
  std::string path;  // made by the first call that needs it
  auto names = read_names(node, path, display);
  if (!names) {
    return names.error();
  }
  Xattrs xattrs;
  for (size_t start = 0; start < names->size();) {
    const char* name = names->data() + start;
    const size_t length = std::string_view(name).size();
    start += length + 1;
    if (length == 0) {
      continue;
    }
    bool present = false;
    auto value = read_value(node, path, name, display, present);
    if (!value) {
      return value.error();
    }
    if (present) {
      xattrs.push_back(Xattr{std::string(name, length), std::move(*value)});
    }
  }
  std::sort(xattrs.begin(), xattrs.end(), [](const Xattr& a, const Xattr& b) { return a.name < b.name; });
  return xattrs;
}

Expected<void> apply_metadata(NodeRef node, const NodeMeta& meta, const Xattrs& xattrs, ExistingXattrs existing,
                              std::string_view display, const InitialMode* initial) {
  const bool by_fd = node.fd >= 0;
  const mode_t perms = meta.mode & 07777;
  // chown before everything else: it clears setuid/setgid and security.capability.
  // A new inode that already has the owner needs no chown (most payloads are root's).
  const bool owner_set = initial != nullptr && initial->uid == meta.uid && initial->gid == meta.gid;
  if (!owner_set && (by_fd ? ::fchown(node.fd, meta.uid, meta.gid)
                           : ::fchownat(node.dirfd, node.name, meta.uid, meta.gid, AT_SYMLINK_NOFOLLOW)) != 0) {
    return sys_error("set the owner of " + in_quotes(display));
  }
  if (auto set = set_xattrs(node, xattrs, existing, display); !set) {
    return set;
  }
  // An access ACL rewrites the group bits: then chmod always.
  const bool has_acl =
      std::any_of(xattrs.begin(), xattrs.end(), [](const Xattr& x) { return x.name == "system.posix_acl_access"; });
  const bool mode_set = initial != nullptr && initial->perms == perms && !has_acl;
  // Symlinks have no mode of their own on Linux (fchmodat(AT_SYMLINK_NOFOLLOW) answers ENOTSUP).
  if (meta.type() != S_IFLNK && !mode_set) {
    // Not a symlink (we made it, or opened it with O_NOFOLLOW), so fchmodat does not follow anything.
    if ((by_fd ? ::fchmod(node.fd, perms) : ::fchmodat(node.dirfd, node.name, perms, 0)) != 0) {
      return sys_error("set the mode of " + in_quotes(display));
    }
  }
  return apply_mtime(node, meta.mtime, display);
}

mode_t current_umask() noexcept {
  const mode_t mask = ::umask(022);
  ::umask(mask);
  return mask;
}

Expected<void> apply_mtime(NodeRef node, const struct timespec& mtime, std::string_view display) {
  const struct timespec times[2] = {{0, UTIME_OMIT}, mtime};
  if ((node.fd >= 0 ? ::futimens(node.fd, times) : ::utimensat(node.dirfd, node.name, times, AT_SYMLINK_NOFOLLOW)) !=
      0) {
    return sys_error("set the mtime of " + in_quotes(display));
  }
  return {};
}

Expected<std::string> read_symlink(int dirfd, const char* name, std::string_view display) {
  std::string target(256, '\0');
  for (;;) {
    const ssize_t n = ::readlinkat(dirfd, name, target.data(), target.size());
    if (n < 0) {
      return sys_error("read the symlink " + in_quotes(display));
    }
    if (static_cast<size_t>(n) < target.size()) {
      target.resize(static_cast<size_t>(n));
      return target;
    }
    target.resize(target.size() * 2);
  }
}

}  // namespace hoist
