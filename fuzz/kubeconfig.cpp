// libFuzzer target: a kubeconfig file, loaded as `hoist prepare --kubeconfig`
// loads it: YAML (libyaml events) into JSON, then the current context's cluster
// and user. Any input is loaded or refused with hoist::Error (exit 2 or 1);
// nothing else may escape, and an alias bomb must be refused, not expanded
// (libFuzzer's -rss_limit_mb catches a parser that grows).

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "hoist/kube/kube_config.hpp"
#include "hoist/util/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // A file in memory, read through its /proc/self/fd path as a real kubeconfig would be.
  static const int fd = ::memfd_create("kubeconfig", MFD_CLOEXEC);
  if (fd < 0 || ::ftruncate(fd, 0) != 0 || ::pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) {
    std::abort();
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  try {
    const hoist::KubeConfig config = hoist::KubeConfig::from_kubeconfig(path);
    if (config.host.empty() || config.port == 0) {
      std::abort();  // a loaded config always names its server
    }
  } catch (const hoist::Error&) {
    // refused, with its exit code
  }
  return 0;
}
