#include "hoist/sys/host_dir.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "hoist/sys/atomic_symlink.hpp"
#include "hoist/sys/directory.hpp"
#include "hoist/util/text.hpp"

namespace hoist {

namespace {

/// "/opt/app/" -> {"/opt", "app"}; "/opt" -> {"/", "opt"}; "/" -> {"/", "/"}.
std::pair<std::string, std::string> split_host_path(const std::string& host_path) {
  std::string trimmed = host_path;
  while (trimmed.size() > 1 && trimmed.back() == '/') {
    trimmed.pop_back();
  }
  const size_t slash = trimmed.rfind('/');
  std::string parent = slash == std::string::npos || slash == 0 ? "/" : trimmed.substr(0, slash);
  return {std::move(parent), trimmed.substr(slash + 1)};
}

}  // namespace

Expected<HostDir> HostDir::open(const HostRoot& root, const std::string& host_path) {
  auto fd = root.open(host_path, O_RDONLY | O_DIRECTORY);
  if (!fd) {
    return fd.error();
  }
  return HostDir(std::move(*fd), root.display(host_path));
}

Expected<HostDir> HostDir::create(const HostRoot& root, const std::string& host_path, mode_t mode,
                                  std::vector<std::string>* made) {
  auto existing = open(root, host_path);
  if (existing || existing.error().errnum != ENOENT) {
    return existing;
  }
  const auto [parent_path, name] = split_host_path(host_path);
  auto parent = parent_path == host_path ? open(root, parent_path) : create(root, parent_path, mode, made);
  if (!parent) {
    return parent.error();
  }
  if (::mkdirat(parent->fd(), name.c_str(), mode) != 0) {
    if (errno != EEXIST) {
      return sys_error("create directory " + in_quotes(root.display(host_path)));
    }
  } else if (made != nullptr) {
    made->push_back(host_path);
  }
  if (auto synced = parent->sync(); !synced) {
    return synced.error();
  }
  return open(root, host_path);
}

Expected<void> HostDir::remove_made(const HostRoot& root, std::vector<std::string>& made) {
  std::vector<std::string> dirs;
  dirs.swap(made);
  for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) {
    const auto [parent_path, name] = split_host_path(*it);
    auto parent = open(root, parent_path);
    if (!parent) {
      return parent.error();
    }
    if (::unlinkat(parent->fd(), name.c_str(), AT_REMOVEDIR) != 0) {
      if (errno == ENOTEMPTY || errno == EEXIST || errno == ENOENT) {
        return {};  // not empty (or gone): neither it nor what holds it is this run's alone
      }
      return sys_error("remove the directory " + in_quotes(root.display(*it)) + " that this run made");
    }
    if (auto synced = parent->sync(); !synced) {
      return synced.error();
    }
  }
  return {};
}

Expected<HostDir> HostDir::child(const std::string& name) const {
  Fd fd(::openat(m_fd.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) {
    return sys_error("open " + in_quotes(display(name)));
  }
  return HostDir(std::move(fd), display(name));
}

Expected<HostDir> HostDir::make_child(const std::string& name) const {
  if (::mkdirat(m_fd.get(), name.c_str(), 0755) != 0) {
    return sys_error("create directory " + in_quotes(display(name)));
  }
  if (auto synced = sync(); !synced) {
    return synced.error();
  }
  return child(name);
}

std::string HostDir::display(std::string_view name) const {
  std::string shown = m_display;
  if (shown.empty() || shown.back() != '/') {
    shown += '/';
  }
  shown += name;
  return shown;
}

std::optional<struct stat> HostDir::stat(const std::string& name) const {
  struct stat st {};
  if (::fstatat(m_fd.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return std::nullopt;
  }
  return st;
}

Expected<std::vector<std::string>> HostDir::list() const {
  const int copy = ::openat(m_fd.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (copy < 0) {
    return sys_error("list " + in_quotes(m_display));
  }
  DIR* stream = ::fdopendir(copy);
  if (stream == nullptr) {
    ::close(copy);
    return sys_error("list " + in_quotes(m_display));
  }
  std::vector<std::string> names;
  while (const dirent* entry = ::readdir(stream)) {
    const std::string_view name = entry->d_name;
    if (name != "." && name != "..") {
      names.emplace_back(name);
    }
  }
  ::closedir(stream);
  return names;
}

Expected<void> HostDir::sync() const {
  if (::fsync(m_fd.get()) != 0) {
    return sys_error("fsync directory " + in_quotes(m_display));
  }
  return {};
}

Expected<void> HostDir::remove_entry(const std::string& name) const {
  const std::string trash = temporary_name(name);
  if (::renameat(m_fd.get(), name.c_str(), m_fd.get(), trash.c_str()) != 0) {
    if (errno == ENOENT) {
      return {};
    }
    return sys_error("rename " + in_quotes(display(name)) + " to " + in_quotes(display(trash)));
  }
  if (auto synced = sync(); !synced) {
    return synced;
  }
  return remove_tree(m_fd.get(), trash.c_str(), display(trash));
}

Expected<int> HostDir::remove_leftovers(const std::function<bool(std::string_view)>& is_leftover) const {
  auto names = list();
  if (!names) {
    return names.error();
  }
  int removed = 0;
  for (const auto& name : *names) {
    if (!is_leftover(name)) {
      continue;
    }
    if (auto gone = remove_tree(m_fd.get(), name.c_str(), display(name)); !gone) {
      return gone.error();
    }
    ++removed;
  }
  return removed;
}

}  // namespace hoist
