// sync_tree() and restore_sync_backup(): rsync -aHAX --delete in place, one
// rename per entry, and an exact undo, also after a SIGKILL at any point.

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "hoist/transfer/payload.hpp"
#include "hoist/transfer/transfer.hpp"
#include "hoist/util/error.hpp"
#include "scoped_temp_dir.hpp"
#include "transfer_fixture.hpp"

namespace {

using hoist::TransferOptions;
using hoist::TransferStats;
using hoist::test::lstat_of;
using hoist::test::output_of;
using hoist::test::rsync_differences;
using hoist::test::run;
using hoist::test::ScopedTempDir;

TransferStats sync(const std::filesystem::path& source, const std::filesystem::path& dest,
                   const std::filesystem::path& backup, const TransferOptions& options = {}) {
  std::filesystem::create_directories(backup);
  const hoist::Fd dest_fd = hoist::test::open_dir(dest);
  const hoist::Fd backup_fd = hoist::test::open_dir(backup);
  return hoist::sync_tree(hoist::Payload::open(source), dest_fd.get(), backup_fd.get(), options);
}

void restore(const std::filesystem::path& dest, const std::filesystem::path& backup) {
  const hoist::Fd dest_fd = hoist::test::open_dir(dest);
  const hoist::Fd backup_fd = hoist::test::open_dir(backup);
  hoist::restore_sync_backup(dest_fd.get(), backup_fd.get());
}

void copy_tree(const std::filesystem::path& from, const std::filesystem::path& to) {
  run("rsync -aHAX '" + from.string() + "/' '" + to.string() + "/'");
}

/// v1: the rich tree. v2: v1 with every kind of change, listed in the counts below.
void make_versions(const std::filesystem::path& v1, const std::filesystem::path& v2) {
  hoist::test::make_rich_tree(v1);
  copy_tree(v1, v2);
  run("set -e; cd '" + v2.string() + R"SH(' &&
    printf 'new content' > etc/hello.conf &&
    chmod 0600 etc/conf.d/a.conf &&
    setfattr -n user.color -v red etc/xattrs &&
    printf 'added' > etc/conf.d/added.conf && setfacl -b etc/conf.d/added.conf &&
    mkdir -p newdir/sub && printf 'n' > newdir/sub/file && ln -s ../newdir newdir/sub/up &&
    rm -r 'with space' && rm bin/absolute-link &&
    rm bin/dangling && mkdir bin/dangling && printf 'was a symlink' > bin/dangling/inside &&
    rm -r empty && printf 'was a directory' > empty &&
    rm etc/acl && ln -s hello.conf etc/acl &&
    rm links/b && printf 'no longer linked' > links/b &&
    ln bin/sg bin/sg-link &&
    chown 4321:4321 sticky &&
    touch -d '2023-03-03 03:03:03.3' etc/hello.conf etc/conf.d/added.conf newdir newdir/sub newdir/sub/file \
      bin/dangling bin/dangling/inside empty etc/acl links/b etc/conf.d etc bin links . )SH");
}

/// Regular-file bytes that sync_tree writes: hello.conf, added.conf,
/// newdir/sub/file, bin/dangling/inside, empty, links/b, and the files whose
/// mode (a.conf) or xattrs (xattrs) changed, which are rewritten too, so that
/// the backup keeps the old inode as it was.
constexpr uint64_t k_changed_bytes = 11 + 5 + 1 + 13 + 15 + 16 + 4 + 1;

}  // namespace

TEST_CASE("sync_tree makes the destination equal to the payload, as rsync -aHAX --delete does", "[sync]") {
  ScopedTempDir tmp;
  make_versions(tmp / "v1", tmp / "v2");
  copy_tree(tmp / "v1", tmp / "dest");
  const struct stat unchanged_before = lstat_of(tmp / "dest/big.bin");
  int open_fd = ::open((tmp / "dest/etc/hello.conf").c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(open_fd >= 0);
  const hoist::Fd reader(open_fd);

  const TransferStats stats = sync(tmp / "v2", tmp / "dest", tmp / "backup");

  CHECK(rsync_differences(tmp / "v2", tmp / "dest") == "");
  CHECK(output_of("find '" + (tmp / "dest").string() + "' -name '.hoist-tmp.*'") == "");
  // Changed: hello.conf, a.conf (mode), xattrs (xattr), dangling (type), empty (type), acl (type), links/b,
  // sticky (owner), and the directories whose mtime the payload sets: ., etc, etc/conf.d, bin, links.
  CHECK(stats.files_changed == 8 + 4);
  // Added: added.conf, newdir, newdir/sub, newdir/sub/file, newdir/sub/up, bin/dangling/inside, bin/sg-link.
  CHECK(stats.files_added == 7);
  // Removed: with space (and its 2 files), absolute-link.
  CHECK(stats.files_removed == 4);
  CHECK(stats.bytes_removed == 6 + 7);
  CHECK(stats.bytes_written == k_changed_bytes);
  // Unchanged files keep their inode: nothing was rewritten.
  const struct stat unchanged_after = lstat_of(tmp / "dest/big.bin");
  CHECK(unchanged_after.st_ino == unchanged_before.st_ino);
  // A replaced file changed by rename: a reader of the old one still reads the old bytes.
  char old_content[64] = {};
  CHECK(::pread(reader.get(), old_content, sizeof old_content, 0) == 6);
  CHECK(std::string(old_content) == "hello\n");
  CHECK(hoist::test::read_text(tmp / "dest/etc/hello.conf") == "new content");
  // The new file in a directory with a default ACL has the payload's ACL, not an inherited one.
  CHECK(hoist::test::xattr_of(tmp / "dest/etc/conf.d/added.conf", "system.posix_acl_access") == "");

  // The backup undoes everything, directory mtimes included.
  restore(tmp / "dest", tmp / "backup");
  CHECK(rsync_differences(tmp / "v1", tmp / "dest") == "");
  CHECK(output_of("find '" + (tmp / "dest").string() + "' -name '.hoist-tmp.*'") == "");
}

TEST_CASE("a running binary is replaced by rename, never written in place (no ETXTBSY)", "[sync]") {
  ScopedTempDir tmp;
  run("mkdir -p '" + (tmp / "dest").string() + "' '" + (tmp / "v2").string() + "' && cp /bin/sleep '" +
      (tmp / "dest/tool").string() + "' && cp /bin/sleep '" + (tmp / "v2/tool").string() + "' && printf x >> '" +
      (tmp / "v2/tool").string() + "'");
  const pid_t child = ::fork();
  if (child == 0) {
    ::execl((tmp / "dest/tool").c_str(), "tool", "30", nullptr);
    ::_exit(127);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const TransferStats stats = sync(tmp / "v2", tmp / "dest", tmp / "backup");
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  CHECK(stats.files_changed == 1);
  CHECK(rsync_differences(tmp / "v2", tmp / "dest") == "");
}

TEST_CASE("a second sync with nothing changed writes and keeps nothing", "[sync]") {
  ScopedTempDir tmp;
  make_versions(tmp / "v1", tmp / "v2");
  copy_tree(tmp / "v1", tmp / "dest");
  sync(tmp / "v2", tmp / "dest", tmp / "backup1");
  const TransferStats again = sync(tmp / "v2", tmp / "dest", tmp / "backup2");
  CHECK(again.files_added == 0);
  CHECK(again.files_changed == 0);
  CHECK(again.files_removed == 0);
  CHECK(again.bytes_written == 0);
  CHECK(again.files_unchanged == hoist::test::entry_count(tmp / "v2"));
  CHECK(std::filesystem::file_size(tmp / "backup2/journal") == 0);
}

TEST_CASE("a dry sync changes nothing and counts exactly what the real one does", "[sync]") {
  ScopedTempDir tmp;
  make_versions(tmp / "v1", tmp / "v2");
  copy_tree(tmp / "v1", tmp / "dest");
  const hoist::Fd dest_fd = hoist::test::open_dir(tmp / "dest");
  TransferOptions dry;
  dry.dry_run = hoist::DryRun::yes;
  const TransferStats planned = hoist::sync_tree(hoist::Payload::open(tmp / "v2"), dest_fd.get(), -1, dry);
  CHECK(rsync_differences(tmp / "v1", tmp / "dest") == "");
  const TransferStats done = sync(tmp / "v2", tmp / "dest", tmp / "backup");
  CHECK(planned.files_added == done.files_added);
  CHECK(planned.files_changed == done.files_changed);
  CHECK(planned.files_removed == done.files_removed);
  CHECK(planned.files_unchanged == done.files_unchanged);
  CHECK(planned.bytes_added == done.bytes_added);
  CHECK(planned.bytes_changed == done.bytes_changed);
  CHECK(planned.bytes_removed == done.bytes_removed);
  CHECK(planned.bytes_written == 0);
}

TEST_CASE("host entries named like temporaries are synced like any other, and deletions come after every update",
          "[sync]") {
  ScopedTempDir tmp;
  make_versions(tmp / "v1", tmp / "v2");
  copy_tree(tmp / "v1", tmp / "dest");
  run("cd '" + (tmp / "dest").string() +
      "' && printf partial > .hoist-tmp.big.bin.abcdefabcdef && "
      "mkdir -p etc/.hoist-tmp.dir.123456123456/x && touch -r etc/conf.d etc");
  copy_tree(tmp / "dest", tmp / "before");
  sync(tmp / "v2", tmp / "dest", tmp / "backup");
  CHECK(rsync_differences(tmp / "v2", tmp / "dest") == "");
  const std::string journal = hoist::test::read_text(tmp / "backup/journal");
  CHECK(journal.find(std::string("K .hoist-tmp.big.bin.abcdefabcdef") + '\0') != std::string::npos);
  CHECK(journal.find(std::string("K etc/.hoist-tmp.dir.123456123456") + '\0') != std::string::npos);
  const size_t first_deletion = journal.find(std::string("K with space") + '\0');
  REQUIRE(first_deletion != std::string::npos);
  CHECK(journal.find("A ", first_deletion) == std::string::npos);
  CHECK(journal.rfind("K etc/hello.conf") < first_deletion);
  restore(tmp / "dest", tmp / "backup");
  CHECK(rsync_differences(tmp / "before", tmp / "dest") == "");
}

TEST_CASE(
    "SIGKILL at any point of a sync leaves a state that the backup restores exactly, "
    "and a new sync completes",
    "[sync][crash]") {
  ScopedTempDir tmp;
  make_versions(tmp / "v1", tmp / "v2");
  // Without the 5 MiB file: freeing its blocks 100 times costs minutes on a disk mounted with discard.
  std::filesystem::remove(tmp / "v1/big.bin");
  std::filesystem::remove(tmp / "v2/big.bin");
  // Enough work that kills land everywhere: 400 small files changed, 100 deleted, 100 added.
  run("cd '" + (tmp / "v1").string() + "' && mkdir many && cd many && for i in $(seq 1 500); do echo $i > f$i; done");
  copy_tree(tmp / "v1/many", tmp / "v2/many");
  run("cd '" + (tmp / "v2").string() +
      "/many' && for i in $(seq 1 400); do echo changed $i > f$i; done && "
      "rm f4?? && for i in $(seq 1 100); do echo $i > g$i; done");
  // How long a whole sync takes here (warm), so that the kills spread over all of it.
  std::chrono::microseconds whole{0};
  for (const char* name : {"warm-up", "timed"}) {
    copy_tree(tmp / "v1", tmp / name);
    const auto start = std::chrono::steady_clock::now();
    sync(tmp / "v2", tmp / name, tmp / (std::string(name) + "-backup"));
    whole = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start);
  }
  // Kills spread over the measured length; a sync that finishes before its kill (a busy machine makes the
  // measurement long, an idle one the runs short) shortens the spread and the round does not count, so that
  // the test asserts k_kills real kills whatever the load, in at most k_max_rounds rounds.
  constexpr int k_kills = 20;
  constexpr int k_max_rounds = 90;
  int killed = 0;
  for (int round = 0; round < k_max_rounds && killed < k_kills; ++round) {
    INFO("round " << round << ", " << killed << " killed so far");
    const auto dest = tmp / "dest";
    const auto backup = tmp / ("backup" + std::to_string(round));
    copy_tree(tmp / "v1", dest);
    std::filesystem::create_directories(backup);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      try {
        TransferOptions options;
        options.threads = round % 2 == 0 ? 1 : 2;
        sync(tmp / "v2", dest, backup, options);
      } catch (...) {
        ::_exit(1);
      }
      ::_exit(0);
    }
    std::this_thread::sleep_for(whole * ((round * 7) % k_kills) / k_kills);
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    if (WIFSIGNALED(status)) {
      ++killed;
    } else {
      whole = whole * 3 / 4;
    }
    if (round % 3 == 2) {
      // Roll forward instead: a new sync (with a new backup) finishes the job.
      sync(tmp / "v2", dest, tmp / ("forward" + std::to_string(round)));
      CHECK(rsync_differences(tmp / "v2", dest) == "");
    } else {
      restore(dest, backup);
      CHECK(rsync_differences(tmp / "v1", dest) == "");
    }
    CHECK(output_of("find '" + dest.string() + "' -name '.hoist-tmp.*'") == "");
    std::filesystem::remove_all(dest);
  }
  CHECK(killed == k_kills);
}

TEST_CASE("an archive payload cannot be synced in place", "[sync]") {
  ScopedTempDir tmp;
  run("mkdir -p '" + (tmp / "dest").string() + "' && tar -cf '" + (tmp / "x.tar").string() + "' -C '" +
      tmp.path().string() + "' dest");
  CHECK_THROWS_AS(sync(tmp / "x.tar", tmp / "dest", tmp / "backup"), hoist::UsageError);
}

TEST_CASE("a full disk fails the sync with the path and the reason, and the backup restores the old tree", "[sync]") {
  ScopedTempDir tmp;
  const auto mount = tmp / "small";
  const hoist::test::ScopedTmpfs tmpfs(mount, "2m");
  run("mkdir -p '" + (mount / "dest").string() + "' && printf old > '" + (mount / "dest/a").string() +
      "' && head -c 500000 /dev/urandom > '" + (mount / "dest/b").string() + "'");
  copy_tree(mount / "dest", tmp / "before");
  run("mkdir -p '" + (tmp / "v2").string() + "' && printf new > '" + (tmp / "v2/a").string() +
      "' && head -c 3000000 /dev/urandom > '" + (tmp / "v2/b").string() + "'");
  try {
    sync(tmp / "v2", mount / "dest", mount / "backup");
    FAIL("the sync did not fail");
  } catch (const hoist::Failure& e) {
    const std::string message = e.what();
    INFO(message);
    CHECK(message.rfind("failed to copy '" + (tmp / "v2/b").string() + "' to '" + (mount / "dest/b").string() +
                            "': No space left on device",
                        0) == 0);
  }
  restore(mount / "dest", mount / "backup");
  CHECK(rsync_differences(tmp / "before", mount / "dest") == "");
  CHECK(output_of("find '" + mount.string() + "/dest' -name '.hoist-tmp.*'") == "");
}
