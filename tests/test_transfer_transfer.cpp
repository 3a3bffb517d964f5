// stage_tree() of directory payloads: metadata, --link-dest, checksums, dry runs, threads.

#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "deny_syscalls.hpp"
#include "hoist/transfer/payload.hpp"
#include "hoist/transfer/transfer.hpp"
#include "hoist/util/error.hpp"
#include "scoped_temp_dir.hpp"
#include "transfer_fixture.hpp"

namespace {

using hoist::Compare;
using hoist::DryRun;
using hoist::Payload;
using hoist::TransferOptions;
using hoist::TransferStats;
using hoist::test::flip_byte;
using hoist::test::lstat_of;
using hoist::test::make_hundred_files;
using hoist::test::open_dir;
using hoist::test::rsync_differences;
using hoist::test::run;
using hoist::test::same_inode;
using hoist::test::ScopedTempDir;
using hoist::test::stage_payload;
using hoist::test::write_text;
using hoist::test::xattr_of;

}  // namespace

TEST_CASE("stage_tree copies every kind of entry with all of its metadata, as rsync -aHAX does", "[transfer]") {
  ScopedTempDir tmp;
  hoist::test::make_rich_tree(tmp / "src");
  for (const unsigned threads : {1U, 2U}) {
    const std::filesystem::path staging = tmp / ("staging" + std::to_string(threads));
    TransferOptions options;
    options.threads = threads;
    const TransferStats stats = stage_payload(tmp / "src", staging, {}, options);

    CHECK(rsync_differences(tmp / "src", staging) == "");
    CHECK(stats.files_added == hoist::test::entry_count(tmp / "src"));
    CHECK(stats.files_changed == 0);
    CHECK(stats.files_unchanged == 0);
    CHECK(stats.files_removed == 0);
    CHECK(stats.bytes_written == hoist::test::regular_bytes(tmp / "src"));
    CHECK(stats.bytes_added == stats.bytes_written);

    // The details rsync's itemized output summarizes, checked one by one.
    const struct stat su = lstat_of(staging / "bin/su");
    CHECK(su.st_mode == (S_IFREG | 04755));
    CHECK(su.st_uid == 1234);
    CHECK(su.st_gid == 5678);
    CHECK(lstat_of(staging / "bin/sg").st_mode == (S_IFREG | 02755));
    CHECK(xattr_of(staging / "bin/ping", "security.capability") ==
          xattr_of(tmp / "src/bin/ping", "security.capability"));
    CHECK(xattr_of(staging / "bin/ping", "security.capability").size() == 20);
    CHECK(xattr_of(staging / "etc/xattrs", "user.color") == "blue");
    CHECK(xattr_of(staging / "etc/xattrs", "trusted.overlay") == "y");
    CHECK(xattr_of(staging / "etc/xattrs", "security.selinux") == "system_u:object_r:etc_t:s0");
    CHECK(xattr_of(staging / "etc", "user.dir") == "yes");
    CHECK(xattr_of(staging / "bin/hello-link", "trusted.link") == "l");
    CHECK(hoist::test::output_of("getfacl -cp '" + (staging / "etc/acl").string() + "'") ==
          hoist::test::output_of("getfacl -cp '" + (tmp / "src/etc/acl").string() + "'"));
    CHECK(hoist::test::output_of("getfacl -cp '" + (staging / "etc/conf.d").string() + "'") ==
          hoist::test::output_of("getfacl -cp '" + (tmp / "src/etc/conf.d").string() + "'"));
    const struct stat hello = lstat_of(staging / "etc/hello.conf");
    CHECK(hello.st_mtim.tv_sec == lstat_of(tmp / "src/etc/hello.conf").st_mtim.tv_sec);
    CHECK(hello.st_mtim.tv_nsec == 123456789);
    const struct stat dangling = lstat_of(staging / "bin/dangling");
    CHECK(S_ISLNK(dangling.st_mode));
    CHECK(dangling.st_uid == 1234);
    CHECK(dangling.st_mtim.tv_nsec == 123456789);
    CHECK(std::filesystem::read_symlink(staging / "bin/absolute-link") == "/etc/passwd");
    CHECK(same_inode(staging / "links/a", staging / "links/b"));
    CHECK(same_inode(staging / "links/a", staging / "links/deeper/c"));
    CHECK(lstat_of(staging / "links/a").st_nlink == 3);
    CHECK(S_ISFIFO(lstat_of(staging / "private/fifo").st_mode));
    CHECK(S_ISSOCK(lstat_of(staging / "private/socket").st_mode));
    CHECK(lstat_of(staging / "private/null").st_rdev == makedev(1, 3));
    CHECK(S_ISBLK(lstat_of(staging / "private/loop").st_mode));
    CHECK(lstat_of(staging / "private").st_mode == (S_IFDIR | 0700));
    CHECK(lstat_of(staging / "sticky").st_mode == (S_IFDIR | 01777));
    CHECK(lstat_of(staging).st_mtim.tv_nsec == 500000000);
  }
}

TEST_CASE("a 1% change stages 1% of the bytes and hard-links the rest from link_dest", "[transfer]") {
  ScopedTempDir tmp;
  make_hundred_files(tmp / "v1");
  stage_payload(tmp / "v1", tmp / "current");
  run("cp -a '" + (tmp / "v1").string() + "' '" + (tmp / "v2").string() + "'");
  // One file changed, one added, one removed: same size and a new mtime for the change.
  run("head -c 10240 /dev/urandom > '" + (tmp / "v2/d3/f3").string() + "'");
  run("head -c 4000 /dev/urandom > '" + (tmp / "v2/d3/new").string() + "'");
  std::filesystem::remove(tmp / "v2/d9/f9");
  run("touch -d '2022-02-02 02:02:02.2' '" + (tmp / "v2/d3").string() + "' '" + (tmp / "v2/d9").string() + "'");

  const TransferStats stats = stage_payload(tmp / "v2", tmp / "next", tmp / "current");

  CHECK(rsync_differences(tmp / "v2", tmp / "next") == "");
  CHECK(stats.bytes_written == 10240 + 4000);
  CHECK(stats.files_added == 1);
  CHECK(stats.files_changed == 1);
  CHECK(stats.files_removed == 1);
  CHECK(stats.bytes_removed == 10240);
  CHECK(stats.files_unchanged == 98 + 10);  // 98 files and the 10 directories
  CHECK(stats.bytes_changed == 10240);
  CHECK(stats.bytes_added == 4000);
  CHECK(same_inode(tmp / "next/d0/f0", tmp / "current/d0/f0"));
  CHECK(lstat_of(tmp / "next/d0/f0").st_nlink == 2);
  CHECK_FALSE(same_inode(tmp / "next/d3/f3", tmp / "current/d3/f3"));
  CHECK(lstat_of(tmp / "next/d3/f3").st_nlink == 1);
  // The current version is untouched.
  CHECK(rsync_differences(tmp / "v1", tmp / "current") == "");
}

TEST_CASE("a file whose xattrs, mode or owner differ is written, not linked (a link would share them)", "[transfer]") {
  ScopedTempDir tmp;
  make_hundred_files(tmp / "v1");
  stage_payload(tmp / "v1", tmp / "current");
  run("cp -a '" + (tmp / "v1").string() + "' '" + (tmp / "v2").string() + "'");
  run("setfattr -n user.new -v 1 '" + (tmp / "v2/d1/f1").string() + "'");
  run("chmod 0600 '" + (tmp / "v2/d1/f2").string() + "'");
  run("chown 7:7 '" + (tmp / "v2/d1/f3").string() + "'");
  run("setfacl -m u:1001:r '" + (tmp / "v2/d1/f4").string() + "'");
  run("touch -d '2022-02-02 02:02:02.2' '" + (tmp / "v2/d1").string() + "'/*");

  const TransferStats stats = stage_payload(tmp / "v2", tmp / "next", tmp / "current");

  CHECK(rsync_differences(tmp / "v2", tmp / "next") == "");
  CHECK(stats.files_changed == 4);
  CHECK(stats.bytes_written == 4 * 10240);
  for (const char* name : {"f1", "f2", "f3", "f4"}) {
    CHECK_FALSE(same_inode(tmp / "next/d1" / name, tmp / "current/d1" / name));
  }
  CHECK(xattr_of(tmp / "current/d1/f1", "user.new") == "");
}

TEST_CASE("a content change with the same size and mtime is written, by default and with Compare::checksum",
          "[transfer]") {
  ScopedTempDir tmp;
  make_hundred_files(tmp / "v1");
  stage_payload(tmp / "v1", tmp / "current");
  run("cp -a '" + (tmp / "v1").string() + "' '" + (tmp / "v2").string() + "'");
  // Same size, same mtime, other bytes.
  flip_byte(tmp / "v2/d5/f5", 5000);
  run("touch -d '2022-02-02 02:02:02.2' '" + (tmp / "v2/d5/f5").string() + "'");

  for (const Compare compare : {Compare::content, Compare::checksum}) {
    const auto staged = tmp / (compare == Compare::content ? "content" : "checksum");
    TransferOptions options;
    options.compare = compare;
    const TransferStats stats = stage_payload(tmp / "v2", staged, tmp / "current", options);
    CHECK(stats.files_changed == 1);
    CHECK(stats.bytes_written == 10240);
    CHECK_FALSE(same_inode(staged / "d5/f5", tmp / "current/d5/f5"));
    CHECK(hoist::test::read_text(staged / "d5/f5") == hoist::test::read_text(tmp / "v2/d5/f5"));
    CHECK(same_inode(staged / "d5/f4", tmp / "current/d5/f4"));
  }
}

TEST_CASE("a dry run writes nothing and counts exactly what the real run does", "[transfer]") {
  ScopedTempDir tmp;
  hoist::test::make_rich_tree(tmp / "v1");
  stage_payload(tmp / "v1", tmp / "current");
  run("cp -a '" + (tmp / "v1").string() + "' '" + (tmp / "v2").string() + "'");
  run("cd '" + (tmp / "v2").string() +
      "' && printf changed > etc/hello.conf && rm -r links && mkdir -p new/dir && printf 12345 > new/dir/file");

  TransferOptions dry;
  dry.dry_run = DryRun::yes;
  const TransferStats planned = stage_payload(tmp / "v2", tmp / "dry", tmp / "current", dry);
  CHECK(hoist::test::entry_count(tmp / "dry") == 0);
  const TransferStats done = stage_payload(tmp / "v2", tmp / "real", tmp / "current");

  CHECK(planned.files_added == done.files_added);
  CHECK(planned.files_changed == done.files_changed);
  CHECK(planned.files_removed == done.files_removed);
  CHECK(planned.files_unchanged == done.files_unchanged);
  CHECK(planned.bytes_added == done.bytes_added);
  CHECK(planned.bytes_changed == done.bytes_changed);
  CHECK(planned.bytes_removed == done.bytes_removed);
  CHECK(planned.bytes_written == 0);
  CHECK(done.files_added == 3);  // new, new/dir, new/dir/file
  CHECK(done.bytes_added == 5);
  CHECK(done.files_removed == 5);  // links, links/a, links/b, links/deeper, links/deeper/c
  CHECK(done.bytes_removed == 3 * 10);
  CHECK(done.bytes_changed == 7);
  CHECK(rsync_differences(tmp / "v2", tmp / "real") == "");
}

TEST_CASE("paths longer than PATH_MAX are staged through directory fds", "[transfer]") {
  ScopedTempDir tmp;
  // 40 levels of 200-character names: about 8,000 characters, twice PATH_MAX.
  run("python3 -c \"import os; os.chdir('" + tmp.path().string() +
      "'); os.mkdir('src'); os.chdir('src')\n"
      "for i in range(40):\n"
      "    n = ('%03d' % i) * 66 + 'xx'\n"
      "    os.mkdir(n); os.chdir(n)\n"
      "open('leaf', 'w').write('deep')\"");
  const TransferStats stats = stage_payload(tmp / "src", tmp / "staging");
  CHECK(stats.files_added == 41);
  auto list = [&](const std::filesystem::path& dir) {
    return hoist::test::output_of("cd '" + dir.string() + "' && find . -printf '%d %m %s %y %TY\\n' | sort");
  };
  CHECK(list(tmp / "staging") == list(tmp / "src"));
}

TEST_CASE("progress is reported with running totals, and no thread outlives stage_tree", "[transfer]") {
  ScopedTempDir tmp;
  const int threads_before = hoist::test::thread_count();
  run("mkdir -p '" + (tmp / "src").string() + "' && head -c 200000000 /dev/zero > '" + (tmp / "src/big").string() +
      "'");
  make_hundred_files(tmp / "src/small");
  std::vector<TransferStats> reports;
  TransferOptions options;
  options.threads = 2;
  options.on_progress = [&](const TransferStats& stats) { reports.push_back(stats); };
  const TransferStats stats = stage_payload(tmp / "src", tmp / "staging", {}, options);
  CHECK(stats.bytes_done == 200000000 + 100 * 10240);
  CHECK(stats.bytes_total == stats.bytes_done);
  REQUIRE(!reports.empty());
  // The total is counted beside the copy: a report has none until the count has it, then the whole.
  size_t with_total = 0;
  for (size_t i = 0; i < reports.size(); ++i) {
    CHECK((reports[i].bytes_total == 0 || reports[i].bytes_total == stats.bytes_total));
    CHECK(!reports[i].bytes_total_estimated);
    if (reports[i].bytes_total != 0) {
      ++with_total;
    }
    if (i > 0) {
      CHECK(reports[i].bytes_done >= reports[i - 1].bytes_done);
      CHECK(reports[i].bytes_total >= reports[i - 1].bytes_total);
    }
    CHECK(reports[i].bytes_done <= stats.bytes_done);
  }
  CHECK(with_total > 0);
  CHECK(hoist::test::thread_count_settled(threads_before) == threads_before);
}

TEST_CASE("where no thread can be started for the progress count, the total is counted before the copy", "[transfer]") {
  ScopedTempDir tmp;
  make_hundred_files(tmp / "src");
  // On a thread of its own whose clone calls a seccomp filter refuses, as a pod's pids limit refuses them: with
  // one thread the pool starts none, and the count's cannot be started.
  bool filtered = false;
  std::vector<TransferStats> reports;
  TransferStats stats;
  std::string failure;
  std::thread thread([&] {
    filtered = hoist::test::deny_syscalls({__NR_clone, __NR_clone3});
    if (!filtered) {
      return;
    }
    TransferOptions options;
    options.threads = 1;
    options.on_progress = [&](const TransferStats& report) { reports.push_back(report); };
    try {
      stats = stage_payload(tmp / "src", tmp / "staging", {}, options);
    } catch (const std::exception& e) {
      failure = e.what();
    }
  });
  thread.join();
  if (!filtered) {
    WARN("skipped: no seccomp filter can be installed here (qemu-user refuses a guest's): the ctest stage runs it");
    return;
  }
  REQUIRE(failure.empty());
  CHECK(stats.bytes_done == 100 * 10240);
  CHECK(stats.bytes_total == stats.bytes_done);
  REQUIRE(!reports.empty());
  CHECK(reports.front().bytes_total == stats.bytes_total);
  CHECK(rsync_differences(tmp / "src", tmp / "staging") == "");
}

TEST_CASE("a default ACL on the staging directory is not inherited by what is staged", "[transfer]") {
  ScopedTempDir tmp;
  make_hundred_files(tmp / "src");
  std::filesystem::create_directories(tmp / "staging");
  run("setfacl -d -m u:1001:rwx '" + (tmp / "staging").string() + "'");
  stage_payload(tmp / "src", tmp / "staging");
  CHECK(rsync_differences(tmp / "src", tmp / "staging") == "");
  CHECK(xattr_of(tmp / "staging/d0/f0", "system.posix_acl_access") == "");
}

TEST_CASE("Payload::open tells directories, archives and other files apart", "[transfer]") {
  ScopedTempDir tmp;
  make_hundred_files(tmp / "tree");
  run("cd '" + tmp.path().string() +
      "' && tar -cf t.tar tree && tar --zstd -cf t.tar.zst tree && "
      "find tree | cpio -o -H newc --quiet > t.cpio && zip -qr t.zip tree && gzip -k t.tar && "
      "head -c 100000 /dev/urandom > binary && gzip -c binary > binary.gz && : > empty && "
      "cp /bin/true elf");
  CHECK(Payload::open(tmp / "tree").type() == hoist::PayloadType::directory);
  for (const char* name : {"t.tar", "t.tar.zst", "t.cpio", "t.zip", "t.tar.gz"}) {
    INFO(name);
    CHECK(Payload::open(tmp / name).type() == hoist::PayloadType::archive);
  }
  for (const char* name : {"binary", "binary.gz", "empty", "elf"}) {
    INFO(name);
    CHECK(Payload::open(tmp / name).type() == hoist::PayloadType::file);
  }
  try {
    Payload::open(tmp / "missing");
    FAIL("no exception");
  } catch (const hoist::UsageError& e) {
    CHECK(std::string(e.what()) == "payload '" + (tmp / "missing").string() + "' does not exist");
  }
  CHECK_THROWS_AS(Payload::open("/dev/null"), hoist::UsageError);
}

TEST_CASE("a full disk fails staging with the path and the reason", "[transfer]") {
  ScopedTempDir tmp;
  const auto mount = tmp / "small";
  const hoist::test::ScopedTmpfs tmpfs(mount, "1m");
  run("mkdir -p '" + (tmp / "src").string() + "' && head -c 3000000 /dev/zero > '" + (tmp / "src/big").string() + "'");
  try {
    stage_payload(tmp / "src", mount / "staging");
    FAIL("staging did not fail");
  } catch (const hoist::Failure& e) {
    CHECK(std::string(e.what()) == "failed to copy '" + (tmp / "src/big").string() + "' to '" +
                                       (mount / "staging/big").string() + "': No space left on device");
  }
}
