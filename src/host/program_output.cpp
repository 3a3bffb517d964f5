#include "hoist/host/program_output.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "hoist/util/fd.hpp"
#include "hoist/util/text.hpp"

namespace hoist {

namespace {

int wait_for(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

}  // namespace

Expected<ProgramOutput> run_in_host_root(const HostRoot& root, const std::string& host_path,
                                         const std::vector<std::string>& args, std::chrono::milliseconds timeout,
                                         std::size_t max_output, const std::vector<std::string>& environment) {
  const std::string shown = escaped(root.display(host_path));
  // Checked inside the root first: a missing program is an answer (nothing installed), not a failure.
  auto program = root.open(host_path, O_PATH);
  if (!program) {
    return program.error();
  }
  struct stat st {};
  if (::fstat(program->get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return SysError{"failed to run '" + shown + "': not a regular file", EACCES};
  }
  // Everything the child needs is made before fork(): after it, only async-signal-safe calls.
  std::vector<std::string> argv_text{host_path};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& arg : argv_text) {
    argv.push_back(arg.data());
  }
  argv.push_back(nullptr);
  std::string path_env = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  std::string lang_env = "LC_ALL=C";
  std::vector<std::string> env_text{path_env, lang_env};
  env_text.insert(env_text.end(), environment.begin(), environment.end());
  std::vector<char*> envp;
  for (auto& entry : env_text) {
    envp.push_back(entry.data());
  }
  envp.push_back(nullptr);
  const std::string root_path = root.path().string();

  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return sys_error("create a pipe for '" + shown + "'");
  }
  Fd read_end(pipe_fds[0]);
  Fd write_end(pipe_fds[1]);
  const pid_t pid = ::fork();
  if (pid < 0) {
    return sys_error("start '" + shown + "'");
  }
  if (pid == 0) {
    // The child: the host's root as its own, the pipe as stdout and stderr, nothing else open.
    // A run killed (SIGKILL) must not leave a snapshot or a restore running without it.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null < 0 || ::dup2(null, 0) < 0 || ::dup2(write_end.get(), 1) < 0 || ::dup2(write_end.get(), 2) < 0 ||
        ::chroot(root_path.c_str()) != 0 || ::chdir("/") != 0) {
      ::_exit(127);
    }
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  write_end = Fd();
  ProgramOutput result;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char buffer[4096];
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd poll_fd{read_end.get(), POLLIN, 0};
    const int ready = left.count() > 0 ? ::poll(&poll_fd, 1, static_cast<int>(left.count())) : 0;
    if (ready < 0 && errno == EINTR) {
      continue;
    }
    if (ready <= 0) {
      ::kill(pid, SIGKILL);
      wait_for(pid);
      return SysError{
          "failed to run '" + shown + "': it did not finish within " + std::to_string(timeout.count() / 1000) + " s",
          ETIMEDOUT};
    }
    const ssize_t n = ::read(read_end.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      break;
    }
    const std::size_t room = max_output - std::min(max_output, result.output.size());
    result.output.append(buffer, std::min(room, static_cast<std::size_t>(n)));
  }
  // The output is closed; a program that closed it early and goes on running still gets only the time left.
  int status = 0;
  pid_t done = 0;
  while ((done = ::waitpid(pid, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < deadline) {
    ::usleep(10000);
  }
  if (done == 0) {
    ::kill(pid, SIGKILL);
    wait_for(pid);
    return SysError{
        "failed to run '" + shown + "': it did not finish within " + std::to_string(timeout.count() / 1000) + " s",
        ETIMEDOUT};
  }
  result.exit_status = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
  return result;
}

}  // namespace hoist
