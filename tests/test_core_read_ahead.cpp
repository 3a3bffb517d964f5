#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "hoist/sys/directory.hpp"
#include "hoist/util/fd.hpp"
#include "read_ahead.hpp"
#include "scoped_temp_dir.hpp"

using hoist::DirEntry;
using hoist::Fd;
using hoist::test::ScopedTempDir;
using hoist::test::write_text;
using hoist::transfer::ReadAhead;

namespace {

Fd open_dir(const std::filesystem::path& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  REQUIRE(fd);
  return fd;
}

std::vector<DirEntry> sorted_entries(int dirfd) {
  auto entries = hoist::read_directory(dirfd, "test").value();
  hoist::transfer::sort_by_inode(entries);
  return entries;
}

std::vector<std::string> names_started(const ReadAhead& ahead, const std::vector<DirEntry>& entries) {
  std::vector<std::string> names;
  for (size_t index : ahead.started()) {
    names.push_back(entries[index].name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

void sparse_file(const std::filesystem::path& path, off_t size) {
  Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  REQUIRE(fd);
  REQUIRE(::ftruncate(fd.get(), size) == 0);
}

}  // namespace

TEST_CASE("sort_by_inode orders a directory's entries by their inode numbers", "[transfer]") {
  ScopedTempDir dir;
  for (int i = 0; i < 200; ++i) {
    write_text(dir / ("f" + std::to_string(i * 7919 % 200)), "x");
  }
  const Fd fd = open_dir(dir.path());
  const std::vector<DirEntry> entries = sorted_entries(fd.get());
  REQUIRE(entries.size() == 200);
  ino_t previous = 0;
  for (const DirEntry& entry : entries) {
    struct stat st {};
    REQUIRE(::fstatat(fd.get(), entry.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0);
    CHECK(entry.inode == st.st_ino);
    CHECK(st.st_ino > previous);
    previous = st.st_ino;
  }
}

TEST_CASE("ReadAhead starts reads of the regular files a copy will read, and of nothing else", "[transfer]") {
  ScopedTempDir tmp;
  const auto src = tmp / "src";
  const auto old = tmp / "old";
  std::filesystem::create_directories(src / "subdir");
  std::filesystem::create_directories(old);
  write_text(src / "new-file", "data");
  write_text(src / "empty", "");
  write_text(src / "changed", "new content");
  write_text(old / "changed", "old");
  write_text(src / "unchanged", "same");
  write_text(old / "unchanged", "same");
  REQUIRE(::mkfifo((src / "fifo").c_str(), 0644) == 0);
  std::filesystem::create_symlink("new-file", src / "link");
  // Same size and mtime in the old tree: the quick check will not read it.
  struct stat st {};
  REQUIRE(::stat((src / "unchanged").c_str(), &st) == 0);
  const struct timespec times[2] = {st.st_atim, st.st_mtim};
  REQUIRE(::utimensat(AT_FDCWD, (old / "unchanged").c_str(), times, 0) == 0);

  const Fd source = open_dir(src);
  const Fd skip = open_dir(old);
  const std::vector<DirEntry> entries = sorted_entries(source.get());

  SECTION("against the old tree") {
    ReadAhead ahead(source.get(), skip.get(), entries, true);
    ahead.before(0);
    CHECK(names_started(ahead, entries) == std::vector<std::string>{"changed", "new-file"});
  }
  SECTION("without one, every non-empty regular file") {
    ReadAhead ahead(source.get(), -1, entries, true);
    for (size_t i = 0; i < entries.size(); ++i) {
      ahead.before(i);
    }
    CHECK(names_started(ahead, entries) == std::vector<std::string>{"changed", "new-file", "unchanged"});
  }
  SECTION("disabled (a dry run), nothing") {
    ReadAhead ahead(source.get(), -1, entries, false);
    ahead.before(0);
    CHECK(ahead.started().empty());
  }
}

TEST_CASE("ReadAhead stays within its window of files and bytes", "[transfer]") {
  ScopedTempDir tmp;
  constexpr size_t k_big = 20;
  for (size_t i = 0; i < k_big; ++i) {
    sparse_file(tmp / ("big" + std::to_string(i)), 4 << 20);  // each counts k_per_file
  }
  const Fd source = open_dir(tmp.path());
  const std::vector<DirEntry> entries = sorted_entries(source.get());
  ReadAhead ahead(source.get(), -1, entries, true);
  constexpr size_t k_fit = ReadAhead::k_bytes / ReadAhead::k_per_file;
  ahead.before(0);
  CHECK(ahead.started().size() == k_fit);
  ahead.before(1);  // entry 0 is handled: room for one more
  CHECK(ahead.started().size() == k_fit + 1);
  ahead.before(1);
  CHECK(ahead.started().size() == k_fit + 1);
  for (size_t i = 2; i < k_big; ++i) {
    ahead.before(i);
  }
  CHECK(ahead.started().size() == k_big);
  // Indexes are started once each, in order.
  for (size_t i = 0; i < ahead.started().size(); ++i) {
    CHECK(ahead.started()[i] == i);
  }

  ScopedTempDir small;
  for (size_t i = 0; i < 100; ++i) {
    write_text(small / ("s" + std::to_string(i)), "x");
  }
  const Fd small_dir = open_dir(small.path());
  const std::vector<DirEntry> small_entries = sorted_entries(small_dir.get());
  ReadAhead files(small_dir.get(), -1, small_entries, true);
  files.before(0);
  CHECK(files.started().size() == ReadAhead::k_files);
  files.before(10);
  CHECK(files.started().size() == ReadAhead::k_files + 10);
  // Entries the walk has passed are not read ahead any more.
  ReadAhead late(small_dir.get(), -1, small_entries, true);
  late.before(90);
  CHECK(late.started().size() == 10);
  CHECK(late.started().front() == 90);
}
