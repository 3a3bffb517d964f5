#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <string>

#include <catch2/catch.hpp>

#include "hoist/sys/mount_namespace.hpp"
#include "hoist/sys/mount_table.hpp"
#include "hoist/util/fd.hpp"

using hoist::Fd;

TEST_CASE("the mount holding a file is found by its id in the mount table", "[mount_table]") {
  Fd root(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  REQUIRE(root);
  auto id = hoist::mount_id_of(root.get(), "/");
  REQUIRE(id.has_value());
  Fd table(::open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC));
  REQUIRE(table);
  auto entry = hoist::find_mount(table.get(), *id, "/proc/self/mountinfo");
  REQUIRE(entry.has_value());
  CHECK(entry->id == *id);
  CHECK(entry->target == "/");
  CHECK_FALSE(entry->fstype.empty());
  CHECK((entry->vfs_options.starts_with("rw") || entry->vfs_options.starts_with("ro")));
  CHECK(entry->mount_read_only == entry->vfs_options.starts_with("ro"));
  CHECK(entry->describe().starts_with("'/' (" + entry->fstype + " on "));

  Fd proc(::open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC));
  auto proc_id = hoist::mount_id_of(proc.get(), "/proc");
  REQUIRE(proc_id.has_value());
  CHECK(*proc_id != *id);
  auto proc_entry = hoist::find_mount(table.get(), *proc_id, "/proc/self/mountinfo");
  REQUIRE(proc_entry.has_value());
  CHECK(proc_entry->fstype == "proc");
  CHECK(proc_entry->target == "/proc");
}

TEST_CASE("a mount id that is not in the table is ENOENT naming the table", "[mount_table]") {
  Fd table(::open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC));
  auto entry = hoist::find_mount(table.get(), 999999, "/proc/self/mountinfo");
  REQUIRE_FALSE(entry.has_value());
  CHECK(entry.error().errnum == ENOENT);
  CHECK(entry.error().message == "failed to find mount 999999 in '/proc/self/mountinfo'");
}

TEST_CASE("our own mount namespace is the same as itself and has a name", "[mount_namespace]") {
  auto own = hoist::MountNamespace::own();
  REQUIRE(own.has_value());
  auto again = hoist::MountNamespace::open("/proc/self/ns/mnt");
  REQUIRE(again.has_value());
  CHECK(own->same_as(*again));
  CHECK(own->name().starts_with("mnt:["));
  auto missing = hoist::MountNamespace::open("/nonexistent/ns/mnt");
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.error().message == "failed to open mount namespace '/nonexistent/ns/mnt': No such file or directory");
}

TEST_CASE("a file is read as a mount namespace sees it, by a helper that enters it", "[mount_namespace]") {
  if (::geteuid() != 0) {
    SUCCEED("entering a mount namespace needs CAP_SYS_ADMIN");
    return;
  }
  auto own = hoist::MountNamespace::own();
  REQUIRE(own);
  char dir_template[] = "/tmp/hoist-ns-read.XXXXXX";
  REQUIRE(::mkdtemp(dir_template) != nullptr);
  const std::string dir = dir_template;
  const std::string file = dir + "/release";
  {
    std::FILE* out = std::fopen(file.c_str(), "w");
    REQUIRE(out != nullptr);
    std::fputs("ID=debian\n", out);
    std::fclose(out);
  }
  auto found = own->read_file(file, 1024);
  REQUIRE(found);
  CHECK(*found == std::optional<std::string>("ID=debian\n"));
  auto missing = own->read_file(dir + "/none", 1024);
  REQUIRE(missing);
  CHECK_FALSE(missing->has_value());
  auto directory = own->read_file(dir, 1024);
  REQUIRE_FALSE(directory);
  CHECK_THAT(directory.error().message, Catch::Contains("not a regular file"));
  auto too_big = own->read_file(file, 4);
  CHECK_FALSE(too_big);
  ::unlink(file.c_str());
  ::rmdir(dir.c_str());
}
