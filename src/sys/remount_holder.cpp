// The remount helper: a forked child that makes mounts writable in a mount
// namespace (setns'd into, when it is the host's) and holds them until its
// command pipe closes. It talks to its parent in tab-separated lines:
//
//   mount <path> <ancestor> <dev> <ino> <changed> <scope> <id> <target> <source> <fstype> <root> <vfs> <fs>
//   ready                  every path is done
//   error <message>        it gave up (and restored what it had changed)
//   restored | restore-error <message>   after the pipe closed
#include "hoist/sys/remount_holder.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <optional>
#include <utility>

#include "hoist/util/error.hpp"
#include "hoist/util/file_io.hpp"
#include "hoist/util/text.hpp"

namespace hoist {

namespace {

using Fields = std::vector<std::string>;

std::string clean(std::string value) {
  for (char& c : value) {
    if (c == '\t' || c == '\n') {
      c = ' ';
    }
  }
  return value;
}

void send(int fd, const Fields& fields) {
  std::string line;
  for (const auto& field : fields) {
    line += (line.empty() ? "" : "\t") + clean(field);
  }
  line += '\n';
  // A dead parent (EPIPE, SIGPIPE ignored) does not stop the helper: it still
  // has to put the mounts back.
  (void)write_all(fd, line, "the remount report pipe");
}

// Reads one line from the helper; nullopt at end of file.
std::optional<Fields> receive(int fd, std::string& buffer) {
  for (;;) {
    if (const auto end = buffer.find('\n'); end != std::string::npos) {
      const std::string line = buffer.substr(0, end);
      buffer.erase(0, end + 1);
      Fields fields;
      size_t start = 0;
      for (;;) {
        const auto tab = line.find('\t', start);
        fields.push_back(line.substr(start, tab == std::string::npos ? std::string::npos : tab - start));
        if (tab == std::string::npos) {
          break;
        }
        start = tab + 1;
      }
      return fields;
    }
    char chunk[4096];
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return std::nullopt;
    }
    buffer.append(chunk, static_cast<size_t>(n));
  }
}

std::string parent_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == 0 || slash == std::string::npos ? std::string("/") : path.substr(0, slash);
}

// The path itself or its nearest existing ancestor, opened O_PATH inside the
// root (a destination need not exist before its first install).
Expected<std::pair<Fd, std::string>> open_nearest(const HostRoot& root, std::string path) {
  for (;;) {
    auto fd = root.open(path, O_PATH);
    if (fd) {
      return std::make_pair(std::move(*fd), path);
    }
    if ((fd.error().errnum != ENOENT && fd.error().errnum != ENOTDIR) || path == "/") {
      return fd.error();
    }
    path = parent_of(path);
  }
}

Expected<Fd> open_mountinfo(int proc_fd) {
  Fd fd(::openat(proc_fd, "thread-self/mountinfo", O_RDONLY | O_CLOEXEC));
  if (!fd) {
    return sys_error("open '/proc/thread-self/mountinfo'");
  }
  return fd;
}

// Finds the mount holding `fd` in the current namespace's table.
Expected<MountEntry> mount_of(int proc_fd, int fd, const std::string& shown) {
  auto id = mount_id_of(fd, shown);
  if (!id) {
    return id.error();
  }
  auto table = open_mountinfo(proc_fd);
  if (!table) {
    return table.error();
  }
  return find_mount(table->get(), *id, "/proc/thread-self/mountinfo");
}

struct Held {
  MountEntry entry;
  RemountScope scope;
  Fd root;
};

std::string restore_all(std::vector<Held>& held) {
  std::string errors;
  for (auto it = held.rbegin(); it != held.rend(); ++it) {
    if (auto done = remount_read_only(it->entry, it->scope, it->root.get()); !done) {
      errors += (errors.empty() ? "" : "; ") + done.error().message;
    }
  }
  held.clear();
  return errors;
}

[[noreturn]] void helper_main(int command, int report, int proc_fd, const HostRoot& root,
                              const MountNamespace* host_namespace, const std::vector<std::string>& paths,
                              const std::vector<HeldMount>& left_writable) {
  // Signals for the process group (Ctrl-C, a shutdown's SIGTERM) must not kill
  // the helper before it has put the mounts back; its parent tells it when.
  ::signal(SIGTERM, SIG_IGN);
  ::signal(SIGINT, SIG_IGN);
  ::signal(SIGHUP, SIG_IGN);
  ::signal(SIGPIPE, SIG_IGN);
  std::vector<Held> held;
  try {
    std::optional<HostRoot> host_root;
    if (host_namespace != nullptr) {
      if (auto entered = host_namespace->enter(); !entered) {
        send(report, {"error", entered.error().message});
        ::_exit(1);
      }
      // In the host's namespace the host root is its root.
      auto opened = HostRoot::open("/");
      if (!opened) {
        send(report, {"error", opened.error().message});
        ::_exit(1);
      }
      host_root.emplace(std::move(*opened));
    }
    const HostRoot& resolve_in = host_root ? *host_root : root;
    for (const auto& path : paths) {
      auto nearest = open_nearest(resolve_in, path);
      if (!nearest) {
        throw Failure(nearest.error().message);
      }
      auto& [fd, ancestor] = *nearest;
      struct stat st {};
      if (::fstat(fd.get(), &st) != 0) {
        throw Failure(system_message("stat " + in_quotes(ancestor), errno));
      }
      const MountEntry entry = mount_of(proc_fd, fd.get(), ancestor).value();
      bool changed = false;
      RemountScope scope = RemountScope::mount;
      const bool known = std::any_of(held.begin(), held.end(), [&](const Held& h) { return h.entry.id == entry.id; });
      // Writable needs both: the mount's own flag and its filesystem's.
      if ((entry.mount_read_only || entry.filesystem_read_only) && !known) {
        Fd mount_root = open_mount_root(entry).value();
        scope = remount_writable(entry, mount_root.get()).value();
        held.push_back({entry, scope, std::move(mount_root)});
        changed = true;
        // squashfs and other read-only filesystems accept the remount and stay read-only.
        if (const MountEntry after = mount_of(proc_fd, fd.get(), ancestor).value();
            after.mount_read_only || after.filesystem_read_only) {
          throw Failure("failed to make " + entry.describe() + " writable: it is still read-only after the remount (" +
                        entry.fstype + " cannot be written)");
        }
      } else if (const HeldMount* left = find_held_mount(
                     left_writable, host_namespace != nullptr ? MountView::host : MountView::own, entry.id);
                 left != nullptr && !known) {
        // Writable because an earlier holder could not put it back: this one does.
        scope = left->scope;
        held.push_back({entry, scope, open_mount_root(entry).value()});  // as it is now: its other flags kept
        changed = true;
      }
      send(report, {"mount", path, ancestor, std::to_string(st.st_dev), std::to_string(st.st_ino), changed ? "1" : "0",
                    scope == RemountScope::mount ? "mount" : "filesystem", std::to_string(entry.id), entry.target,
                    entry.source, entry.fstype, entry.root, entry.vfs_options, entry.fs_options});
    }
    send(report, {"ready"});
  } catch (const std::exception& e) {
    const std::string errors = restore_all(held);
    send(report, {"error", std::string(e.what()) + (errors.empty() ? "" : " (and then: " + errors + ")")});
    ::_exit(1);
  }
  // Hold the remounts until the parent closes its end (or dies).
  for (;;) {
    char byte = 0;
    const ssize_t n = ::read(command, &byte, 1);
    if (n == 0 || (n < 0 && errno != EINTR)) {
      break;
    }
  }
  const std::string errors = restore_all(held);
  send(report, errors.empty() ? Fields{"restored"} : Fields{"restore-error", errors});
  ::_exit(errors.empty() ? 0 : 1);
}

MountEntry entry_from(const Fields& f) {
  MountEntry entry;
  entry.id = std::atoi(f[7].c_str());
  entry.target = f[8];
  entry.source = f[9];
  entry.fstype = f[10];
  entry.root = f[11];
  entry.vfs_options = f[12];
  entry.fs_options = f[13];
  entry.mount_read_only = f[12].starts_with("ro,") || f[12] == "ro";
  entry.filesystem_read_only = f[13].starts_with("ro,") || f[13] == "ro";
  return entry;
}

}  // namespace

const HeldMount* find_held_mount(const std::vector<HeldMount>& mounts, MountView view, int id) {
  const auto it = std::find_if(mounts.begin(), mounts.end(),
                               [&](const HeldMount& m) { return m.view == view && m.entry.id == id; });
  return it == mounts.end() ? nullptr : &*it;
}

RemountHolder::RemountHolder(RemountHolder&& other) noexcept
    : m_helper(std::exchange(other.m_helper, -1)),
      m_command(std::move(other.m_command)),
      m_report(std::move(other.m_report)),
      m_mounts(std::move(other.m_mounts)),
      m_local(std::move(other.m_local)) {}

RemountHolder::~RemountHolder() {
  (void)restore();
}

Expected<RemountHolder> RemountHolder::engage(const HostRoot& root, const MountNamespace* host_namespace,
                                              const std::vector<std::string>& host_paths,
                                              const std::vector<HeldMount>& left_writable) {
  RemountHolder holder;
  Fd proc(::open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!proc) {
    return sys_error("open '/proc'");
  }
  int command[2];
  int report[2];
  if (::pipe2(command, O_CLOEXEC) != 0) {
    return sys_error("create the remount helper's pipe");
  }
  holder.m_command.reset(command[1]);
  Fd command_read(command[0]);
  if (::pipe2(report, O_CLOEXEC) != 0) {
    return sys_error("create the remount helper's pipe");
  }
  holder.m_report.reset(report[0]);
  Fd report_write(report[1]);

  const pid_t pid = ::fork();
  if (pid < 0) {
    return sys_error("fork the remount helper");
  }
  if (pid == 0) {
    holder.m_command.reset();
    holder.m_report.reset();
    helper_main(command_read.get(), report_write.get(), proc.get(), root, host_namespace, host_paths, left_writable);
  }
  holder.m_helper = pid;
  command_read.reset();
  report_write.reset();

  std::string buffer;
  for (;;) {
    auto line = receive(holder.m_report.get(), buffer);
    if (!line || line->empty()) {
      (void)holder.restore();
      return SysError{"failed to remount: the remount helper ended without a report", EIO};
    }
    const Fields& f = *line;
    if (f[0] == "ready") {
      break;
    }
    if (f[0] == "error") {
      (void)holder.restore();
      return SysError{f.size() > 1 ? f[1] : "failed to remount", EIO};
    }
    if (f[0] == "mount" && f.size() == 14) {
      HeldMount mount;
      mount.host_path = f[1];
      mount.view = host_namespace != nullptr ? MountView::host : MountView::own;
      mount.entry = entry_from(f);
      mount.changed = f[5] == "1";
      mount.scope = f[6] == "mount" ? RemountScope::mount : RemountScope::filesystem;
      holder.m_mounts.push_back(mount);
      if (host_namespace == nullptr) {
        continue;
      }
      // Our own copy of that mount: the same directory, and writable too.
      const std::string& ancestor = f[2];
      auto fd = root.open(ancestor, O_PATH);
      struct stat st {};
      if (!fd || ::fstat(fd->get(), &st) != 0 || std::to_string(st.st_dev) != f[3] ||
          std::to_string(st.st_ino) != f[4]) {
        (void)holder.restore();
        return SysError{"failed to remount for " + in_quotes(f[1]) + ": the host's " + in_quotes(ancestor) +
                            " (on mount " + mount.entry.describe() + ") is not what '" + root.display(ancestor) +
                            "' is here: this mount namespace does not see that mount (mounted after the pod "
                            "started, or the host root is not a recursive bind of the host's /)",
                        EXDEV};
      }
      auto own = mount_of(proc.get(), fd->get(), root.display(ancestor));
      if (!own) {
        (void)holder.restore();
        return own.error();
      }
      const bool known = std::any_of(holder.m_local.begin(), holder.m_local.end(),
                                     [&](const LocalChange& c) { return c.entry.id == own->id; });
      if ((own->mount_read_only || own->filesystem_read_only) && !known) {
        auto mount_root = open_mount_root(*own);
        if (!mount_root) {
          (void)holder.restore();
          return mount_root.error();
        }
        // Only our copy's own flag: the filesystem is the helper's business.
        own->filesystem_read_only = false;
        auto scope = remount_writable(*own, mount_root->get());
        if (!scope) {
          (void)holder.restore();
          return scope.error();
        }
        holder.m_local.push_back({*own, *scope, std::move(*mount_root)});
        if (auto again = mount_of(proc.get(), fd->get(), root.display(ancestor));
            !again || again->mount_read_only || again->filesystem_read_only) {
          (void)holder.restore();
          return SysError{"failed to make " + own->describe() +
                              " writable in this mount namespace: it is still "
                              "read-only after the remount",
                          EROFS};
        }
        HeldMount local;
        local.host_path = f[1];
        local.view = MountView::own;
        local.entry = *own;
        local.changed = true;
        local.scope = *scope;
        holder.m_mounts.push_back(local);
      } else if (const HeldMount* left = find_held_mount(left_writable, MountView::own, own->id);
                 left != nullptr && !known) {
        // Our copy, left writable by an earlier holder: put back with this one's.
        auto mount_root = open_mount_root(*own);
        if (!mount_root) {
          (void)holder.restore();
          return mount_root.error();
        }
        holder.m_local.push_back({*own, left->scope, std::move(*mount_root)});
        holder.m_mounts.push_back(*left);
      }
      continue;
    }
    (void)holder.restore();
    return SysError{"failed to remount: unexpected report from the remount helper", EIO};
  }
  return holder;
}

Expected<void> RemountHolder::restore() {
  std::string errors;
  for (auto it = m_local.rbegin(); it != m_local.rend(); ++it) {
    if (auto done = remount_read_only(it->entry, it->scope, it->mount_root.get()); !done) {
      errors += (errors.empty() ? "" : "; ") + done.error().message;
    }
  }
  m_local.clear();
  if (m_helper > 0) {
    m_command.reset();  // EOF: the helper puts its remounts back
    std::string buffer;
    while (auto line = receive(m_report.get(), buffer)) {
      if (!line->empty() && (*line)[0] == "restore-error" && line->size() > 1) {
        errors += (errors.empty() ? "" : "; ") + (*line)[1];
      }
    }
    m_report.reset();
    int status = 0;
    while (::waitpid(m_helper, &status, 0) < 0 && errno == EINTR) {
    }
    m_helper = -1;
  }
  if (!errors.empty()) {
    return SysError{errors, EIO};
  }
  return {};
}

}  // namespace hoist
