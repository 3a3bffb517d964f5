#include <fcntl.h>
#include <sys/resource.h>

#include <catch2/catch.hpp>
#include <exception>
#include <filesystem>
#include <fstream>
#include <stop_token>
#include <string>

#include "hoist/util/fd.hpp"
#include "hoist/util/work_pool.hpp"
#include "scoped_temp_dir.hpp"
#include "tree_node.hpp"

namespace hoist::transfer {

TEST_CASE("tree_bytes counts a directory of more subdirectories than the process may hold open",
          "[transfer][progress]") {
  namespace fs = std::filesystem;
  hoist::test::ScopedTempDir dir;
  uint64_t expected = 0;
  for (int d = 0; d < 600; ++d) {
    const fs::path sub = dir.path() / ("d" + std::to_string(d));
    fs::create_directory(sub);
    std::ofstream(sub / "f") << std::string(static_cast<size_t>(d), 'x');
    expected += static_cast<uint64_t>(d);
  }
  // A second name of one inode counts once.
  fs::create_hard_link(dir.path() / "d599" / "f", dir.path() / "d0" / "again");
  const Fd root(::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  REQUIRE(root);

  // 600 subdirectories under a limit of 256 descriptors: a walk that opened each subdirectory as it queued it
  // failed with "Too many open files" (and a first install's progress had no total).
  struct rlimit before {};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &before) == 0);
  struct rlimit tight = before;
  tight.rlim_cur = 256;
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &tight) == 0);
  uint64_t bytes = 0;
  std::string failure;
  try {
    WorkPool pool(4);
    bytes = tree_bytes(root.get(), dir.path().string(), pool, std::stop_token{});
  } catch (const std::exception& e) {
    failure = e.what();
  }
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &before) == 0);
  INFO(failure);
  CHECK(failure.empty());
  CHECK(bytes == expected);
}

}  // namespace hoist::transfer
