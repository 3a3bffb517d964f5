#include <catch2/catch.hpp>

#include "hoist/util/error.hpp"
#include "hoist/verify/extension_release.hpp"

using hoist::check_extension_release;
using hoist::OsRelease;
using hoist::parse_os_release;

namespace {

const OsRelease k_debian = parse_os_release("ID=debian\nVERSION_ID=12\n", "os-release");

// The exit code and message of a failed check, or "ok".
std::string check(const OsRelease& host, const std::string& extension, const std::string& arch = "x86-64") {
  try {
    check_extension_release(host, parse_os_release(extension, "extension-release"), "tools", arch,
                            "/payload/tools.raw");
    return "ok";
  } catch (const hoist::Error& e) {
    return std::to_string(static_cast<int>(e.code())) + ": " + e.what();
  }
}

const std::string k_prefix = "5: extension 'tools' does not match the host (/payload/tools.raw): ";

}  // namespace

TEST_CASE("an extension for the host's ID and VERSION_ID matches", "[extension_release]") {
  CHECK(check(k_debian, "ID=debian\nVERSION_ID=12\n") == "ok");
  CHECK(check(k_debian, "ID=debian\nVERSION_ID=12\nARCHITECTURE=x86-64\n") == "ok");
  CHECK(check(k_debian, "ID=debian\nVERSION_ID=12\nARCHITECTURE=_any\nSYSEXT_SCOPE=\"system portable\"\n") == "ok");
}

TEST_CASE("ID=_any matches any host and skips the version check", "[extension_release]") {
  CHECK(check(k_debian, "ID=_any\n") == "ok");
  CHECK(check(k_debian, "ID=_any\nVERSION_ID=99\n") == "ok");
}

TEST_CASE("a mismatched ID exits 5 naming the field and both values", "[extension_release]") {
  CHECK(check(k_debian, "ID=fedora\nVERSION_ID=12\n") == k_prefix + "ID is 'fedora', the host's ID is 'debian'");
  CHECK(check(k_debian, "VERSION_ID=12\n") == k_prefix + "ID is not set; it must be the host's ID 'debian' or '_any'");
}

TEST_CASE("an ID from the host's ID_LIKE matches, as in current systemd", "[extension_release]") {
  const OsRelease host = parse_os_release("ID=ubuntu\nID_LIKE=debian\nVERSION_ID=24.04\n", "os-release");
  CHECK(check(host, "ID=debian\nVERSION_ID=24.04\n") == "ok");
  CHECK(check(host, "ID=fedora\nVERSION_ID=24.04\n") ==
        k_prefix + "ID is 'fedora', the host's ID is 'ubuntu' (ID_LIKE 'debian')");
}

TEST_CASE("a mismatched or missing VERSION_ID exits 5 naming it", "[extension_release]") {
  CHECK(check(k_debian, "ID=debian\nVERSION_ID=11\n") ==
        k_prefix + "VERSION_ID is '11', the host's VERSION_ID is '12'");
  CHECK(check(k_debian, "ID=debian\n") ==
        k_prefix + "VERSION_ID is not set (nor a SYSEXT_LEVEL the host has); the host's VERSION_ID is '12'");
}

TEST_CASE("SYSEXT_LEVEL on both sides replaces the VERSION_ID comparison", "[extension_release]") {
  const OsRelease host = parse_os_release("ID=flatcar\nVERSION_ID=3815.2.0\nSYSEXT_LEVEL=1.0\n", "os-release");
  CHECK(check(host, "ID=flatcar\nSYSEXT_LEVEL=1.0\n") == "ok");
  CHECK(check(host, "ID=flatcar\nSYSEXT_LEVEL=1.0\nVERSION_ID=1\n") == "ok");
  CHECK(check(host, "ID=flatcar\nSYSEXT_LEVEL=2\n") ==
        k_prefix + "SYSEXT_LEVEL is '2', the host's SYSEXT_LEVEL is '1.0'");
  // Without a level of its own the extension is compared by VERSION_ID.
  CHECK(check(host, "ID=flatcar\nVERSION_ID=3815.2.0\n") == "ok");
  CHECK(check(host, "ID=flatcar\nVERSION_ID=3760.0.0\n") ==
        k_prefix + "VERSION_ID is '3760.0.0', the host's VERSION_ID is '3815.2.0'");
}

TEST_CASE("a host without version information matches on ID alone", "[extension_release]") {
  const OsRelease arch = parse_os_release("ID=arch\n", "os-release");
  CHECK(check(arch, "ID=arch\n") == "ok");
  CHECK(check(arch, "ID=arch\nVERSION_ID=1\n") == "ok");
  const OsRelease level_only = parse_os_release("ID=arch\nSYSEXT_LEVEL=3\n", "os-release");
  CHECK(check(level_only, "ID=arch\n") == "ok");
}

TEST_CASE("a foreign ARCHITECTURE exits 5 naming it", "[extension_release]") {
  CHECK(check(k_debian, "ID=debian\nVERSION_ID=12\nARCHITECTURE=arm64\n") ==
        k_prefix + "ARCHITECTURE is 'arm64', the host's architecture is 'x86-64'");
  CHECK(check(k_debian, "ID=debian\nVERSION_ID=12\nARCHITECTURE=arm64\n", "arm64") == "ok");
}

TEST_CASE("an extension whose SYSEXT_SCOPE leaves out 'system' exits 5", "[extension_release]") {
  CHECK(check(k_debian, "ID=debian\nVERSION_ID=12\nSYSEXT_SCOPE=\"initrd portable\"\n") ==
        k_prefix + "SYSEXT_SCOPE is 'initrd portable', which does not include 'system'");
}

TEST_CASE("an empty SYSEXT_SCOPE lists no scope and exits 5, as in systemd 252", "[extension_release]") {
  CHECK(check(k_debian, "ID=debian\nVERSION_ID=12\nSYSEXT_SCOPE=\n") ==
        k_prefix + "SYSEXT_SCOPE is '', which does not include 'system'");
  CHECK(check(k_debian, "ID=debian\nVERSION_ID=12\nSYSEXT_SCOPE=\" \t\"\n") ==
        k_prefix + "SYSEXT_SCOPE is ' \\t', which does not include 'system'");
  CHECK(check(k_debian, "ID=debian\nVERSION_ID=12\nSYSEXT_SCOPE=\"portable\tsystem\"\n") == "ok");
}

TEST_CASE("a host without an ID takes no extension, not even ID=_any", "[extension_release]") {
  for (const char* host : {"VERSION_ID=12\n", "ID=\nVERSION_ID=12\n", "ID=\"\"\n"}) {
    CAPTURE(host);
    CHECK(check(parse_os_release(host, "os-release"), "ID=_any\n") ==
          k_prefix + "the host's os-release sets no ID, and systemd-sysext merges no extension then");
  }
}

TEST_CASE("uname machines map to systemd's architecture names", "[extension_release]") {
  CHECK(hoist::systemd_architecture("x86_64") == "x86-64");
  CHECK(hoist::systemd_architecture("aarch64") == "arm64");
  CHECK(hoist::systemd_architecture("i686") == "x86");
  CHECK(hoist::systemd_architecture("ppc64le") == "ppc64-le");
  CHECK(hoist::systemd_architecture("sparc64") == "sparc64");
  CHECK_FALSE(hoist::native_architecture().empty());
}
