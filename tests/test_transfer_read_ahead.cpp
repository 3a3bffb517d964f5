#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "deny_syscalls.hpp"
#include "hoist/sys/directory.hpp"
#include "hoist/sys/read_ring.hpp"
#include "hoist/util/fd.hpp"
#include "page_cache.hpp"
#include "read_ahead.hpp"
#include "scoped_temp_dir.hpp"

using hoist::DirEntry;
using hoist::Fd;
using hoist::test::evicted_file;
using hoist::test::resident_pages;
using hoist::test::ScopedTempDir;
using hoist::test::write_text;
using hoist::transfer::ReadAhead;
using hoist::transfer::Reading;

namespace {

Fd open_dir(const std::filesystem::path& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  REQUIRE(fd);
  return fd;
}

std::vector<DirEntry> sorted_entries(int dirfd) {
  auto entries = hoist::read_directory(dirfd, "test").value();
  hoist::sort_by_inode(entries);
  return entries;
}

std::vector<std::string> names_in_flight(const ReadAhead& ahead, const std::vector<DirEntry>& entries) {
  std::vector<std::string> names;
  for (size_t index : ahead.in_flight()) {
    names.push_back(entries[index].name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

size_t index_of(const std::vector<DirEntry>& entries, const std::string& name) {
  const auto it = std::find_if(entries.begin(), entries.end(), [&](const DirEntry& e) { return e.name == name; });
  REQUIRE(it != entries.end());
  return static_cast<size_t>(it - entries.begin());
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
  // Same size and mtime in the old tree: the comparison reads it all the same.
  struct stat st {};
  REQUIRE(::stat((src / "unchanged").c_str(), &st) == 0);
  const struct timespec times[2] = {st.st_atim, st.st_mtim};
  REQUIRE(::utimensat(AT_FDCWD, (old / "unchanged").c_str(), times, 0) == 0);

  const Fd source = open_dir(src);
  const Fd skip = open_dir(old);
  const std::vector<DirEntry> entries = sorted_entries(source.get());

  SECTION("against the old tree") {
    ReadAhead ahead(source.get(), skip.get(), entries, Reading::every_file);
    ahead.before(0);
    CHECK(names_in_flight(ahead, entries) == std::vector<std::string>{"changed", "new-file", "unchanged"});
    // The lstats it took are handed to the walk: the source's, and whether the old tree has the name.
    const ReadAhead::Seen* unchanged = ahead.seen(index_of(entries, "unchanged"));
    REQUIRE(unchanged != nullptr);
    CHECK(unchanged->source.st_ino == entries[index_of(entries, "unchanged")].inode);
    CHECK(unchanged->skip == ReadAhead::Seen::Skip::present);
    struct stat old_stat {};
    REQUIRE(::stat((old / "unchanged").c_str(), &old_stat) == 0);
    CHECK(unchanged->skip_st.st_ino == old_stat.st_ino);
    ReadAhead::Seen* added = ahead.seen(index_of(entries, "new-file"));
    REQUIRE(added != nullptr);
    CHECK(added->skip == ReadAhead::Seen::Skip::absent);
    CHECK(added->source.st_size == 4);
    // The file it opened to start the read is handed on: the walk reads it through that, not opening it again.
    const Fd opened = hoist::transfer::take_source(added);
    REQUIRE(opened);
    struct stat opened_st {};
    REQUIRE(::fstat(opened.get(), &opened_st) == 0);
    CHECK(opened_st.st_ino == added->source.st_ino);
    CHECK(!added->source_fd);
    CHECK(!hoist::transfer::take_source(nullptr));
    // Not regular by their directory entries: not looked at, the walk takes their lstat itself.
    CHECK(ahead.seen(index_of(entries, "subdir")) == nullptr);
    CHECK(ahead.seen(index_of(entries, "link")) == nullptr);
    CHECK(ahead.seen(index_of(entries, "fifo")) == nullptr);
    // Once the walk has passed an entry, its lstats are gone.
    ahead.before(entries.size());
    CHECK(ahead.seen(index_of(entries, "unchanged")) == nullptr);
    CHECK(ahead.in_flight().empty());
  }
  SECTION("when SHA256SUMS and the old tree's index decide, not what looks the same") {
    ReadAhead ahead(source.get(), skip.get(), entries, Reading::not_same);
    ahead.before(0);
    CHECK(names_in_flight(ahead, entries) == std::vector<std::string>{"changed", "new-file"});
    CHECK(ahead.seen(index_of(entries, "unchanged"))->skip == ReadAhead::Seen::Skip::present);
  }
  SECTION("without one, every non-empty regular file") {
    ReadAhead ahead(source.get(), -1, entries, Reading::every_file);
    ahead.before(0);
    CHECK(names_in_flight(ahead, entries) == std::vector<std::string>{"changed", "new-file", "unchanged"});
    const ReadAhead::Seen* unchanged = ahead.seen(index_of(entries, "unchanged"));
    REQUIRE(unchanged != nullptr);
    CHECK(unchanged->skip == ReadAhead::Seen::Skip::unknown);
  }
  SECTION("disabled (a dry run), nothing") {
    ReadAhead ahead(source.get(), -1, entries, Reading::none);
    ahead.before(0);
    CHECK(ahead.in_flight().empty());
    CHECK(ahead.seen(index_of(entries, "new-file")) == nullptr);
  }
}

TEST_CASE("a ReadAhead told to read nothing asks again every half window, and reads ahead once told to",
          "[transfer][read-ahead]") {
  const ScopedTempDir tmp;
  const auto src = tmp / "src";
  std::filesystem::create_directories(src);
  for (int i = 0; i < 96; ++i) {
    write_text(src / ("f" + std::to_string(i)), "data");
  }
  const Fd source = open_dir(src);
  const std::vector<DirEntry> entries = sorted_entries(source.get());
  // What payload_reading() answers before the first copy has found that the filesystem does not clone, then after.
  Reading answer = Reading::none;
  int asked = 0;
  ReadAhead ahead(source.get(), -1, entries, Reading::none, {}, [&] {
    ++asked;
    return answer;
  });
  constexpr size_t k_half = ReadAhead::k_files / 2;
  for (size_t i = 0; i < k_half; ++i) {
    ahead.before(i);
    CHECK(ahead.in_flight().empty());
    CHECK(ahead.seen(i) == nullptr);
  }
  CHECK(asked == 0);     // not at entry 0: the walk asked just before (walk_entries())
  ahead.before(k_half);  // asked, still nothing
  CHECK(asked == 1);
  CHECK(ahead.in_flight().empty());
  for (size_t i = k_half + 1; i < 2 * k_half; ++i) {
    ahead.before(i);
  }
  CHECK(asked == 1);
  answer = Reading::every_file;
  for (size_t i = 2 * k_half; i < 2 * k_half + 3; ++i) {
    ahead.before(i);  // asked at 2 * k_half, not again once it reads
  }
  CHECK(asked == 2);
  // From where it was told: the next window of files, each with its lstat.
  const std::vector<size_t> in_flight = ahead.in_flight();
  REQUIRE(!in_flight.empty());
  CHECK(in_flight.front() == 2 * k_half + 2);
  CHECK(in_flight.back() == 2 * k_half + ReadAhead::k_files - 1);
  REQUIRE(ahead.seen(2 * k_half + 2) != nullptr);
  CHECK(ahead.seen(2 * k_half + 2)->source.st_ino == entries[2 * k_half + 2].inode);

  // Without anyone to ask, nothing is ever read ahead (a dry run).
  ReadAhead never(source.get(), -1, entries, Reading::none);
  for (size_t i = 0; i < entries.size(); ++i) {
    never.before(i);
    CHECK(never.in_flight().empty());
  }
}

namespace {

/// ReadAhead of six evicted files of `src` (one of them matching the old tree's size and mtime): each is
/// brought into the page cache. False when the filesystem keeps file pages in memory (said, skipped).
bool reads_files_into_the_page_cache(const ScopedTempDir& tmp) {
  const auto src = tmp / "src";
  const auto old = tmp / "old";
  std::filesystem::create_directories(old);
  constexpr size_t k_size = 64 << 10;
  for (int i = 0; i < 6; ++i) {
    if (!evicted_file(src / ("f" + std::to_string(i)), k_size)) {
      return false;
    }
  }
  // Same size and mtime in the old tree: read all the same, as its content decides.
  write_text(old / "f5", std::string(k_size, 'x'));
  struct stat st {};
  REQUIRE(::stat((src / "f5").c_str(), &st) == 0);
  const struct timespec times[2] = {st.st_atim, st.st_mtim};
  REQUIRE(::utimensat(AT_FDCWD, (old / "f5").c_str(), times, 0) == 0);

  const Fd source = open_dir(src);
  const Fd skip = open_dir(old);
  const std::vector<DirEntry> entries = sorted_entries(source.get());
  ReadAhead ahead(source.get(), skip.get(), entries, Reading::every_file);
  ahead.before(0);
  const size_t pages = k_size / static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  // The reads run in the background: wait for them (bounded), then look.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  auto all_read = [&] {
    for (int i = 0; i < 6; ++i) {
      if (resident_pages(src / ("f" + std::to_string(i))) < pages) {
        return false;
      }
    }
    return true;
  };
  while (!all_read() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // Every file was evicted and nothing but ReadAhead reads it, so each page in memory is one it asked for.
  // POSIX_FADV_WILLNEED is advice: a page read ahead that nobody has read yet is the first the kernel reclaims
  // under pressure (seen once beside the ASan suite: 15 of 16 pages after 20 s). What ReadAhead does is ask for
  // every file of its window, the one that matches the old tree's size and mtime included: most of each is there.
  for (int i = 0; i < 6; ++i) {
    CHECK(resident_pages(src / ("f" + std::to_string(i))) >= pages / 2);
  }
  return true;
}

}  // namespace

TEST_CASE("ReadAhead brings the files into the page cache before the walk reads them", "[transfer]") {
  ScopedTempDir tmp;
  SECTION("through the thread's io_uring where it has one, else file by file") {
    if (!reads_files_into_the_page_cache(tmp)) {
      WARN("skipped: the filesystem of " << tmp.path().string()
                                         << " keeps file pages in memory (tmpfs?), so there is nothing to read ahead");
    }
  }
  SECTION(
      "with every descriptor of the process's budget kept already, so that each file is closed after its read "
      "is asked for") {
    std::vector<hoist::transfer::KeptFile> kept;
    for (int i = 0; i < hoist::transfer::KeptFile::k_kept_files; ++i) {
      kept.emplace_back(Fd(::open("/dev/null", O_RDONLY | O_CLOEXEC)));
      REQUIRE(kept.back());
    }
    if (!reads_files_into_the_page_cache(tmp)) {
      WARN("skipped: the filesystem of " << tmp.path().string()
                                         << " keeps file pages in memory (tmpfs?), so there is nothing to read ahead");
    }
  }
  SECTION("file by file on a thread whose io_uring_setup is refused, as a container runtime's seccomp profile does") {
    // A seccomp filter binds the thread that installs it (and its children), not the test process.
    bool has_ring = true;
    bool filtered = false;
    bool read = false;
    std::thread thread([&] {
      filtered = hoist::test::deny_syscalls({__NR_io_uring_setup});
      if (filtered) {
        has_ring = hoist::ReadRing::for_this_thread() != nullptr;
        read = reads_files_into_the_page_cache(tmp);
      }
    });
    thread.join();
    if (!filtered) {
      WARN("skipped: no seccomp filter can be installed here (qemu-user refuses a guest's): the ctest stage runs it");
      return;
    }
    CHECK_FALSE(has_ring);
    if (!read) {
      WARN("skipped: the filesystem of " << tmp.path().string()
                                         << " keeps file pages in memory (tmpfs?), so there is nothing to read ahead");
    }
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
  ReadAhead ahead(source.get(), -1, entries, Reading::every_file);
  constexpr size_t k_fit = ReadAhead::k_bytes / ReadAhead::k_per_file;
  auto range = [](size_t first, size_t end) {
    std::vector<size_t> indexes;
    for (size_t i = first; i < end; ++i) {
      indexes.push_back(i);
    }
    return indexes;
  };
  ahead.before(0);
  CHECK(ahead.in_flight() == range(0, k_fit));
  ahead.before(1);  // entry 0 is handled: room for one more
  CHECK(ahead.in_flight() == range(1, k_fit + 1));
  ahead.before(1);
  CHECK(ahead.in_flight() == range(1, k_fit + 1));
  for (size_t i = 2; i < k_big; ++i) {
    ahead.before(i);
    CHECK(ahead.in_flight() == range(i, std::min(i + k_fit, k_big)));
  }

  ScopedTempDir small;
  for (size_t i = 0; i < 100; ++i) {
    write_text(small / ("s" + std::to_string(i)), "x");
  }
  const Fd small_dir = open_dir(small.path());
  const std::vector<DirEntry> small_entries = sorted_entries(small_dir.get());
  ReadAhead files(small_dir.get(), -1, small_entries, Reading::every_file);
  files.before(0);
  CHECK(files.in_flight() == range(0, ReadAhead::k_files));
  // The window is filled again once half of it is handled, so that its reads start together.
  files.before(10);
  CHECK(files.in_flight() == range(10, ReadAhead::k_files));
  files.before(ReadAhead::k_files / 2);
  CHECK(files.in_flight() == range(ReadAhead::k_files / 2, ReadAhead::k_files / 2 + ReadAhead::k_files));
  // Entries the walk has passed are not read ahead any more.
  ReadAhead late(small_dir.get(), -1, small_entries, Reading::every_file);
  late.before(90);
  CHECK(late.in_flight() == range(90, 100));
  CHECK(late.seen(89) == nullptr);
  CHECK(late.seen(90) != nullptr);
}

TEST_CASE("the files the read-ahead keeps open for the walk are bounded in the whole process", "[transfer]") {
  using hoist::transfer::KeptFile;
  std::vector<KeptFile> kept;
  for (int i = 0; i < KeptFile::k_kept_files; ++i) {
    kept.emplace_back(Fd(::open("/dev/null", O_RDONLY | O_CLOEXEC)));
    REQUIRE(kept.back());
  }
  // Past the budget the file is closed: the walk opens it again itself.
  const KeptFile over(Fd(::open("/dev/null", O_RDONLY | O_CLOEXEC)));
  CHECK(!over);
  // A file the walk takes, or one dropped unread, frees its place.
  const Fd taken = kept.back().take();
  CHECK(taken);
  CHECK(!kept.back());
  CHECK(KeptFile(Fd(::open("/dev/null", O_RDONLY | O_CLOEXEC))));
  kept.clear();
  std::vector<KeptFile> again;
  for (int i = 0; i < KeptFile::k_kept_files; ++i) {
    again.emplace_back(Fd(::open("/dev/null", O_RDONLY | O_CLOEXEC)));
  }
  CHECK(std::all_of(again.begin(), again.end(), [](const KeptFile& file) { return static_cast<bool>(file); }));
}
