// Reading, comparing and applying metadata: xattrs (all namespaces), POSIX ACLs, ownership, modes, times.

#include "hoist/sys/metadata.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "deny_syscalls.hpp"
#include "hoist/sys/posix_acl.hpp"
#include "scoped_temp_dir.hpp"
#include "transfer_fixture.hpp"

namespace {

using hoist::NodeMeta;
using hoist::NodeRef;
using hoist::Xattr;
using hoist::Xattrs;
using hoist::test::lstat_of;
using hoist::test::run;
using hoist::test::ScopedTempDir;
using hoist::test::xattr_of;

}  // namespace

TEST_CASE("encode_posix_acl gives the bytes the kernel keeps in system.posix_acl_access", "[metadata]") {
  ScopedTempDir tmp;
  hoist::test::write_text(tmp / "f", "x");
  run("chmod 0640 '" + (tmp / "f").string() + "' && setfacl -m u:1001:rwx,g:1002:r,m::rwx '" + (tmp / "f").string() +
      "'");
  // Unsorted on purpose: the kernel wants them sorted by tag, then id.
  const std::string encoded = hoist::encode_posix_acl({
      {hoist::PosixAclEntry::other, 0, 0},
      {hoist::PosixAclEntry::mask, 7, 0},
      {hoist::PosixAclEntry::group, 4, 1002},
      {hoist::PosixAclEntry::user, 7, 1001},
      {hoist::PosixAclEntry::group_obj, 4, 0},
      {hoist::PosixAclEntry::user_obj, 6, 0},
  });
  CHECK(encoded == xattr_of(tmp / "f", "system.posix_acl_access"));
  CHECK(encoded.size() == 4 + 6 * 8);
}

TEST_CASE("read_xattrs reads every namespace, sorted, and never follows a symlink", "[metadata]") {
  ScopedTempDir tmp;
  hoist::test::write_text(tmp / "f", "x");
  run("cd '" + tmp.path().string() +
      "' && setfattr -n user.b -v 2 f && setfattr -n trusted.a -v 1 f && "
      "setfattr -n security.selinux -v label f && setfattr -n user.big -v 0s" +
      std::string(400, 'A') + " f && ln -s f link && setfattr -h -n trusted.mine -v l link");
  const hoist::Fd dir = hoist::test::open_dir(tmp.path());
  const Xattrs file = hoist::read_xattrs(NodeRef{dir.get(), "f"}, "f").value();
  REQUIRE(file.size() == 4);
  CHECK(file[0] == Xattr{"security.selinux", "label"});
  CHECK(file[1] == Xattr{"trusted.a", "1"});
  CHECK(file[2] == Xattr{"user.b", "2"});
  CHECK(file[3].name == "user.big");
  CHECK(file[3].value.size() == 300);  // base64: 400 characters are 300 bytes
  const hoist::Fd fd(::openat(dir.get(), "f", O_RDONLY | O_CLOEXEC));
  CHECK(hoist::read_xattrs(NodeRef{dir.get(), "f", fd.get()}, "f").value() == file);
  const Xattrs link = hoist::read_xattrs(NodeRef{dir.get(), "link"}, "link").value();
  CHECK(link == Xattrs{{"trusted.mine", "l"}});
}

TEST_CASE("xattrs are read by name with getxattrat/listxattrat where the kernel has them, else through /proc",
          "[metadata]") {
  ScopedTempDir tmp;
  hoist::test::write_text(tmp / "f", "x");
  // More names than fit the first buffer (1 KiB), and a value longer than its first buffer (256 bytes).
  std::string command = "cd '" + tmp.path().string() + "' && setfattr -n user.big -v 0s" + std::string(400, 'A') + " f";
  for (int i = 0; i < 40; ++i) {
    command +=
        " && setfattr -n user.an-attribute-with-a-long-name-" + std::to_string(i) + " -v " + std::to_string(i) + " f";
  }
  run(command);
  const hoist::Fd dir = hoist::test::open_dir(tmp.path());
  const Xattrs by_name = hoist::read_xattrs(NodeRef{dir.get(), "f"}, "f").value();
  REQUIRE(by_name.size() == 41);
  const hoist::Fd fd(::openat(dir.get(), "f", O_RDONLY | O_CLOEXEC));
  CHECK(hoist::read_xattrs(NodeRef{-1, nullptr, fd.get()}, "f").value() == by_name);

  // Whether this kernel has the calls (or, under hoist-deny-syscalls, seems not to).
  const bool kernel_has_them = ::syscall(465, AT_FDCWD, "/", AT_SYMLINK_NOFOLLOW, nullptr, size_t{0}) >= 0;
  CHECK(hoist::xattrs_readable_by_name() == kernel_has_them);
  if (std::getenv("HOIST_TEST_WITHOUT_XATTRAT") != nullptr) {
    CHECK_FALSE(kernel_has_them);
  }

  // A filter installed after the probe (the calls now fail with ENOSYS): the same xattrs, through /proc.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    if (!hoist::test::deny_syscalls(hoist::test::k_xattrat_calls)) {
      ::_exit(10);
    }
    auto again = hoist::read_xattrs(NodeRef{dir.get(), "f"}, "f");
    if (!again || *again != by_name) {
      ::_exit(11);
    }
    ::_exit(hoist::xattrs_readable_by_name() ? 12 : 0);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  INFO("10: no seccomp filter, 11: other xattrs, 12: still reading by name");
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("same_xattrs lets an existing SELinux label stand in for none", "[metadata]") {
  const Xattrs payload{{"user.a", "1"}};
  CHECK(hoist::same_xattrs(payload, {{"security.selinux", "x"}, {"user.a", "1"}}));
  CHECK_FALSE(hoist::same_xattrs(payload, {{"security.selinux", "x"}, {"user.a", "2"}}));
  CHECK_FALSE(
      hoist::same_xattrs({{"security.selinux", "y"}, {"user.a", "1"}}, {{"security.selinux", "x"}, {"user.a", "1"}}));
  CHECK_FALSE(hoist::same_xattrs(payload, {}));
  CHECK_FALSE(hoist::same_xattrs(payload, {{"user.a", "1"}, {"user.b", "1"}}));
}

TEST_CASE("apply_metadata keeps setuid bits and file capabilities that chown would clear", "[metadata]") {
  ScopedTempDir tmp;
  hoist::test::write_text(tmp / "model", "m");
  hoist::test::write_text(tmp / "f", "data");
  run("setcap cap_net_raw+ep '" + (tmp / "model").string() + "' && setfattr -n user.stale -v 1 '" +
      (tmp / "f").string() + "' && setfattr -n security.selinux -v kept '" + (tmp / "f").string() + "'");
  const std::string capability = xattr_of(tmp / "model", "security.capability");
  REQUIRE(!capability.empty());
  NodeMeta meta;
  meta.mode = S_IFREG | 06755;
  meta.uid = 1234;
  meta.gid = 5678;
  meta.mtime = {1234567890, 123456789};
  const hoist::Fd dir = hoist::test::open_dir(tmp.path());
  const hoist::Fd fd(::openat(dir.get(), "f", O_RDONLY | O_CLOEXEC));
  REQUIRE(hoist::apply_metadata(NodeRef{dir.get(), "f", fd.get()}, meta, {{"security.capability", capability}},
                                hoist::ExistingXattrs::reconcile, "f")
              .has_value());
  const struct stat st = lstat_of(tmp / "f");
  CHECK(st.st_mode == (S_IFREG | 06755));
  CHECK(st.st_uid == 1234);
  CHECK(st.st_gid == 5678);
  CHECK(st.st_mtim.tv_sec == 1234567890);
  CHECK(st.st_mtim.tv_nsec == 123456789);
  CHECK(xattr_of(tmp / "f", "security.capability") == capability);
  CHECK(xattr_of(tmp / "f", "user.stale") == "");
  CHECK(xattr_of(tmp / "f", "security.selinux") == "kept");
}

TEST_CASE("apply_metadata on a symlink changes the link, not its target", "[metadata]") {
  ScopedTempDir tmp;
  hoist::test::write_text(tmp / "target", "t");
  std::filesystem::create_symlink("target", tmp / "link");
  const struct stat target_before = lstat_of(tmp / "target");
  NodeMeta meta;
  meta.mode = S_IFLNK | 0777;
  meta.uid = 42;
  meta.gid = 43;
  meta.mtime = {1000000000, 5};
  const hoist::Fd dir = hoist::test::open_dir(tmp.path());
  REQUIRE(
      hoist::apply_metadata(NodeRef{dir.get(), "link"}, meta, {{"trusted.t", "v"}}, hoist::ExistingXattrs::none, "link")
          .has_value());
  const struct stat link = lstat_of(tmp / "link");
  CHECK(link.st_uid == 42);
  CHECK(link.st_mtim.tv_sec == 1000000000);
  CHECK(link.st_mtim.tv_nsec == 5);
  CHECK(xattr_of(tmp / "link", "trusted.t") == "v");
  const struct stat target_after = lstat_of(tmp / "target");
  CHECK(target_after.st_uid == target_before.st_uid);
  CHECK(target_after.st_mtim.tv_sec == target_before.st_mtim.tv_sec);
  CHECK(xattr_of(tmp / "target", "trusted.t") == "");
}

TEST_CASE("a failed metadata call names the path and the reason", "[metadata]") {
  ScopedTempDir tmp;
  const hoist::Fd dir = hoist::test::open_dir(tmp.path());
  NodeMeta meta;
  meta.mode = S_IFREG | 0644;
  const auto result =
      hoist::apply_metadata(NodeRef{dir.get(), "missing"}, meta, {}, hoist::ExistingXattrs::none, "/host/opt/missing");
  REQUIRE_FALSE(result.has_value());
  CHECK(result.error().message == "failed to set the owner of '/host/opt/missing': No such file or directory");
}
