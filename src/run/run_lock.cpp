#include "run_lock.hpp"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <string>

#include "hoist/util/error.hpp"

namespace hoist {

Lock take_run_lock(const Context& context) {
  const HostRoot& root = context.root();
  const std::string& path = context.options.lock_file;
  auto lock = Lock::acquire(root, path, context.options.lock_timeout(), [&](long holder) {
    spdlog::info("waiting up to {:g} s for the lock {} held by {}", context.options.lock_timeout_seconds,
                 root.display(path), holder > 0 ? "pid " + std::to_string(holder) : std::string("another process"));
  });
  if (!lock) {
    if (lock.error().errnum == ETIMEDOUT) {
      throw Error(ExitCode::lock_timeout, lock.error().message);
    }
    throw Failure(lock.error().message);
  }
  spdlog::info("lock taken: {}", root.display(path));
  return std::move(*lock);
}

}  // namespace hoist
