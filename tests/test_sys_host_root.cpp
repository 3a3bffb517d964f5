#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <tuple>

#include "hoist/sys/host_root.hpp"
#include "hoist/util/file_io.hpp"
#include "scoped_temp_dir.hpp"

using hoist::Follow;
using hoist::HostRoot;
using hoist::Resolver;
using hoist::test::read_text;
using hoist::test::ScopedTempDir;
using hoist::test::write_text;
namespace fs = std::filesystem;

namespace {

// A host root laid out the way real hosts are, with the traps that catch
// string-prefixing: absolute symlinks (var/run -> /run), links with `..` that
// climb past the root, and a link that points into the container's own tree.
struct HostFixture {
  ScopedTempDir outside;  // stands for the container's own filesystem
  ScopedTempDir host;
  HostFixture() {
    write_text(host / "run/hoist/marker", "host run\n");
    write_text(host / "etc/os-release", "ID=debian\n");
    write_text(outside / "run/hoist/marker", "CONTAINER run\n");
    write_text(outside / "secret", "CONTAINER secret\n");
    fs::create_directories(host / "var");
    fs::create_symlink("/run", host / "var/run");
    fs::create_symlink("../../../../../../../../secret", host / "escape-dotdot");
    fs::create_symlink(outside.path() / "secret", host / "escape-absolute");
    fs::create_symlink("/etc", host / "etc-link");
    fs::create_symlink("loop-b", host / "loop-a");
    fs::create_symlink("loop-a", host / "loop-b");
    write_text(host / "secret", "host secret\n");
  }
};

std::string read_via(const HostRoot& root, const std::string& path) {
  auto fd = root.open(path, O_RDONLY);
  REQUIRE(fd.has_value());
  return hoist::read_fd(fd->get(), path).value();
}

// Runs `body` on `host` opened with each resolver in turn, the resolver named in every failure: both must agree.
template <typename Body>
void with_each_resolver(const fs::path& host, Body body) {
  for (const Resolver resolver : {Resolver::automatic, Resolver::walk}) {
    INFO("resolver " << static_cast<int>(resolver));
    auto root = HostRoot::open(host, resolver);
    REQUIRE(root.has_value());
    body(*root);
  }
}

}  // namespace

TEST_CASE("host paths resolve inside the root with both resolvers", "[host_root]") {
  HostFixture f;
  with_each_resolver(f.host.path(), [&](const HostRoot& root) {
    SECTION("an absolute symlink restarts at the host root, not the container's") {
      CHECK(read_via(root, "/var/run/hoist/marker") == "host run\n");
    }
    SECTION("`..` never climbs above the root") {
      CHECK(read_via(root, "/../../../../secret") == "host secret\n");
      CHECK(read_via(root, "/escape-dotdot") == "host secret\n");
    }
    SECTION("an absolute link to a container path is taken as a host path") {
      auto fd = root.open("/escape-absolute", O_RDONLY);
      REQUIRE_FALSE(fd.has_value());
      CHECK(fd.error().errnum == ENOENT);
    }
    SECTION("a symlink loop is an error, not a hang") {
      auto fd = root.open("/loop-a", O_RDONLY);
      REQUIRE_FALSE(fd.has_value());
      CHECK(fd.error().errnum == ELOOP);
    }
    SECTION("Follow::no opens the symlink itself") {
      auto fd = root.open("/etc-link", O_PATH, Follow::no);
      REQUIRE(fd.has_value());
      struct stat st {};
      REQUIRE(::fstat(fd->get(), &st) == 0);
      CHECK(S_ISLNK(st.st_mode));
    }
    SECTION("a file created through an absolute symlink lands inside the root") {
      auto fd = root.open("/var/run/hoist/new", O_WRONLY | O_CREAT | O_EXCL, Follow::yes, 0644);
      REQUIRE(fd.has_value());
      CHECK(fs::exists(f.host / "run/hoist/new"));
      CHECK_FALSE(fs::exists(f.outside / "run/hoist/new"));
    }
    SECTION("make_directories through symlinks and `..` stays inside the root") {
      auto dir = root.make_directories("/var/run/../run/a/b/c");
      REQUIRE(dir.has_value());
      CHECK(fs::is_directory(f.host / "run/a/b/c"));
      CHECK_FALSE(fs::exists(f.outside / "run/a"));
    }
    SECTION("open_parent names the directory and the last component") {
      auto parent = root.open_parent("/var/run/hoist/hoist.lock");
      REQUIRE(parent.has_value());
      CHECK(parent->second == "hoist.lock");
      struct stat st {};
      REQUIRE(::fstatat(parent->first.get(), "marker", &st, 0) == 0);
      CHECK(read_text(f.host / "run/hoist/marker") == "host run\n");
    }
    SECTION("open_parent refuses a path that names no entry") {
      for (const char* path : {"/", "/etc/..", "/etc/."}) {
        auto parent = root.open_parent(path);
        CHECK_FALSE(parent.has_value());
      }
    }
    SECTION("errors name the container path and the reason") {
      auto fd = root.open("/no/such/file", O_RDONLY);
      REQUIRE_FALSE(fd.has_value());
      CHECK(fd.error().message ==
            "failed to open '" + (f.host.path() / "no/such/file").string() + "': No such file or directory");
    }
  });
}

TEST_CASE("a host path that holds a NUL is refused, never cut short", "[host_root]") {
  HostFixture f;
  const std::string path("/etc\0/os-release", 16);
  with_each_resolver(f.host.path(), [&](const HostRoot& root) {
    // As a C string the path is "/etc", which exists: it must not be opened.
    auto fd = root.open(path, O_PATH);
    REQUIRE_FALSE(fd.has_value());
    CHECK(fd.error().errnum == EINVAL);
    CHECK(fd.error().message ==
          "failed to open '" + (f.host / "etc\\x00/os-release").string() + "': the path contains a NUL character");
    auto parent = root.open_parent(path);
    REQUIRE_FALSE(parent.has_value());
    CHECK(parent.error().errnum == EINVAL);
    CHECK_FALSE(root.make_directories(path).has_value());
  });
  auto text = hoist::read_file_at(AT_FDCWD, (f.host / "etc").string() + std::string("\0/os-release", 12), "x");
  REQUIRE_FALSE(text.has_value());
  CHECK(text.error().message == "failed to open 'x': the path contains a NUL character");
}

TEST_CASE("display names host paths the way the container sees them", "[host_root]") {
  ScopedTempDir dir;
  auto root = HostRoot::open(dir.path());
  REQUIRE(root.has_value());
  CHECK(root->display("/opt/k3s") == dir.path().string() + "/opt/k3s");
  auto slash = HostRoot::open("/");
  REQUIRE(slash.has_value());
  CHECK(slash->display("/opt/k3s") == "/opt/k3s");
}

TEST_CASE("a missing host root is an error that names it", "[host_root]") {
  auto root = HostRoot::open("/nonexistent/hoist-root");
  REQUIRE_FALSE(root.has_value());
  CHECK(root.error().message == "failed to open host root '/nonexistent/hoist-root': No such file or directory");
}

TEST_CASE("a host path resolves to where the host's own symlinks lead, the missing rest as written", "[host_root]") {
  HostFixture f;
  fs::create_directories(f.host / "opt/a");
  fs::create_directories(f.host / "srv");
  fs::create_symlink("/opt/a", f.host / "srv/b");
  fs::create_symlink("../../../..", f.host / "opt/app");
  write_text(f.host / "opt/a/tool-v1", "v1\n");
  fs::create_symlink("/opt/a/tool-v1", f.host / "opt/a/tool");
  with_each_resolver(f.host.path(), [&](const HostRoot& root) {
    const std::tuple<const char*, Follow, const char*> cases[] = {
        {"/srv/b", Follow::yes, "/opt/a"},
        {"/srv/b/missing/deeper", Follow::yes, "/opt/a/missing/deeper"},
        {"//srv//b/", Follow::yes, "/opt/a"},
        {"/opt/app", Follow::yes, "/"},
        {"/var/run/hoist", Follow::yes, "/run/hoist"},
        {"/escape-dotdot", Follow::yes, "/secret"},
        {"/", Follow::yes, "/"},
        {"/nowhere/at/all", Follow::yes, "/nowhere/at/all"},
        // Follow::no leaves the last component as it is: a link that hoist manages is not where a component lives.
        {"/srv/b/tool", Follow::no, "/opt/a/tool"},
        {"/srv/b/tool", Follow::yes, "/opt/a/tool-v1"},
        {"/opt/app", Follow::no, "/opt/app"},
        // A file in the way of the rest: the path leads nowhere, and what exists is resolved.
        {"/etc/os-release/x", Follow::yes, "/etc/os-release/x"},
    };
    for (const auto& [path, follow, resolved] : cases) {
      INFO(path);
      CHECK(root.resolve(path, follow).value() == resolved);
    }
    CHECK(root.resolve("/opt/../x", Follow::yes).error().errnum == EINVAL);
  });
}
