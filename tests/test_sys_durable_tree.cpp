#include <fcntl.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <string>

#include "hoist/sys/durable_tree.hpp"
#include "hoist/util/fd.hpp"
#include "scoped_temp_dir.hpp"

using hoist::Durability;
using hoist::make_tree_durable;
using hoist::syncfs_reports_errors;
using hoist::test::ScopedTempDir;
using hoist::test::write_files;

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
  write_files(dir / "tree", 20, 3, 100);
  std::filesystem::create_symlink("d0/f0", dir / "tree/link");
  std::filesystem::create_symlink("/nonexistent", dir / "tree/dangling");
  REQUIRE(::mkfifo((dir / "tree/fifo").c_str(), 0600) == 0);
  for (Durability durability : {Durability::per_file_fsync, Durability::syncfs}) {
    hoist::Fd tree(::open((dir / "tree").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    CHECK(make_tree_durable(tree.get(), durability, "tree").has_value());
  }
}
