// stage_tree() of archive payloads: formats, metadata, --link-dest, checksums, dry runs.

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <string>

#include "hoist/transfer/payload.hpp"
#include "hoist/transfer/transfer.hpp"
#include "scoped_temp_dir.hpp"
#include "transfer_fixture.hpp"

namespace {

using hoist::TransferOptions;
using hoist::TransferStats;
using hoist::test::flip_byte;
using hoist::test::lstat_of;
using hoist::test::make_hundred_files;
using hoist::test::output_of;
using hoist::test::rsync_differences;
using hoist::test::run;
using hoist::test::same_inode;
using hoist::test::ScopedTempDir;

TransferStats stage(const std::filesystem::path& archive, const std::filesystem::path& staging,
                    const std::filesystem::path& link_dest = {}, const TransferOptions& options = {}) {
  REQUIRE(hoist::Payload::open(archive).type() == hoist::PayloadType::archive);
  return hoist::test::stage_payload(archive, staging, link_dest, options);
}

/// The rich tree without its socket (tar cannot archive sockets) and its name
/// with a newline (hoist refuses those in archives).
void make_archivable_tree(const std::filesystem::path& dir) {
  hoist::test::make_rich_tree(dir);
  std::filesystem::remove(dir / "private/socket");
  std::filesystem::remove(dir / "with space/new\nline");
  run("touch -d '2021-06-07 08:09:10.987654321' '" + (dir / "private").string() + "' '" +
      (dir / "with space").string() + "'");
}

}  // namespace

TEST_CASE("pax archives from GNU tar and bsdtar, under every filter, stage every kind of entry and metadata",
          "[archive]") {
  ScopedTempDir tmp;
  make_archivable_tree(tmp / "src");
  const std::string src = "'" + (tmp / "src").string() + "'";
  const std::string gnu = "tar --format=posix --xattrs --xattrs-include='*' --acls -C " + src;
  const std::pair<std::string, std::string> archives[] = {
      {"gnu.tar", gnu + " -cf %s ."},
      {"gnu.tar.gz", gnu + " -czf %s ."},
      {"gnu.tar.zst", gnu + " --zstd -cf %s ."},
      {"bsd.tar.xz", "bsdtar --format=pax -C " + src + " -cJf %s ."},
      {"bsd.tar.zst", "bsdtar --format=pax --zstd -C " + src + " -cf %s ."},
  };
  for (const auto& [name, command] : archives) {
    INFO(name);
    const auto archive = tmp / name;
    std::string line = command;
    line.replace(line.find("%s"), 2, "'" + archive.string() + "'");
    run(line);
    const auto staging = tmp / ("staged-" + name);
    const TransferStats stats = stage(archive, staging);
    CHECK(rsync_differences(tmp / "src", staging) == "");
    CHECK(stats.files_added == hoist::test::entry_count(tmp / "src"));
    CHECK(stats.bytes_written == hoist::test::regular_bytes(tmp / "src"));
    CHECK(lstat_of(staging / "bin/su").st_mode == (S_IFREG | 04755));
    CHECK(hoist::test::xattr_of(staging / "bin/ping", "security.capability") ==
          hoist::test::xattr_of(tmp / "src/bin/ping", "security.capability"));
    CHECK(output_of("getfacl -cp '" + (staging / "etc/conf.d").string() + "'") ==
          output_of("getfacl -cp '" + (tmp / "src/etc/conf.d").string() + "'"));
    CHECK(same_inode(staging / "links/a", staging / "links/deeper/c"));
  }
}

TEST_CASE("cpio and zip archives stage what their formats keep", "[archive]") {
  ScopedTempDir tmp;
  make_hundred_files(tmp / "src");
  run("cd '" + (tmp / "src").string() +
      "' && ln d0/f0 d1/hard && ln -s ../d0/f1 d1/soft && mkfifo d2/fifo && "
      "chown 1234:5678 d3/f3 && chmod 4750 d3/f3 && touch -h -d '2022-02-02 02:02:02' . d0 d1 d1/hard d1/soft d2");
  // newc puts the data of a hard-linked file on its last name; cpio keeps whole seconds only.
  run("cd '" + (tmp / "src").string() + "' && find . | cpio -o -H newc --quiet > ../x.cpio");
  const auto cpio = tmp / "cpio";
  const TransferStats stats = stage(tmp / "x.cpio", cpio);
  CHECK(rsync_differences(tmp / "src", cpio) == "");
  CHECK(same_inode(cpio / "d0/f0", cpio / "d1/hard"));
  CHECK(hoist::test::read_text(cpio / "d1/hard") == hoist::test::read_text(tmp / "src/d0/f0"));
  CHECK(lstat_of(cpio / "d3/f3").st_mode == (S_IFREG | 04750));
  CHECK(lstat_of(cpio / "d3/f3").st_uid == 1234);
  CHECK(stats.bytes_written == 100 * 10240);

  run("cd '" + (tmp / "src").string() + "' && rm d2/fifo && zip -qry ../x.zip .");
  const auto zip = tmp / "zip";
  stage(tmp / "x.zip", zip);
  // zip keeps modes, symlinks and (2-second) times, not owners or hard links.
  CHECK(output_of("cd '" + zip.string() + "' && find . -type f -exec md5sum {} + | sort") ==
        output_of("cd '" + (tmp / "src").string() + "' && find . -type f -exec md5sum {} + | sort"));
  CHECK(std::filesystem::read_symlink(zip / "d1/soft") == "../d0/f1");
  CHECK(lstat_of(zip / "d3/f3").st_mode == (S_IFREG | 04750));
}

TEST_CASE("a 1%-changed archive writes 1% of the bytes and links the rest from link_dest", "[archive]") {
  ScopedTempDir tmp;
  make_hundred_files(tmp / "v1");
  run("tar --zstd -C '" + (tmp / "v1").string() + "' -cf '" + (tmp / "v1.tar.zst").string() + "' .");
  stage(tmp / "v1.tar.zst", tmp / "current");
  CHECK(rsync_differences(tmp / "v1", tmp / "current") == "");

  run("cp -a '" + (tmp / "v1").string() + "' '" + (tmp / "v2").string() + "'");
  run("head -c 10240 /dev/urandom > '" + (tmp / "v2/d3/f3").string() + "'");
  run("head -c 4000 /dev/urandom > '" + (tmp / "v2/d3/new").string() + "'");
  std::filesystem::remove(tmp / "v2/d9/f9");
  run("touch -d '2022-02-02 02:02:02.2' '" + (tmp / "v2/d3").string() + "' '" + (tmp / "v2/d9").string() + "'");
  run("tar --zstd -C '" + (tmp / "v2").string() + "' -cf '" + (tmp / "v2.tar.zst").string() + "' .");

  hoist::TransferOptions dry;
  dry.dry_run = hoist::DryRun::yes;
  const TransferStats planned = stage(tmp / "v2.tar.zst", tmp / "dry", tmp / "current", dry);
  CHECK(hoist::test::entry_count(tmp / "dry") == 0);
  const TransferStats stats = stage(tmp / "v2.tar.zst", tmp / "next", tmp / "current");

  CHECK(rsync_differences(tmp / "v2", tmp / "next") == "");
  CHECK(stats.bytes_written == 10240 + 4000);
  CHECK(stats.files_added == 1);
  CHECK(stats.files_changed == 1);
  CHECK(stats.files_removed == 1);
  CHECK(stats.bytes_removed == 10240);
  CHECK(stats.files_unchanged == 98 + 10);
  CHECK(same_inode(tmp / "next/d0/f0", tmp / "current/d0/f0"));
  CHECK_FALSE(same_inode(tmp / "next/d3/f3", tmp / "current/d3/f3"));
  for (auto [a, b] : {std::pair{planned.files_added, stats.files_added},
                      {planned.files_changed, stats.files_changed},
                      {planned.files_removed, stats.files_removed},
                      {planned.files_unchanged, stats.files_unchanged},
                      {planned.bytes_added, stats.bytes_added},
                      {planned.bytes_changed, stats.bytes_changed},
                      {planned.bytes_removed, stats.bytes_removed}}) {
    CHECK(a == b);
  }
}

TEST_CASE("an archive's file whose bytes differ is written, the same size and mtime notwithstanding", "[archive]") {
  ScopedTempDir tmp;
  run("mkdir -p '" + (tmp / "v1").string() + "' && head -c 3000000 /dev/urandom > '" + (tmp / "v1/big").string() +
      "' && printf same > '" + (tmp / "v1/small").string() + "'");
  run("tar -C '" + (tmp / "v1").string() + "' -cf '" + (tmp / "v1.tar").string() + "' .");
  stage(tmp / "v1.tar", tmp / "current");
  // Same size and mtime, one byte near the end changed.
  run("cp -a '" + (tmp / "v1").string() + "' '" + (tmp / "v2").string() + "'");
  flip_byte(tmp / "v2/big", 2999000);
  run("touch -r '" + (tmp / "v1/big").string() + "' '" + (tmp / "v2/big").string() + "'");
  run("tar -C '" + (tmp / "v2").string() + "' -cf '" + (tmp / "v2.tar").string() + "' .");

  const TransferStats stats = stage(tmp / "v2.tar", tmp / "next", tmp / "current");
  CHECK(stats.files_changed == 1);
  CHECK(stats.files_unchanged == 1);
  CHECK(hoist::test::read_text(tmp / "next/big") == hoist::test::read_text(tmp / "v2/big"));
  CHECK(same_inode(tmp / "next/small", tmp / "current/small"));
  CHECK_FALSE(same_inode(tmp / "next/big", tmp / "current/big"));
  // The equal start came from link_dest by copy_file_range; only the rest came from the archive.
  CHECK(stats.bytes_written == 3000000);
  CHECK(rsync_differences(tmp / "v2", tmp / "next") == "");
}

TEST_CASE("sparse archive entries stay sparse", "[archive]") {
  ScopedTempDir tmp;
  run("mkdir -p '" + (tmp / "src").string() + "' && cd '" + (tmp / "src").string() +
      "' && truncate -s 100M sparse && printf end >> sparse && printf start | dd of=sparse conv=notrunc status=none");
  run("tar -S -C '" + (tmp / "src").string() + "' -cf '" + (tmp / "s.tar").string() + "' .");
  const TransferStats stats = stage(tmp / "s.tar", tmp / "staging");
  CHECK(hoist::test::read_text(tmp / "staging/sparse") == hoist::test::read_text(tmp / "src/sparse"));
  CHECK(lstat_of(tmp / "staging/sparse").st_blocks < 1000);
  CHECK(stats.bytes_written < 100000);
}

TEST_CASE("a tar hard link that carries data gives the shared inode that data", "[archive]") {
  ScopedTempDir tmp;
  run("python3 - <<'EOF'\n"
      "import io, tarfile\n"
      "with tarfile.open('" +
      (tmp / "x.tar").string() +
      "', 'w', format=tarfile.PAX_FORMAT) as t:\n"
      "    for i in range(200):\n"
      "        info = tarfile.TarInfo('f%d' % i); info.size = 3; t.addfile(info, io.BytesIO(b'one'))\n"
      "    info = tarfile.TarInfo('link'); info.type = tarfile.LNKTYPE; info.linkname = 'f199'; info.size = 4\n"
      "    info.pax_headers = {'size': '4'}  # pax says the link has data: libarchive reads it then\n"
      "    t.addfile(info, io.BytesIO(b'two!'))\n"
      "EOF");
  for (const unsigned threads : {1U, 2U}) {
    hoist::TransferOptions options;
    options.threads = threads;
    const auto staging = tmp / ("staging" + std::to_string(threads));
    stage(tmp / "x.tar", staging, {}, options);
    CHECK(same_inode(staging / "link", staging / "f199"));
    CHECK(hoist::test::read_text(staging / "f199") == "two!");
    CHECK(hoist::test::read_text(staging / "f198") == "one");
  }
}

TEST_CASE("hard links of an archive are unchanged against link_dest only while their target is", "[archive]") {
  ScopedTempDir tmp;
  run("set -e; mkdir -p '" + (tmp / "v1/d").string() + "'; cd '" + (tmp / "v1").string() +
      "'; echo same > a; ln a d/b; ln a c; echo other > e; touch -d '2022-02-02' a e d .");
  run("cp -a '" + (tmp / "v1").string() + "' '" + (tmp / "v2").string() + "'");
  run("cd '" + (tmp / "v2").string() + "' && echo changed > a && touch -d '2022-02-02' a");
  run("tar -C '" + (tmp / "v1").string() + "' -cf '" + (tmp / "v1.tar").string() + "' .");
  run("tar -C '" + (tmp / "v2").string() + "' -cf '" + (tmp / "v2.tar").string() + "' .");
  stage(tmp / "v1.tar", tmp / "current");

  // The same archive again: the three names stay one inode, the one of link_dest.
  const TransferStats again = stage(tmp / "v1.tar", tmp / "again", tmp / "current");
  CHECK(again.files_unchanged == 5);  // a, c, d/b, e and d
  CHECK(again.files_changed == 0);
  CHECK(again.bytes_written == 0);
  CHECK(same_inode(tmp / "again/d/b", tmp / "current/a"));
  CHECK(same_inode(tmp / "again/c", tmp / "current/a"));

  // Their target changed: the links are changed too, and none of them is link_dest's inode.
  const TransferStats changed = stage(tmp / "v2.tar", tmp / "next", tmp / "current");
  CHECK(changed.files_changed == 3);
  CHECK(changed.files_unchanged == 2);  // e and d
  CHECK(same_inode(tmp / "next/d/b", tmp / "next/a"));
  CHECK_FALSE(same_inode(tmp / "next/a", tmp / "current/a"));
  CHECK(hoist::test::read_text(tmp / "next/d/b") == "changed\n");
  CHECK(hoist::test::read_text(tmp / "current/d/b") == "same\n");
}

TEST_CASE("directories listed after their entries, or never, get the listed metadata or a default", "[archive]") {
  ScopedTempDir tmp;
  run("python3 - <<'EOF'\n"
      "import io, tarfile\n"
      "def add(t, name, kind, mode, mtime, data=b''):\n"
      "    info = tarfile.TarInfo(name); info.mode = mode; info.mtime = mtime\n"
      "    if kind == 'dir': info.type = tarfile.DIRTYPE; t.addfile(info)\n"
      "    else: info.size = len(data); t.addfile(info, io.BytesIO(data))\n"
      "with tarfile.open('" +
      (tmp / "x.tar").string() +
      "', 'w', format=tarfile.PAX_FORMAT) as t:\n"
      "    add(t, 'a/b/f', 'file', 0o640, 1000000000, b'deep')\n"
      "    add(t, 'a/', 'dir', 0o750, 1100000000)\n"
      "    add(t, 'a/b', 'dir', 0o700, 1200000000)\n"
      "    add(t, 'c/d', 'file', 0o644, 1300000000, b'unlisted parent')\n"
      "EOF");
  for (const bool dry : {true, false}) {
    TransferOptions options;
    options.dry_run = dry ? hoist::DryRun::yes : hoist::DryRun::no;
    const auto staging = tmp / (dry ? "dry" : "staging");
    const TransferStats stats = stage(tmp / "x.tar", staging, {}, options);
    CHECK(stats.files_added == 5);  // a, a/b, a/b/f, c, c/d
    if (dry) {
      CHECK(hoist::test::entry_count(staging) == 0);
      continue;
    }
    CHECK(hoist::test::read_text(staging / "a/b/f") == "deep");
    CHECK(lstat_of(staging / "a").st_mode == (S_IFDIR | 0750));
    CHECK(lstat_of(staging / "a").st_mtime == 1100000000);
    CHECK(lstat_of(staging / "a/b").st_mode == (S_IFDIR | 0700));
    CHECK(lstat_of(staging / "a/b").st_mtime == 1200000000);
    // Never listed: 0755, as tar makes such a directory, not the 0700 it is made with while staging.
    CHECK(lstat_of(staging / "c").st_mode == (S_IFDIR | 0755));
    CHECK(hoist::test::read_text(staging / "c/d") == "unlisted parent");
  }
}
