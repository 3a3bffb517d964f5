#pragma once

// Makes the kernel refuse some system calls to this process and its children,
// as an older kernel without them does (ENOSYS): a seccomp filter, the same
// mechanism container runtimes use to hide system calls. Tests use it to run
// the fallbacks that newer calls replace.

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>

#include <cerrno>
#include <vector>

namespace hoist::test {

/// Installs a filter that answers the given system call numbers (of this
/// process's native ABI) with ENOSYS. Irrevocable. Returns false with errno set on failure.
inline bool deny_syscalls(const std::vector<unsigned>& numbers) {
  std::vector<sock_filter> program;
  program.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)));
  for (unsigned nr : numbers) {
    program.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr, 0, 1));
    program.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)));
  }
  program.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  const sock_fprog fprog{static_cast<unsigned short>(program.size()), program.data()};
  return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog) == 0;
}

/// getxattrat(2) and listxattrat(2), Linux 6.13.
inline const std::vector<unsigned> k_xattrat_calls{464, 465};

}  // namespace hoist::test
