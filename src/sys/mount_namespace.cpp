#include "hoist/sys/mount_namespace.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "hoist/util/error.hpp"
#include "hoist/util/file_io.hpp"
#include "hoist/util/text.hpp"

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

namespace {

// The helper's answer, one message on its pipe: a tag byte, then the content or the error.
constexpr char k_found = 'F';
constexpr char k_missing = 'M';
constexpr char k_failed = 'E';

[[noreturn]] void read_file_helper(const MountNamespace& ns, const std::string& path, size_t max_bytes, int report) {
  std::string answer;
  if (auto entered = ns.enter(); !entered) {
    answer = k_failed + entered.error().message;
  } else if (Fd fd(::open(path.c_str(), k_read_flags)); !fd) {
    answer = errno == ENOENT ? std::string(1, k_missing) : k_failed + sys_error("open " + in_quotes(path)).message;
  } else if (auto text = read_fd(fd.get(), path, max_bytes); !text) {
    answer = k_failed + text.error().message;
  } else {
    answer = k_found + *text;
  }
  ::_exit(write_all(report, answer, "the helper's pipe") ? 0 : 1);
}

}  // namespace

Expected<std::optional<std::string>> MountNamespace::read_file(const std::string& path, size_t max_bytes) const {
  const std::string what = "read " + in_quotes(path) + " in mount namespace " + in_quotes(m_path);
  int pipe[2];
  if (::pipe2(pipe, O_CLOEXEC) != 0) {
    return sys_error(what + ": cannot create a pipe");
  }
  Fd report(pipe[0]);
  Fd report_write(pipe[1]);
  const pid_t pid = ::fork();
  if (pid < 0) {
    return sys_error(what + ": cannot fork a helper");
  }
  if (pid == 0) {
    report.reset();
    read_file_helper(*this, path, max_bytes, report_write.get());
  }
  report_write.reset();
  std::string answer;
  char buffer[4096];
  int read_errno = 0;
  for (;;) {
    const ssize_t n = ::read(report.get(), buffer, sizeof(buffer));
    if (n > 0) {
      answer.append(buffer, static_cast<size_t>(n));
    } else if (n == 0) {
      break;
    } else if (errno != EINTR) {
      read_errno = errno;
      break;
    }
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (read_errno != 0) {
    return SysError{system_message(what, read_errno), read_errno};
  }
  if (answer.empty()) {
    return SysError{"failed to " + what + ": the helper ended without an answer", EIO};
  }
  switch (answer.front()) {
    case k_found: return std::optional<std::string>(answer.substr(1));
    case k_missing: return std::optional<std::string>();
    default: return SysError{answer.substr(1), EIO};
  }
}

}  // namespace hoist
