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
      "; also a comment\n",
      "os-release");
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
      "F=\"unterminated\n",
      "os-release");
  CHECK(release_value(release, "A") == "say \"hi\" for $5 \\n");
  CHECK(release_value(release, "B") == "no \\escape here");
  CHECK(release_value(release, "C") == "un quoted\\");
  // A quote opens only where a value starts or after a closing quote: the single quotes here are plain bytes.
  CHECK(release_value(release, "D") == "concat'enated'");
  CHECK(release.count("E") == 1);
  CHECK(release_value(release, "E").empty());
  CHECK(release_value(release, "F") == "unterminated\n");  // an open quote runs to the end of the text
}

TEST_CASE("os-release keys are taken as systemd takes them and a later assignment wins", "[os_release]") {
  // systemd does not check key names: "1X" and "A-B" are keys; a line without '=' is skipped; CR ends a line.
  const OsRelease release =
      parse_os_release("1X=one\nno equals sign\nA-B=two\nID=first\nID=second\r\n=x\n  KEY  =  v  \n", "os-release");
  CHECK(release == OsRelease{{"1X", "one"}, {"A-B", "two"}, {"ID", "second"}, {"KEY", "v"}});
}

TEST_CASE("os-release edge cases read as systemd 252's env-file parser reads them", "[os_release]") {
  struct Case {
    std::string text;
    OsRelease expected;
  };
  const Case cases[] = {
      // A backslash before a line break joins the lines, unquoted and in double quotes; not in single quotes.
      {"A=one\\\ntwo\nB=x", {{"A", "onetwo"}, {"B", "x"}}},
      {"A=\"one\\\ntwo\"\n", {{"A", "onetwo"}}},
      {"A='one\\\ntwo'\n", {{"A", "one\\\ntwo"}}},
      {"A=\\\nB=x\n", {{"A", "B=x"}}},
      // A comment ending in a backslash swallows the next line.
      {"# note \\\nA=hidden\nB=seen\n", {{"B", "seen"}}},
      {"; note \\\nA=hidden\n", {}},
      // Quotes open only where a value starts or after a closing quote.
      {"A=x\"y z\"\n", {{"A", "x\"y z\""}}},
      {"A=x'y'\n", {{"A", "x'y'"}}},
      {"A=\"x\"y\n", {{"A", "xy"}}},
      {"A=\"x\" \"y\"\n", {{"A", "xy"}}},
      {"A='x' y \n", {{"A", "xy"}}},
      // An unterminated quote runs to the end of the text, over line breaks.
      {"A=\"one\nB=two\n", {{"A", "one\nB=two\n"}}},
      {"A='one\nB=two", {{"A", "one\nB=two"}}},
      {"A=\"end\\", {{"A", "end"}}},
      // Escapes inside double quotes keep the backslash before other bytes.
      {"A=\"\\x\\\\\\$\"\n", {{"A", "\\x\\$"}}},
      // CR alone ends a line.
      {"A=1\rB=2\r", {{"A", "1"}, {"B", "2"}}},
      // Escaped blanks are kept at the end of an unquoted value, plain ones are not.
      {"A=a\\  \n", {{"A", "a "}}},
      {"A=\n", {{"A", ""}}},
      {"A=  \"\"  \n", {{"A", ""}}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    CHECK(parse_os_release(c.text, "os-release") == c.expected);
  }
}

TEST_CASE("os-release with invalid UTF-8 or a NUL is refused as systemd refuses it, naming file, line and key",
          "[os_release]") {
  CHECK_THROWS_WITH(parse_os_release("ID=debian\nNAME=\"caf\xe9\"\n", "/x/os-release"),
                    "/x/os-release:2: the value of 'NAME' is not valid UTF-8, so systemd refuses the file");
  CHECK_THROWS_WITH(parse_os_release("K\xff=1\n", "/x/os-release"),
                    "/x/os-release:1: the key 'K\\xff' is not valid UTF-8, so systemd refuses the file");
  // Overlong forms, surrogates, noncharacters and code points past U+10FFFF are invalid for systemd too.
  for (const char* bad : {"\xc0\xaf", "\xed\xa0\x80", "\xef\xb7\x90", "\xef\xbf\xbe", "\xf4\x90\x80\x80", "\xe2\x82"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(parse_os_release(std::string("A=") + bad + "\n", "os-release"), hoist::Error);
  }
  CHECK_THROWS_WITH(parse_os_release(std::string("A=1\nB=2\0\nC=3\n", 13), "/x/os-release"),
                    "/x/os-release:2: a NUL byte, so systemd refuses the file");
  CHECK(release_value(parse_os_release("NAME=\"café ✓ \xf0\x9f\x90\xa7\"\n", "os-release"), "NAME") ==
        "café ✓ \xf0\x9f\x90\xa7");
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
