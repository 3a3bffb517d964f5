#include <fcntl.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "hoist/sys/durable_tree.hpp"
#include "hoist/util/fd.hpp"
#include "scoped_temp_dir.hpp"

using hoist::Durability;
using hoist::make_tree_durable;
using hoist::syncfs_reports_errors;
using hoist::test::ScopedTempDir;
using hoist::test::write_text;

namespace {

// `files` files of `size` bytes in `dirs` directories under `root`.
void fill(const std::filesystem::path& root, int files, int dirs, size_t size) {
  const std::string content(size, 'x');
  for (int i = 0; i < files; ++i) {
    write_text(root / ("d" + std::to_string(i % dirs)) / ("f" + std::to_string(i)), content);
  }
}

double durable_seconds(const std::filesystem::path& root, Durability durability) {
  hoist::Fd dir(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  const auto start = std::chrono::steady_clock::now();
  make_tree_durable(dir.get(), durability, root.string()).value();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

TEST_CASE("syncfs is trusted from Linux 5.8, which reports writeback errors through it", "[durable]") {
  CHECK(syncfs_reports_errors("5.8.0"));
  CHECK(syncfs_reports_errors("6.1.0-18-amd64"));
  CHECK(syncfs_reports_errors("5.10.0-28-cloud-amd64"));
  CHECK_FALSE(syncfs_reports_errors("5.7.19"));
  CHECK_FALSE(syncfs_reports_errors("4.19.0-26-amd64"));
  CHECK_FALSE(syncfs_reports_errors("garbage"));
  CHECK_FALSE(syncfs_reports_errors(""));
}

TEST_CASE("both strategies make a tree with links, fifos and nested directories durable", "[durable]") {
  ScopedTempDir dir;
  fill(dir / "tree", 20, 3, 100);
  std::filesystem::create_symlink("d0/f0", dir / "tree/link");
  std::filesystem::create_symlink("/nonexistent", dir / "tree/dangling");
  REQUIRE(::mkfifo((dir / "tree/fifo").c_str(), 0600) == 0);
  for (Durability durability : {Durability::per_file_fsync, Durability::syncfs}) {
    hoist::Fd tree(::open((dir / "tree").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    CHECK(make_tree_durable(tree.get(), durability, "tree").has_value());
  }
}

// The measurement behind the choice of syncfs (README, "Durability"): run with
// `hoist_tests "[.benchmark]"`, on the filesystem to measure (TMPDIR), e.g.
// HOIST_BENCH_FILES=5000 HOIST_BENCH_SIZE=16384.
TEST_CASE("benchmark: per-file fsync against one syncfs", "[.benchmark]") {
  const int files = std::getenv("HOIST_BENCH_FILES") != nullptr ? std::atoi(std::getenv("HOIST_BENCH_FILES")) : 2000;
  const size_t size =
      std::getenv("HOIST_BENCH_SIZE") != nullptr ? std::strtoul(std::getenv("HOIST_BENCH_SIZE"), nullptr, 10) : 8192;
  for (int round = 0; round < 3; ++round) {
    ScopedTempDir dir;
    ::sync();  // start both from a clean page cache
    fill(dir / "fsync", files, files / 50 + 1, size);
    const double fsync_seconds = durable_seconds(dir / "fsync", Durability::per_file_fsync);
    ::sync();
    fill(dir / "syncfs", files, files / 50 + 1, size);
    const double syncfs_seconds = durable_seconds(dir / "syncfs", Durability::syncfs);
    std::printf("%d files of %zu bytes: per-file fsync %.3f s, syncfs %.3f s (%.1fx)\n", files, size, fsync_seconds,
                syncfs_seconds, fsync_seconds / syncfs_seconds);
  }
}
