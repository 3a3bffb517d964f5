#include "hoist/sys/directory.hpp"
#include "hoist/util/text.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstddef>
#include <cstring>

namespace hoist {

namespace {

std::vector<std::string_view> split(std::string_view relpath) {
  std::vector<std::string_view> parts;
  while (!relpath.empty()) {
    const size_t slash = relpath.find('/');
    const std::string_view part = relpath.substr(0, slash);
    if (!part.empty()) {
      parts.push_back(part);
    }
    if (slash == std::string_view::npos) {
      break;
    }
    relpath.remove_prefix(slash + 1);
  }
  return parts;
}

/// Empties the directory open as `dirfd`; `display` is its path.
Expected<void> remove_contents(int dirfd, const std::string& display) {
  // Removing while reading may make getdents skip names: read all, remove, read again until empty.
  for (;;) {
    auto entries = read_directory(dirfd, display);
    if (!entries) {
      return entries.error();
    }
    if (entries->empty()) {
      return {};
    }
    for (const DirEntry& entry : *entries) {
      if (auto removed = remove_tree(dirfd, entry.name.c_str(), join_path(display, entry.name)); !removed) {
        return removed;
      }
    }
  }
}

}  // namespace

Expected<Fd> open_directory(int dirfd, const char* name, std::string_view display) {
  Fd fd(::openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) {
    return sys_error("open directory " + in_quotes(display));
  }
  return fd;
}

Expected<std::vector<DirEntry>> read_directory(int dirfd, std::string_view display) {
  if (::lseek(dirfd, 0, SEEK_SET) < 0) {
    return sys_error("read directory " + in_quotes(display));
  }
  std::vector<DirEntry> entries;
  alignas(dirent64) std::array<std::byte, 32768> buffer;
  for (;;) {
    const ssize_t n = ::getdents64(dirfd, buffer.data(), buffer.size());
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return sys_error("read directory " + in_quotes(display));
    }
    if (n == 0) {
      return entries;
    }
    for (ssize_t offset = 0; offset < n;) {
      const auto* entry = reinterpret_cast<const dirent64*>(buffer.data() + offset);
      offset += entry->d_reclen;
      const char* name = entry->d_name;
      if (name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'))) {
        continue;
      }
      entries.push_back(DirEntry{name, entry->d_type, entry->d_ino});
    }
  }
}

Expected<void> remove_tree(int dirfd, const char* name, std::string_view display) {
  if (::unlinkat(dirfd, name, 0) == 0 || errno == ENOENT) {
    return {};
  }
  if (errno != EISDIR) {
    return sys_error("remove " + in_quotes(display));
  }
  auto dir = open_directory(dirfd, name, display);
  if (!dir) {
    return dir.error();
  }
  if (auto emptied = remove_contents(dir->get(), std::string(display)); !emptied) {
    return emptied;
  }
  if (::unlinkat(dirfd, name, AT_REMOVEDIR) != 0 && errno != ENOENT) {
    return sys_error("remove directory " + in_quotes(display));
  }
  return {};
}

std::string fd_display(int fd) {
  std::string path(4096, '\0');
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = ::readlink(link.c_str(), path.data(), path.size());
  if (n <= 0 || static_cast<size_t>(n) >= path.size()) {
    return "fd " + std::to_string(fd);
  }
  path.resize(static_cast<size_t>(n));
  return path;
}

Expected<Fd> reopen_directory(int fd, std::string_view display) {
  Fd copy(::openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!copy) {
    return sys_error("open directory " + in_quotes(display));
  }
  return copy;
}

std::string join_path(std::string_view parent, std::string_view name) {
  if (parent.empty()) {
    return std::string(name);
  }
  std::string path;
  path.reserve(parent.size() + 1 + name.size());
  path.append(parent).append(1, '/').append(name);
  return path;
}

Expected<int> DirCursor::open(std::string_view relpath) {
  return descend(relpath, false);
}

Expected<int> DirCursor::open_if_present(std::string_view relpath) {
  return descend(relpath, true);
}

Expected<int> DirCursor::descend(std::string_view relpath, bool missing_ok) {
  const std::vector<std::string_view> parts = split(relpath);
  size_t common = 0;
  while (common < parts.size() && common < m_names.size() && parts[common] == m_names[common]) {
    ++common;
  }
  m_names.resize(common);
  m_fds.resize(common);
  while (m_names.size() < parts.size()) {
    const std::string name(parts[m_names.size()]);
    const int parent = m_fds.empty() ? m_root : m_fds.back().get();
    Fd fd(::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) {
      if (missing_ok && (errno == ENOENT || errno == ENOTDIR || errno == ELOOP)) {
        return -1;
      }
      std::string display = m_root_display;
      for (const std::string& done : m_names) {
        display += "/" + done;
      }
      return sys_error("open directory " + in_quotes(display + "/" + name));
    }
    m_names.push_back(name);
    m_fds.push_back(std::move(fd));
  }
  return m_fds.empty() ? m_root : m_fds.back().get();
}

void sort_by_inode(std::vector<DirEntry>& entries) {
  std::sort(entries.begin(), entries.end(), [](const DirEntry& a, const DirEntry& b) { return a.inode < b.inode; });
}

}  // namespace hoist
