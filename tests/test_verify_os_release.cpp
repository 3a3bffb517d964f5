#include <catch2/catch.hpp>

#include "hoist/util/error.hpp"
#include "hoist/verify/os_release.hpp"
#include "scoped_temp_dir.hpp"

using hoist::OsRelease;
using hoist::parse_os_release;
using hoist::release_value;
using hoist::test::ScopedTempDir;
using hoist::test::write_text;

TEST_CASE("os-release values are read unquoted, single- and double-quoted", "[os_release]") {
  const OsRelease release = parse_os_release(
      "# a comment\n"
      "\n"
      "ID=debian\n"
      "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n"
      "NAME='Debian GNU/Linux'\n"
      "VERSION_ID=\"12\"\n"
      "  ID_LIKE=\"rhel fedora\"  \n"
      "; also a comment\n");
  CHECK(release.size() == 5);
  CHECK(release_value(release, "ID") == "debian");
  CHECK(release_value(release, "PRETTY_NAME") == "Debian GNU/Linux 12 (bookworm)");
  CHECK(release_value(release, "NAME") == "Debian GNU/Linux");
  CHECK(release_value(release, "VERSION_ID") == "12");
  CHECK(release_value(release, "ID_LIKE") == "rhel fedora");
  CHECK(release_value(release, "SYSEXT_LEVEL").empty());
}

TEST_CASE("os-release escapes follow systemd's env-file rules", "[os_release]") {
  const OsRelease release = parse_os_release(
      "A=\"say \\\"hi\\\" for \\$5 \\n\"\n"
      "B='no \\escape here'\n"
      "C=un\\ quoted\\\\   \n"
      "D=\"con\"cat'enated'\n"
      "E=\n"
      "F=\"unterminated\n");
  CHECK(release_value(release, "A") == "say \"hi\" for $5 \\n");
  CHECK(release_value(release, "B") == "no \\escape here");
  CHECK(release_value(release, "C") == "un quoted\\");
  CHECK(release_value(release, "D") == "concatenated");
  CHECK(release.count("E") == 1);
  CHECK(release_value(release, "E").empty());
  CHECK(release_value(release, "F") == "unterminated");
}

TEST_CASE("os-release lines without a valid key are ignored and a later assignment wins", "[os_release]") {
  const OsRelease release = parse_os_release("1X=bad\nno equals sign\nA-B=bad\nID=first\nID=second\r\n=x\n");
  CHECK(release.size() == 1);
  CHECK(release_value(release, "ID") == "second");
}

TEST_CASE("the host's os-release is /etc/os-release, else /usr/lib/os-release, inside the root", "[os_release]") {
  ScopedTempDir dir;
  auto root = hoist::HostRoot::open(dir.path());
  REQUIRE(root.has_value());
  CHECK_THROWS_WITH(hoist::read_host_os_release(*root),
                    "failed to read the host's os-release: '" + (dir.path() / "etc/os-release").string() +
                        "': No such file or directory, '" + (dir.path() / "usr/lib/os-release").string() +
                        "': No such file or directory");

  write_text(dir / "usr/lib/os-release", "ID=flatcar\nVERSION_ID=3815.2.0\n");
  CHECK(release_value(hoist::read_host_os_release(*root), "ID") == "flatcar");

  // An absolute symlink resolves inside the root, as on the host.
  std::filesystem::create_directories(dir / "etc");
  std::filesystem::create_symlink("/usr/lib/os-release", dir / "etc/os-release");
  CHECK(release_value(hoist::read_host_os_release(*root), "VERSION_ID") == "3815.2.0");

  std::filesystem::remove(dir / "etc/os-release");
  write_text(dir / "etc/os-release", "ID=debian\n");
  CHECK(release_value(hoist::read_host_os_release(*root), "ID") == "debian");
}
