// stage_tree() refuses hostile archives, naming the entry, before it writes anything for it.

#include <catch2/catch.hpp>
#include <string>

#include "hoist/transfer/entry_name.hpp"
#include "hoist/transfer/payload.hpp"
#include "hoist/transfer/transfer.hpp"
#include "hoist/util/error.hpp"
#include "hoist/util/text.hpp"
#include "scoped_temp_dir.hpp"
#include "transfer_fixture.hpp"

namespace {

using hoist::test::run;
using hoist::test::ScopedTempDir;

/// Writes `archive` with Python's tarfile from a list of entries in Python
/// syntax: (name, type, extra) with type "file", "dir", "symlink", "hardlink".
void make_tar(const std::filesystem::path& archive, const std::string& entries) {
  run("python3 - <<'EOF'\n"
      "import io, tarfile\n"
      "with tarfile.open('" +
      archive.string() +
      "', 'w', format=tarfile.PAX_FORMAT) as t:\n"
      "    for name, kind, extra in [" +
      entries +
      "]:\n"
      "        info = tarfile.TarInfo(name)\n"
      "        data = None\n"
      "        if kind == 'file':\n"
      "            data = extra.encode(); info.size = len(data)\n"
      "        elif kind == 'dir':\n"
      "            info.type = tarfile.DIRTYPE; info.mode = 0o755\n"
      "        elif kind == 'symlink':\n"
      "            info.type = tarfile.SYMTYPE; info.linkname = extra\n"
      "        elif kind == 'hardlink':\n"
      "            info.type = tarfile.LNKTYPE; info.linkname = extra\n"
      "        t.addfile(info, io.BytesIO(data) if data is not None else None)\n"
      "EOF");
}

/// The message of the verification error that staging `archive` throws.
std::string refusal(const std::filesystem::path& archive, const std::filesystem::path& staging,
                    hoist::TransferOptions options = {}) {
  std::filesystem::create_directories(staging);
  const hoist::Fd staging_fd = hoist::test::open_dir(staging);
  try {
    hoist::stage_tree(hoist::Payload::open(archive), staging_fd.get(), -1, options);
  } catch (const hoist::Error& e) {
    CHECK(e.code() == hoist::ExitCode::verification);
    return e.what();
  }
  FAIL("the archive was staged");
  return "";
}

std::string prefix(const std::filesystem::path& archive, const std::string& entry) {
  return "refusing archive entry '" + entry + "' in '" + archive.string() + "': ";
}

}  // namespace

TEST_CASE("entry names are normalized, and bad ones refused with the reason", "[archive-safety]") {
  CHECK(hoist::normalize_entry_name("./a//b/./c/", "x.tar") == "a/b/c");
  CHECK(hoist::normalize_entry_name("./", "x.tar") == "");
  CHECK(hoist::normalize_entry_name(".", "x.tar") == "");
  CHECK(hoist::normalize_entry_name("a..b/..c", "x.tar") == "a..b/..c");
  CHECK_THROWS_WITH(hoist::normalize_entry_name("a/../../etc", "x.tar"),
                    "refusing archive entry 'a/../../etc' in 'x.tar': it climbs out of the payload with '..'");
  CHECK_THROWS_WITH(hoist::normalize_entry_name("a/..", "x.tar"),
                    "refusing archive entry 'a/..' in 'x.tar': it climbs out of the payload with '..'");
  CHECK_THROWS_WITH(hoist::normalize_entry_name("/etc/passwd", "x.tar"),
                    "refusing archive entry '/etc/passwd' in 'x.tar': it is an absolute path");
  CHECK_THROWS_WITH(hoist::normalize_entry_name("a\nb", "x.tar"),
                    "refusing archive entry 'a\\nb' in 'x.tar': its name contains a newline");
  CHECK_THROWS_WITH(hoist::normalize_entry_name(std::string_view("a\0b", 3), "x.tar"),
                    "refusing archive entry 'a\\x00b' in 'x.tar': its name contains a NUL byte");
  CHECK_THROWS_WITH(hoist::normalize_entry_name("", "x.tar"),
                    "refusing archive entry '' in 'x.tar': its name is empty");
  CHECK(hoist::normalize_entry_name("d/" + std::string(255, 'n'), "x.tar") == "d/" + std::string(255, 'n'));
  CHECK_THROWS_WITH(hoist::normalize_entry_name("d/" + std::string(256, 'n') + "/f", "x.tar"),
                    "refusing archive entry 'd/" + std::string(256, 'n') +
                        "/f' in 'x.tar': a part of its name is longer than 255 bytes");
  CHECK(hoist::escaped("a\x1b[31m\\") == "a\\x1b[31m\\\\");
}

TEST_CASE("archive entries that climb out, are absolute or hold a newline are refused", "[archive-safety]") {
  ScopedTempDir tmp;
  const auto archive = tmp / "x.tar";
  struct Case {
    std::string entries;
    std::string entry;
    std::string reason;
  };
  const Case cases[] = {
      {"('ok', 'file', 'fine'), ('../escaped', 'file', 'evil')", "../escaped",
       "it climbs out of the payload with '..'"},
      {"('a/../../escaped', 'file', 'evil')", "a/../../escaped", "it climbs out of the payload with '..'"},
      {"('/escaped', 'file', 'evil')", "/escaped", "it is an absolute path"},
      {"('evil\\nname', 'file', 'x')", "evil\\nname", "its name contains a newline"},
  };
  for (const Case& c : cases) {
    INFO(c.entries);
    std::filesystem::remove_all(tmp / "staging");
    make_tar(archive, c.entries);
    CHECK(refusal(archive, tmp / "staging") == prefix(archive, c.entry) + c.reason);
    CHECK_FALSE(std::filesystem::exists(tmp / "escaped"));
    CHECK_FALSE(std::filesystem::exists("/escaped"));
  }
  // What came before the bad entry stays for the caller to remove with the staging directory.
  CHECK(hoist::test::read_text(tmp / "staging/ok") == "");
}

TEST_CASE("an entry through a symlink of the same archive is refused, and nothing is written through it",
          "[archive-safety]") {
  ScopedTempDir tmp;
  const auto archive = tmp / "x.tar";
  std::filesystem::create_directories(tmp / "outside");
  make_tar(archive, "('link', 'symlink', '" + (tmp / "outside").string() + "'), ('link/planted', 'file', 'evil')");
  CHECK(refusal(archive, tmp / "staging") ==
        prefix(archive, "link/planted") + "it passes through 'link', a symlink made earlier in the archive");
  CHECK(std::filesystem::is_empty(tmp / "outside"));

  make_tar(archive, "('d', 'dir', ''), ('d/up', 'symlink', '../..'), ('d/up/x/y', 'file', 'evil')");
  std::filesystem::remove_all(tmp / "staging");
  CHECK(refusal(archive, tmp / "staging") ==
        prefix(archive, "d/up/x/y") + "it passes through 'd/up', a symlink made earlier in the archive");

  make_tar(archive, "('f', 'file', 'data'), ('f/x', 'file', 'evil')");
  std::filesystem::remove_all(tmp / "staging");
  CHECK(refusal(archive, tmp / "staging") == prefix(archive, "f/x") + "its parent 'f' is not a directory");
}

TEST_CASE("hard links to anything but an earlier entry of the archive are refused", "[archive-safety]") {
  ScopedTempDir tmp;
  const auto archive = tmp / "x.tar";
  hoist::test::write_text(tmp / "secret", "secret");
  struct Case {
    std::string entries;
    std::string entry;
    std::string reason;
  };
  const Case cases[] = {
      {"('stolen', 'hardlink', '../secret')", "stolen", "it is a hard link to '../secret', outside the payload"},
      {"('stolen', 'hardlink', '" + (tmp / "secret").string() + "')", "stolen",
       "it is a hard link to '" + (tmp / "secret").string() + "', outside the payload"},
      {"('early', 'hardlink', 'late'), ('late', 'file', 'x')", "early",
       "it is a hard link to 'late', which is not an earlier entry of the archive"},
      {"('d', 'dir', ''), ('l', 'hardlink', 'd')", "l", "it is a hard link to the directory 'd'"},
      {"('d/f', 'file', 'x'), ('l', 'hardlink', 'd')", "l",
       "it is a hard link to 'd', which is not an earlier entry of the archive"},
  };
  for (const Case& c : cases) {
    INFO(c.entries);
    std::filesystem::remove_all(tmp / "staging");
    make_tar(archive, c.entries);
    CHECK(refusal(archive, tmp / "staging") == prefix(archive, c.entry) + c.reason);
    CHECK(hoist::test::lstat_of(tmp / "secret").st_nlink == 1);
  }
}

TEST_CASE("an entry listed twice is refused: a later copy could replace what was checked", "[archive-safety]") {
  ScopedTempDir tmp;
  const auto archive = tmp / "x.tar";
  make_tar(archive, "('a', 'file', 'one'), ('a', 'file', 'two')");
  CHECK(refusal(archive, tmp / "s1") == prefix(archive, "a") + "it appears twice in the archive");
  make_tar(archive, "('d', 'dir', ''), ('./d/', 'symlink', '/etc')");
  CHECK(refusal(archive, tmp / "s2") == prefix(archive, "./d/") + "it appears twice in the archive");
  make_tar(archive, "('./', 'dir', ''), ('.', 'dir', '')");
  // (tarfile writes directory names with a trailing slash.)
  CHECK(refusal(archive, tmp / "s3") == prefix(archive, "./") + "it appears twice in the archive");
  // A directory made for a deeper entry may still be listed once, later (zip and cpio do that).
  make_tar(archive, "('d/f', 'file', 'x'), ('d', 'dir', '')");
  const hoist::Fd staging = hoist::test::open_dir((std::filesystem::create_directories(tmp / "s4"), tmp / "s4"));
  CHECK(hoist::stage_tree(hoist::Payload::open(archive), staging.get(), -1, {}).files_added == 2);
}

TEST_CASE("zip and cpio entries that climb out are refused too", "[archive-safety]") {
  ScopedTempDir tmp;
  run("cd '" + tmp.path().string() +
      "' && python3 -c \"import zipfile; "
      "z = zipfile.ZipFile('x.zip', 'w'); z.writestr('../../zip-escaped', 'evil'); z.close()\"");
  CHECK(refusal(tmp / "x.zip", tmp / "s1") ==
        prefix(tmp / "x.zip", "../../zip-escaped") + "it climbs out of the payload with '..'");
  run("mkdir -p '" + (tmp / "w").string() + "' && cd '" + (tmp / "w").string() +
      "' && echo evil > ../cpio-escaped && echo ../cpio-escaped | cpio -o -H newc --quiet > ../x.cpio");
  CHECK(refusal(tmp / "x.cpio", tmp / "s2") ==
        prefix(tmp / "x.cpio", "../cpio-escaped") + "it climbs out of the payload with '..'");
}

TEST_CASE("a decompression bomb is refused while it streams, naming the archive", "[archive-safety]") {
  ScopedTempDir tmp;
  run("cd '" + tmp.path().string() +
      "' && mkdir bomb && head -c 300000000 /dev/zero > bomb/zeros && tar --zstd -cf bomb.tar.zst bomb");
  const auto archive = tmp / "bomb.tar.zst";
  const auto size = std::filesystem::file_size(archive);
  hoist::TransferOptions ratio;
  ratio.max_unpack_ratio = 100;
  CHECK(refusal(archive, tmp / "s1", ratio) == "refusing archive '" + archive.string() +
                                                   "': it unpacks to more than 100 times its size of " +
                                                   std::to_string(size) + " bytes (a decompression bomb?)");
  hoist::TransferOptions bytes;
  bytes.max_unpacked_bytes = 1 << 20;
  CHECK(refusal(archive, tmp / "s2", bytes) ==
        "refusing archive '" + archive.string() + "': it unpacks to more than 1048576 bytes");
  // Refused before the data was written (the declared size is checked first).
  CHECK(hoist::test::entry_count(tmp / "s2") == 1);
  CHECK(std::filesystem::is_empty(tmp / "s2/bomb"));
}
