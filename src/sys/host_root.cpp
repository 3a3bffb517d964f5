#include "hoist/sys/host_root.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <deque>
#include <vector>

#include "hoist/sys/atomic_file.hpp"
#include "hoist/util/file_io.hpp"
#include "hoist/util/text.hpp"

namespace hoist {

namespace {

// Linux allows 40 symlinks in one resolution; the walk keeps the same limit.
constexpr int k_max_symlinks = 40;

std::deque<std::string> split_components(std::string_view path) {
  std::deque<std::string> components;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t slash = path.find('/', start);
    const size_t end = slash == std::string_view::npos ? path.size() : slash;
    if (end > start) {
      components.emplace_back(path.substr(start, end - start));
    }
    if (slash == std::string_view::npos) {
      break;
    }
    start = slash + 1;
  }
  return components;
}

// Relative form of a host path for openat2 under the root: RESOLVE_IN_ROOT
// treats a leading '/' as the root too, but "." for an empty path is clearer.
std::string relative(std::string_view host_path) {
  while (!host_path.empty() && host_path.front() == '/') {
    host_path.remove_prefix(1);
  }
  return host_path.empty() ? std::string(".") : std::string(host_path);
}

Expected<std::string> read_link_at(int dirfd, const std::string& name) {
  std::string target(256, '\0');
  for (;;) {
    const ssize_t n = ::readlinkat(dirfd, name.c_str(), target.data(), target.size());
    if (n < 0) {
      return sys_error("read symlink " + in_quotes(name));
    }
    if (static_cast<size_t>(n) < target.size()) {
      target.resize(static_cast<size_t>(n));
      return target;
    }
    target.resize(target.size() * 2);
  }
}

// The path of an open file in this process's mount namespace, as the kernel resolved it.
Expected<std::string> proc_path(int fd, std::string_view display) {
  auto path = read_link_at(AT_FDCWD, "/proc/self/fd/" + std::to_string(fd));
  if (!path) {
    return SysError{"failed to find where " + in_quotes(display) + " leads: " + path.error().message,
                    path.error().errnum};
  }
  return path;
}

}  // namespace

Expected<HostRoot> HostRoot::open(const std::filesystem::path& dir, Resolver resolver) {
  Fd fd(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!fd) {
    return sys_error("open host root " + in_quotes(dir.string()));
  }
  if (resolver == Resolver::automatic) {
    // Probe once: kernels before 5.6 answer ENOSYS, seccomp profiles may answer EPERM.
    open_how how{};
    how.flags = O_PATH | O_CLOEXEC;
    how.resolve = RESOLVE_IN_ROOT;
    const long probe = ::syscall(SYS_openat2, fd.get(), ".", &how, sizeof how);
    if (probe >= 0) {
      ::close(static_cast<int>(probe));
    } else {
      resolver = Resolver::walk;
    }
  }
  return HostRoot(dir, std::move(fd), resolver);
}

std::filesystem::path HostRoot::default_path() {
  struct stat st {};
  if (::stat("/host", &st) == 0 && S_ISDIR(st.st_mode)) {
    return "/host";
  }
  return "/";
}

std::filesystem::path HostRoot::container_marker() {
  for (const char* marker : {"/run/.containerenv", "/.dockerenv"}) {
    struct stat st {};
    if (::stat(marker, &st) == 0) {
      return marker;
    }
  }
  return {};
}

// The last line of defence: the parsers refuse a NUL in anything that becomes a host path, and a path that
// still holds one would name its own prefix once it became a C string ("/etc\0/app" is "/etc").
SysError HostRoot::nul_in_path(std::string_view host_path) const {
  return SysError{"failed to open " + in_quotes(display(host_path)) + ": the path contains a NUL character", EINVAL};
}

std::string HostRoot::display(std::string_view host_path) const {
  std::string shown = m_path.string();
  if (shown == "/") {
    shown.clear();
  }
  while (!shown.empty() && shown.back() == '/') {
    shown.pop_back();
  }
  if (host_path.empty() || host_path.front() != '/') {
    shown += '/';
  }
  shown += host_path;
  return shown;
}

Expected<Fd> HostRoot::open(std::string_view host_path, int flags, Follow follow, mode_t mode) const {
  if (host_path.find('\0') != std::string_view::npos) {
    return nul_in_path(host_path);
  }
  flags |= O_CLOEXEC;
  if (follow == Follow::no) {
    flags |= O_NOFOLLOW;
  }
  if (m_resolver == Resolver::walk) {
    return open_walk(host_path, flags, follow, mode);
  }
  open_how how{};
  how.flags = static_cast<uint64_t>(flags);
  how.mode = (flags & (O_CREAT | O_TMPFILE)) != 0 ? mode : 0;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  const std::string rel = relative(host_path);
  // EAGAIN means a rename raced the lookup; the kernel asks the caller to retry.
  for (int attempt = 0; attempt < 16; ++attempt) {
    const long fd = ::syscall(SYS_openat2, m_fd.get(), rel.c_str(), &how, sizeof how);
    if (fd >= 0) {
      return Fd(static_cast<int>(fd));
    }
    if (errno != EAGAIN && errno != EINTR) {
      break;
    }
  }
  return sys_error("open " + in_quotes(display(host_path)));
}

Expected<std::string> HostRoot::read_file(std::string_view host_path, size_t max_bytes) const {
  auto fd = open(host_path, k_read_flags);
  if (!fd) {
    return fd.error();
  }
  return read_fd(fd->get(), display(host_path), max_bytes);
}

Expected<void> HostRoot::replace_file(std::string_view host_path, std::string_view data, mode_t mode) const {
  if (const size_t slash = host_path.rfind('/'); slash != std::string_view::npos && slash > 0) {
    if (auto made = make_directories(host_path.substr(0, slash)); !made) {
      return made.error();
    }
  }
  auto parent = open_parent(host_path);
  if (!parent) {
    return parent.error();
  }
  // An O_PATH descriptor cannot be fsynced: the same directory again, for reading.
  Fd dir(::openat(parent->first.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir) {
    return sys_error("open the directory of " + in_quotes(display(host_path)));
  }
  return write_file_atomic(dir.get(), parent->second, data, mode, display(host_path));
}

// The fallback for kernels without openat2: resolve one component at a time,
// never letting the kernel follow a symlink (O_NOFOLLOW on every step), and
// splice each link's target into the remaining path, restarting at the root
// for absolute targets. A stack of directory fds makes `..` exact (it is the
// parent we walked through, never above the root).
Expected<Fd> HostRoot::open_walk(std::string_view host_path, int flags, Follow follow, mode_t mode) const {
  const std::string shown = display(host_path);
  std::deque<std::string> pending = split_components(host_path);
  std::vector<Fd> stack;
  auto current = [&]() { return stack.empty() ? m_fd.get() : stack.back().get(); };
  int links = 0;

  while (!pending.empty()) {
    const std::string name = std::move(pending.front());
    pending.pop_front();
    const bool last = pending.empty();
    if (name == ".") {
      if (last) {
        pending.emplace_back(".");
        break;
      }
      continue;
    }
    if (name == "..") {
      if (!stack.empty()) {
        stack.pop_back();
      }
      if (last) {
        pending.emplace_back(".");
        break;
      }
      continue;
    }
    struct stat st {};
    if (::fstatat(current(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (last && errno == ENOENT) {
        pending.push_front(name);  // the last component may be created by open below
        break;
      }
      return sys_error("open " + in_quotes(shown));
    }
    if (S_ISLNK(st.st_mode) && (!last || follow == Follow::yes)) {
      if (++links > k_max_symlinks) {
        return sys_error("open " + in_quotes(shown), ELOOP);
      }
      auto target = read_link_at(current(), name);
      if (!target) {
        return sys_error("open " + in_quotes(shown), target.error().errnum);
      }
      if (!target->empty() && target->front() == '/') {
        stack.clear();
      }
      std::deque<std::string> spliced = split_components(*target);
      if (spliced.empty()) {
        spliced.emplace_back(".");
      }
      pending.insert(pending.begin(), spliced.begin(), spliced.end());
      continue;
    }
    if (last) {
      pending.push_front(name);
      break;
    }
    if (!S_ISDIR(st.st_mode)) {
      return sys_error("open " + in_quotes(shown), ENOTDIR);
    }
    Fd next(::openat(current(), name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next) {
      return sys_error("open " + in_quotes(shown));
    }
    stack.push_back(std::move(next));
  }

  const std::string last_name = pending.empty() ? std::string(".") : pending.front();
  Fd fd(::openat(current(), last_name.c_str(), flags | O_NOFOLLOW, mode));
  if (!fd) {
    // With Follow::yes the last component was checked not to be a symlink; a
    // symlink that appeared since gives ELOOP here instead of being followed.
    return sys_error("open " + in_quotes(shown));
  }
  return fd;
}

Expected<std::pair<Fd, std::string>> HostRoot::open_parent(std::string_view host_path) const {
  if (host_path.find('\0') != std::string_view::npos) {
    return nul_in_path(host_path);
  }
  std::string_view trimmed = host_path;
  while (trimmed.size() > 1 && trimmed.back() == '/') {
    trimmed.remove_suffix(1);
  }
  const size_t slash = trimmed.rfind('/');
  const std::string_view dir = slash == std::string_view::npos ? std::string_view("/") : trimmed.substr(0, slash + 1);
  const std::string name(slash == std::string_view::npos ? trimmed : trimmed.substr(slash + 1));
  if (name.empty() || name == "." || name == "..") {
    return SysError{"failed to open the directory of " + in_quotes(display(host_path)) + ": it names no entry", EINVAL};
  }
  auto fd = open(dir, O_PATH | O_DIRECTORY);
  if (!fd) {
    return fd.error();
  }
  return std::pair<Fd, std::string>(std::move(*fd), name);
}

Expected<Fd> HostRoot::make_directories(std::string_view host_path, mode_t mode) const {
  auto existing = open(host_path, O_PATH | O_DIRECTORY);
  if (existing || existing.error().errnum != ENOENT) {
    return existing;
  }
  auto parent = open_parent(host_path);
  if (!parent && parent.error().errnum == ENOENT) {
    std::string_view trimmed = host_path;
    while (trimmed.size() > 1 && trimmed.back() == '/') {
      trimmed.remove_suffix(1);
    }
    const size_t slash = trimmed.rfind('/');
    if (slash != std::string_view::npos && slash > 0) {
      auto made = make_directories(trimmed.substr(0, slash), mode);
      if (!made) {
        return made;
      }
      parent = open_parent(host_path);
    }
  }
  if (!parent) {
    return parent.error();
  }
  auto& [dirfd, name] = *parent;
  if (::mkdirat(dirfd.get(), name.c_str(), mode) != 0 && errno != EEXIST) {
    return sys_error("create directory " + in_quotes(display(host_path)));
  }
  return open(host_path, O_PATH | O_DIRECTORY);
}

Expected<std::string> HostRoot::resolve(std::string_view host_path, Follow follow) const {
  if (host_path.find('\0') != std::string_view::npos) {
    return nul_in_path(host_path);
  }
  // `..` after a symlink climbs from where the link leads, which a lexical rest cannot say: refused.
  std::vector<std::string> parts;
  for (std::string& part : split_components(host_path)) {
    if (part == "..") {
      return SysError{"failed to resolve " + in_quotes(display(host_path)) + ": it climbs with '..'", EINVAL};
    }
    if (part != ".") {
      parts.push_back(std::move(part));
    }
  }
  std::string last;
  if (follow == Follow::no && !parts.empty()) {
    last = parts.back();
    parts.pop_back();
  }
  // The longest prefix that exists; the root always does.
  size_t existing = parts.size();
  std::string prefix;
  Fd fd;
  for (;; --existing) {
    prefix = "/";
    for (size_t i = 0; i < existing; ++i) {
      prefix += (i == 0 ? "" : "/") + parts[i];
    }
    auto opened = open(prefix, O_PATH);
    if (opened) {
      fd = std::move(*opened);
      break;
    }
    if ((opened.error().errnum != ENOENT && opened.error().errnum != ENOTDIR) || existing == 0) {
      return opened.error();
    }
  }
  auto root_path = proc_path(m_fd.get(), display("/"));
  auto real = proc_path(fd.get(), display(prefix));
  if (!root_path || !real) {
    return root_path ? real.error() : root_path.error();
  }
  // Both are the kernel's own spelling of the same mount namespace, so a prefix of one is a prefix of the other.
  std::string resolved;
  if (*real == *root_path) {
    resolved = "/";
  } else if (*root_path == "/") {
    resolved = *real;
  } else if (real->starts_with(*root_path + "/")) {
    resolved = real->substr(root_path->size());
  } else {
    return SysError{"failed to resolve " + in_quotes(display(host_path)) + ": it leads to " + in_quotes(*real) +
                        ", outside " + in_quotes(*root_path),
                    EXDEV};
  }
  for (size_t i = existing; i < parts.size(); ++i) {
    resolved += (resolved.ends_with('/') ? "" : "/") + parts[i];
  }
  if (!last.empty()) {
    resolved += (resolved.ends_with('/') ? "" : "/") + last;
  }
  return resolved;
}

}  // namespace hoist
