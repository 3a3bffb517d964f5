// ContentIndex: the file it is written as, what it vouches for, and a damaged one.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <functional>
#include <string>
#include <vector>

#include "hoist/sys/sha256.hpp"
#include "hoist/transfer/content_index.hpp"
#include "scoped_temp_dir.hpp"

namespace {

using hoist::ContentIndex;
using hoist::FileStamp;
using hoist::Sha256Digest;
using hoist::SourceStamp;
using hoist::test::ScopedTempDir;
using hoist::test::write_text;

Sha256Digest digest_of(const std::string& text) {
  hoist::Sha256 sha;
  sha.update(text);
  return sha.final_digest();
}

struct stat lstat_of(const std::filesystem::path& path) {
  struct stat st {};
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st;
}

ContentIndex::Entry entry_of(const std::filesystem::path& path, const std::string& content) {
  return {digest_of(content), FileStamp::of(lstat_of(path)), {}};
}

std::vector<std::string> paths_of(const ContentIndex& index) {
  std::vector<std::string> paths;
  index.for_each([&](const std::string& relpath, const ContentIndex::Entry& /*entry*/) { paths.push_back(relpath); });
  return paths;
}

}  // namespace

TEST_CASE("a content index is written and read back entry for entry, sorted by directory and name", "[transfer]") {
  ContentIndex index;
  ContentIndex::Entry a{digest_of("a"), FileStamp{7, 1, 1700000000, 5, 1800000000, 999999999}, {}};
  ContentIndex::Entry b{digest_of("b"), FileStamp{8, 2, -1, 0, 1, 1}, {}};
  index.add("usr/bin", "k3s", a);
  index.add("", "z", b);
  index.add("caf\xc3\xa9", "na\xc3\xafve.txt", b);
  index.add("usr/bin", "ctr", b);
  index.add("usr/bin", "k3s", b);  // replaces
  CHECK(index.size() == 4);

  const std::string bytes = index.serialize();
  auto parsed = ContentIndex::parse(bytes, "/v/index");
  REQUIRE(parsed);
  CHECK(parsed->size() == 4);
  CHECK(paths_of(*parsed) ==
        std::vector<std::string>{"z", "caf\xc3\xa9/na\xc3\xafve.txt", "usr/bin/ctr", "usr/bin/k3s"});
  const ContentIndex::Entry* k3s = parsed->find("usr/bin", "k3s");
  REQUIRE(k3s != nullptr);
  CHECK(k3s->digest == b.digest);
  CHECK(k3s->stamp == b.stamp);
  CHECK(parsed->find("usr/bin", "kubectl") == nullptr);
  CHECK(parsed->find("usr", "bin") == nullptr);
  // The same entries make the same bytes, whatever order they were added in.
  CHECK(parsed->serialize() == bytes);

  auto empty = ContentIndex::parse(ContentIndex().serialize(), "/v/empty");
  REQUIRE(empty);
  CHECK(empty->size() == 0);
}

TEST_CASE("an index built with the room of another writes only what was added, and tells its tree's size",
          "[transfer]") {
  ContentIndex old;
  old.add("usr/bin", "k3s", {digest_of("k3s"), FileStamp{7, 100, 1, 0, 1, 0}, {}});
  old.add("etc", "conf", {digest_of("conf"), FileStamp{8, 10, 1, 0, 1, 0}, {}});
  old.add("gone", "file", {digest_of("file"), FileStamp{9, 1, 1, 0, 1, 0}, {}});

  ContentIndex index;
  index.reserve_like(old);
  // Added out of name order, one name twice (the last stays), two names of one inode (its bytes count once).
  index.add("usr/bin", "kubectl", {digest_of("kubectl"), FileStamp{11, 40, 1, 0, 1, 0}, {}});
  index.add("usr/bin", "k3s", {digest_of("old"), FileStamp{10, 99, 1, 0, 1, 0}, {}});
  index.add("usr/bin", "k3s", {digest_of("k3s"), FileStamp{10, 100, 1, 0, 1, 0}, {}});
  index.add("usr/bin", "crictl", {digest_of("k3s"), FileStamp{10, 100, 1, 0, 1, 0}, {}});
  index.add("etc", "conf", {digest_of("conf"), FileStamp{12, 10, 1, 0, 1, 0}, {}});
  CHECK(index.find("usr/bin", "k3s")->stamp.size == 100);
  CHECK(index.size() == 4);
  CHECK(index.total_bytes() == 150);
  CHECK(old.total_bytes() == 111);
  CHECK(paths_of(index) == std::vector<std::string>{"etc/conf", "usr/bin/crictl", "usr/bin/k3s", "usr/bin/kubectl"});

  // The directory only the other index had is not written as an empty one: the bytes are those of the same
  // entries added without the reserve.
  ContentIndex plain;
  plain.add("etc", "conf", {digest_of("conf"), FileStamp{12, 10, 1, 0, 1, 0}, {}});
  plain.add("usr/bin", "crictl", {digest_of("k3s"), FileStamp{10, 100, 1, 0, 1, 0}, {}});
  plain.add("usr/bin", "k3s", {digest_of("k3s"), FileStamp{10, 100, 1, 0, 1, 0}, {}});
  plain.add("usr/bin", "kubectl", {digest_of("kubectl"), FileStamp{11, 40, 1, 0, 1, 0}, {}});
  CHECK(index.serialize() == plain.serialize());
  auto parsed = ContentIndex::parse(index.serialize(), "/v/index");
  REQUIRE(parsed);
  CHECK(parsed->size() == 4);
  CHECK(parsed->total_bytes() == 150);
  // What is written alike holds the same entries, whichever was read and whichever built.
  CHECK(index.same_entries(plain));
  CHECK(parsed->same_entries(index));
  CHECK(index.same_entries(*parsed));
  CHECK_FALSE(index.same_entries(old));
}

TEST_CASE("two indexes hold the same entries only when every name, digest and stamp is the same", "[transfer]") {
  const ContentIndex::Entry conf{digest_of("conf"), FileStamp{12, 10, 1, 0, 1, 0}, SourceStamp{3, 40, 5, 6}};
  auto base = [&](ContentIndex& index) {
    index.add("etc", "conf", conf);
    index.add("usr/bin", "k3s", {digest_of("k3s"), FileStamp{10, 100, 1, 0, 1, 0}, {}});
  };
  ContentIndex a;
  base(a);
  const auto differs = [&](const std::function<void(ContentIndex&)>& change) {
    ContentIndex b;
    base(b);
    change(b);
    return !a.same_entries(b) && !b.same_entries(a);
  };
  ContentIndex same;
  base(same);
  CHECK(a.same_entries(same));
  CHECK(a.same_entries(a));
  CHECK(differs([&](ContentIndex& b) { b.add("etc", "conf", {digest_of("other"), conf.stamp, conf.source}); }));
  CHECK(differs([&](ContentIndex& b) {  // another ctime: the file was written since
    b.add("etc", "conf", {conf.digest, FileStamp{12, 10, 1, 0, 1, 1}, conf.source});
  }));
  CHECK(differs([&](ContentIndex& b) {  // read from another payload file
    b.add("etc", "conf", {conf.digest, conf.stamp, SourceStamp{3, 41, 5, 6}});
  }));
  CHECK(differs([&](ContentIndex& b) { b.add("etc", "conf", {conf.digest, conf.stamp, {}}); }));
  CHECK(differs([&](ContentIndex& b) { b.add("etc", "more", conf); }));
  CHECK(differs([&](ContentIndex& b) { b.add("", "conf", conf); }));
  // The same count, one name moved to another directory.
  ContentIndex moved;
  moved.add("etc2", "conf", conf);
  moved.add("usr/bin", "k3s", {digest_of("k3s"), FileStamp{10, 100, 1, 0, 1, 0}, {}});
  CHECK_FALSE(a.same_entries(moved));
  CHECK_FALSE(moved.same_entries(a));
  CHECK_FALSE(a.same_entries(ContentIndex()));
  CHECK(ContentIndex().same_entries(ContentIndex()));
}

TEST_CASE("an index keeps the stamp of the payload file each digest was read from", "[transfer]") {
  ContentIndex index;
  ContentIndex::Entry read{digest_of("a"), FileStamp{7, 1, 1700000000, 5, 1800000000, 999999999},
                           SourceStamp{2049, 1234567, 1790000000, 123456789}};
  ContentIndex::Entry listed{digest_of("b"), FileStamp{8, 2, -1, 0, 1, 1}, {}};
  index.add("usr/bin", "k3s", read);
  index.add("usr/bin", "ctr", listed);
  const std::string bytes = index.serialize();
  CHECK(bytes.starts_with("hoist-content-index 2\n"));
  auto parsed = ContentIndex::parse(bytes, "/v/index");
  REQUIRE(parsed);
  CHECK(parsed->find("usr/bin", "k3s")->source == read.source);
  CHECK(parsed->find("usr/bin", "k3s")->stamp == read.stamp);
  CHECK_FALSE(parsed->find("usr/bin", "ctr")->source.known());
  CHECK(parsed->serialize() == bytes);

  // The index an earlier hoist wrote (format 1) is read, with no payload file known: those are read again.
  auto summed = [](const std::string& body) {
    const Sha256Digest sum = digest_of(body);
    return body + std::string(reinterpret_cast<const char*>(sum.data()), sum.size());
  };
  const Sha256Digest d = digest_of("x");
  const std::string v1 = summed("hoist-content-index 1\n" + std::string("\x01\x00\x01\x04tool", 8) +
                                std::string(reinterpret_cast<const char*>(d.data()), d.size()) +
                                std::string("\x05\x02\x04\x03\x08\x05", 6));
  auto old = ContentIndex::parse(v1, "/v/old");
  REQUIRE(old);
  const ContentIndex::Entry* tool = old->find("", "tool");
  REQUIRE(tool != nullptr);
  CHECK(tool->digest == d);
  CHECK(tool->stamp == FileStamp{5, 1, 2, 3, 4, 5});
  CHECK_FALSE(tool->source.known());
}

TEST_CASE("an index vouches for a payload file only while it is the inode its digest was read from", "[transfer]") {
  ScopedTempDir tmp;
  const auto installed = tmp / "installed/etc/conf";
  const auto payload = tmp / "payload/etc/conf";
  write_text(installed, "version=1.0.0\n");
  write_text(payload, "version=1.0.0\n");
  const struct stat payload_st = lstat_of(payload);
  const struct timespec times[2] = {payload_st.st_atim, payload_st.st_mtim};
  REQUIRE(::utimensat(AT_FDCWD, installed.c_str(), times, 0) == 0);
  ContentIndex index;
  index.add("etc", "conf",
            {digest_of("version=1.0.0\n"), FileStamp::of(lstat_of(installed)), SourceStamp::of(payload_st)});

  REQUIRE(index.vouch_source("etc", "conf", lstat_of(payload)) == digest_of("version=1.0.0\n"));
  CHECK_FALSE(index.vouch_source("etc", "other", lstat_of(payload)));
  // The installed file is not the payload file: its own stamp is not the source's.
  CHECK_FALSE(index.vouch_source("etc", "conf", lstat_of(installed)));

  SECTION("rewritten in place with its size and mtime put back: the ctime moved") {
    ::usleep(20000);
    write_text(payload, "version=2.0.0\n");
    REQUIRE(::utimensat(AT_FDCWD, payload.c_str(), times, 0) == 0);
    const struct stat after = lstat_of(payload);
    REQUIRE(after.st_ino == payload_st.st_ino);
    REQUIRE(after.st_size == payload_st.st_size);
    REQUIRE(after.st_mtim.tv_nsec == payload_st.st_mtim.tv_nsec);
    CHECK_FALSE(index.vouch_source("etc", "conf", after));
  }
  SECTION("replaced by a copy with the same size and mtime") {
    write_text(tmp / "new", "version=2.0.0\n");
    REQUIRE(::utimensat(AT_FDCWD, (tmp / "new").c_str(), times, 0) == 0);
    REQUIRE(::rename((tmp / "new").c_str(), payload.c_str()) == 0);
    CHECK_FALSE(index.vouch_source("etc", "conf", lstat_of(payload)));
  }
  SECTION("an entry with no payload file recorded vouches for none") {
    ContentIndex listed;
    listed.add("etc", "conf", {digest_of("version=1.0.0\n"), FileStamp::of(lstat_of(installed)), {}});
    CHECK_FALSE(listed.vouch_source("etc", "conf", lstat_of(payload)));
  }
}

TEST_CASE("an index vouches for a file only while its inode is the one indexed", "[transfer]") {
  ScopedTempDir tmp;
  const auto file = tmp / "etc/conf";
  write_text(file, "version=1.0.0\n");
  ContentIndex index;
  index.add("etc", "conf", entry_of(file, "version=1.0.0\n"));

  REQUIRE(index.vouch("etc", "conf", lstat_of(file)) == digest_of("version=1.0.0\n"));
  CHECK_FALSE(index.vouch("etc", "other", lstat_of(file)));

  SECTION("rewritten in place with its size and mtime put back: the ctime moved") {
    const struct stat before = lstat_of(file);
    ::usleep(20000);
    write_text(file, "version=2.0.0\n");
    const struct timespec times[2] = {before.st_atim, before.st_mtim};
    REQUIRE(::utimensat(AT_FDCWD, file.c_str(), times, 0) == 0);
    const struct stat after = lstat_of(file);
    REQUIRE(after.st_size == before.st_size);
    REQUIRE(after.st_mtim.tv_sec == before.st_mtim.tv_sec);
    REQUIRE(after.st_mtim.tv_nsec == before.st_mtim.tv_nsec);
    CHECK_FALSE(index.vouch("etc", "conf", after));
  }
  SECTION("a chmod") {
    ::usleep(20000);
    REQUIRE(::chmod(file.c_str(), 0600) == 0);
    CHECK_FALSE(index.vouch("etc", "conf", lstat_of(file)));
  }
  SECTION("replaced by another file") {
    write_text(tmp / "new", "version=1.0.0\n");
    REQUIRE(::rename((tmp / "new").c_str(), file.c_str()) == 0);
    CHECK_FALSE(index.vouch("etc", "conf", lstat_of(file)));
  }
  SECTION("a directory or a symlink in its place") {
    std::filesystem::remove(file);
    std::filesystem::create_symlink("elsewhere", file);
    CHECK_FALSE(index.vouch("etc", "conf", lstat_of(file)));
  }
}

TEST_CASE("an indexed tree vouches for a file by its relative path, looked at under the tree's root", "[transfer]") {
  ScopedTempDir tmp;
  write_text(tmp / "tree/etc/conf", "version=1.0.0\n");
  write_text(tmp / "tree/top", "top\n");
  hoist::IndexedTree tree{hoist::Fd(::open((tmp / "tree").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)), {}};
  REQUIRE(tree.dir);
  tree.index.add("etc", "conf", entry_of(tmp / "tree/etc/conf", "version=1.0.0\n"));
  tree.index.add("", "top", entry_of(tmp / "tree/top", "top\n"));

  CHECK(tree.vouch("etc/conf") == digest_of("version=1.0.0\n"));
  CHECK(tree.vouch("top") == digest_of("top\n"));
  CHECK_FALSE(tree.vouch("conf"));       // not indexed under that name
  CHECK_FALSE(tree.vouch("etc/other"));  // neither indexed nor there
  SECTION("gone from the tree") {
    std::filesystem::remove(tmp / "tree/etc/conf");
    CHECK_FALSE(tree.vouch("etc/conf"));
  }
  SECTION("changed since it was indexed") {
    ::usleep(20000);
    REQUIRE(::chmod((tmp / "tree/top").c_str(), 0600) == 0);
    CHECK_FALSE(tree.vouch("top"));
  }
}

TEST_CASE("a damaged index is refused with its name and what is wrong", "[transfer]") {
  ContentIndex index;
  index.add("bin", "tool", {digest_of("x"), FileStamp{1, 1, 1, 1, 1, 1}, {}});
  index.add("etc", "conf", {digest_of("y"), FileStamp{2, 2, 2, 2, 2, 2}, {}});
  const std::string bytes = index.serialize();

  auto message = [](const std::string& damaged) {
    auto parsed = ContentIndex::parse(damaged, "/var/lib/hoist/c/.index/2.0.0");
    REQUIRE_FALSE(parsed);
    return parsed.error().message;
  };
  const std::string prefix = "content index '/var/lib/hoist/c/.index/2.0.0' is damaged: ";
  CHECK(message(bytes.substr(0, bytes.size() - 1)) == prefix + "its checksum does not match (cut short, or changed)");
  CHECK(message(bytes.substr(0, 30)) == prefix + "it is cut short");
  CHECK(message(bytes.substr(0, 10)) == prefix + "it does not start as a content index of this hoist does");
  CHECK(message("") == prefix + "it does not start as a content index of this hoist does");
  std::string flipped = bytes;
  flipped[bytes.size() / 2] = static_cast<char>(flipped[bytes.size() / 2] ^ 0x10);
  CHECK(message(flipped) == prefix + "its checksum does not match (cut short, or changed)");
  CHECK(message("hoist-content-index 1\n") == prefix + "it is cut short");

  // Well summed, badly formed: what only a hoist with a bug would write.
  auto summed = [](const std::string& body) {
    const Sha256Digest sum = digest_of(body);
    return body + std::string(reinterpret_cast<const char*>(sum.data()), sum.size());
  };
  const std::string magic = "hoist-content-index 1\n";
  CHECK(message(summed(magic + std::string("\x02\x01"
                                           "b\x00\x01"
                                           "a\x00",
                                           7))) == prefix + "a directory is out of order or not a relative path");
  CHECK(message(summed(magic + std::string("\x01\x00\x01\x02..", 6))) ==
        prefix + "a name is out of order or not a file name");
  CHECK(message(summed(magic + std::string("\x00\x00", 2))) == prefix + "it goes on after its last entry");
  CHECK(message(summed(magic + std::string("\x01\x00\x01\x01x", 5))) == prefix + "it ends inside a digest");
}
