// hoist-deny-syscalls NR[,NR...] -- COMMAND [ARG...]
//
// Runs COMMAND with the listed system calls answered by ENOSYS, as a kernel
// without them would answer. The test suite runs the transfer engine's unit
// tests under it to cover its fallbacks for kernels before 6.13, and
// scripts/bench measures hoist on such a "kernel" beside the real one.

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../deny_syscalls.hpp"

int main(int argc, char** argv) {
  if (argc < 4 || std::strcmp(argv[2], "--") != 0) {
    std::fprintf(stderr, "usage: %s NR[,NR...] -- COMMAND [ARG...]\n", argv[0]);
    return 2;
  }
  std::vector<unsigned> numbers;
  const std::string list = argv[1];
  for (size_t start = 0; start <= list.size();) {
    const size_t end = std::min(list.find(',', start), list.size());
    const std::string item = list.substr(start, end - start);
    char* rest = nullptr;
    errno = 0;
    const unsigned long nr = std::strtoul(item.c_str(), &rest, 10);
    if (item.empty() || *rest != '\0' || errno != 0 || nr > 4095) {
      std::fprintf(stderr, "%s: '%s' is not a system call number\n", argv[0], item.c_str());
      return 2;
    }
    numbers.push_back(static_cast<unsigned>(nr));
    start = end + 1;
  }
  if (!hoist::test::deny_syscalls(numbers)) {
    std::fprintf(stderr, "%s: cannot install the seccomp filter: %s\n", argv[0], std::strerror(errno));
    return 1;
  }
  ::execvp(argv[3], argv + 3);
  std::fprintf(stderr, "%s: cannot run '%s': %s\n", argv[0], argv[3], std::strerror(errno));
  return 127;
}
