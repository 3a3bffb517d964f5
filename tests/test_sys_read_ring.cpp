#include "hoist/sys/read_ring.hpp"

#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <string>
#include <thread>
#include <vector>

#include "deny_syscalls.hpp"
#include "hoist/util/fd.hpp"
#include "page_cache.hpp"
#include "scoped_temp_dir.hpp"

using hoist::Fd;
using hoist::ReadRing;
using hoist::test::evicted_file;
using hoist::test::resident_pages;
using hoist::test::ScopedTempDir;

namespace {

/// This thread's ring, or nullptr after saying why the test is skipped.
ReadRing* ring_or_skip() {
  ReadRing* ring = ReadRing::for_this_thread();
  if (ring == nullptr) {
    WARN(
        "skipped: io_uring cannot be used here (io_uring_setup refused, as under qemu-user or a seccomp filter, or "
        "a kernel before 5.12): ReadAhead advises the kernel file by file, tested in [transfer]");
  }
  return ring;
}

}  // namespace

TEST_CASE("ReadRing reads the files it is given into the page cache, more of them than its ring holds", "[read-ring]") {
  ReadRing* ring = ring_or_skip();
  if (ring == nullptr) {
    return;
  }
  CHECK(ReadRing::for_this_thread() == ring);  // one a thread
  ScopedTempDir tmp;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  constexpr size_t k_files = ReadRing::k_entries * 2 + 3;
  constexpr size_t k_size = 16 << 10;
  for (size_t i = 0; i < k_files; ++i) {
    if (!evicted_file(tmp / ("f" + std::to_string(i)), k_size)) {
      WARN("skipped: the filesystem of " << tmp.path().string()
                                         << " keeps file pages in memory (tmpfs?), so there is nothing to read");
      return;
    }
  }
  REQUIRE(evicted_file(tmp / "big", size_t{3} << 20U));
  std::vector<Fd> files;
  for (size_t i = 0; i < k_files; ++i) {
    files.emplace_back(::open((tmp / ("f" + std::to_string(i))).c_str(), O_RDONLY | O_CLOEXEC));
    REQUIRE(files.back());
    REQUIRE(ring->queue(files.back().get(), k_size));
  }
  files.emplace_back(::open((tmp / "big").c_str(), O_RDONLY | O_CLOEXEC));
  REQUIRE(ring->queue(files.back().get(), uint64_t{3} << 20U));  // the first k_max_read bytes
  ring->submit();
  files.clear();  // the kernel holds the files until their reads complete
  ring->drain();
  // Nothing else read these files since they were evicted: every page in memory is one the ring read.
  for (size_t i = 0; i < k_files; ++i) {
    CHECK(resident_pages(tmp / ("f" + std::to_string(i))) == k_size / page);
  }
  CHECK(resident_pages(tmp / "big") >= ReadRing::k_max_read / page);
}

TEST_CASE("a thread whose io_uring_setup is refused has no ReadRing, and other threads keep theirs", "[read-ring]") {
  const bool has_ring = ReadRing::for_this_thread() != nullptr;
  bool filtered = false;
  bool refused_has_ring = true;
  std::thread thread([&] {
    filtered = hoist::test::deny_syscalls({__NR_io_uring_setup});
    refused_has_ring = filtered && ReadRing::for_this_thread() != nullptr;
  });
  thread.join();
  if (!filtered) {
    WARN("skipped: no seccomp filter can be installed here (qemu-user refuses a guest's): the ctest stage runs it");
    return;
  }
  CHECK_FALSE(refused_has_ring);
  bool later_has_ring = false;
  std::thread later([&] { later_has_ring = ReadRing::for_this_thread() != nullptr; });
  later.join();
  CHECK(later_has_ring == has_ring);
}

TEST_CASE("a child of fork() makes a ring of its own and leaves its parent's reads alone", "[read-ring]") {
  ReadRing* ring = ring_or_skip();
  if (ring == nullptr) {
    return;
  }
  ScopedTempDir tmp;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  constexpr size_t k_size = 64 << 10;
  for (const char* name : {"parent", "child"}) {
    if (!evicted_file(tmp / name, k_size)) {
      WARN("skipped: the filesystem of " << tmp.path().string()
                                         << " keeps file pages in memory (tmpfs?), so there is nothing to read");
      return;
    }
  }
  const Fd parent_file(::open((tmp / "parent").c_str(), O_RDONLY | O_CLOEXEC));
  REQUIRE(parent_file);
  REQUIRE(ring->queue(parent_file.get(), k_size));
  ring->submit();
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // The parent's ring, inherited, would hand this child the parent's completions.
    ReadRing* own = ReadRing::for_this_thread();
    const Fd file(::open((tmp / "child").c_str(), O_RDONLY | O_CLOEXEC));
    const bool read = own != nullptr && own != ring && file && own->queue(file.get(), k_size);
    if (read) {
      own->drain();
    }
    ::_exit(read ? 0 : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  ring->drain();  // returns: the child took none of the parent's completions
  CHECK(ReadRing::for_this_thread() == ring);
  CHECK(resident_pages(tmp / "parent") == k_size / page);
  CHECK(resident_pages(tmp / "child") == k_size / page);
}
