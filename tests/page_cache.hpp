#pragma once

// What of a file is in the page cache, for tests of the read-ahead.

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "hoist/util/fd.hpp"
#include "scoped_temp_dir.hpp"

namespace hoist::test {

/// How many of the pages of `path` are in the page cache (mincore).
inline size_t resident_pages(const std::filesystem::path& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  REQUIRE(fd);
  struct stat st {};
  REQUIRE(::fstat(fd.get(), &st) == 0);
  const auto size = static_cast<size_t>(st.st_size);
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd.get(), 0);
  REQUIRE(map != MAP_FAILED);
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> vec((size + page - 1) / page);
  REQUIRE(::mincore(map, size, vec.data()) == 0);
  ::munmap(map, size);
  return static_cast<size_t>(std::count_if(vec.begin(), vec.end(), [](unsigned char v) { return (v & 1U) != 0; }));
}

/// Writes `path` durably and drops it from the page cache; false when the filesystem keeps it (tmpfs).
inline bool evicted_file(const std::filesystem::path& path, size_t size) {
  write_text(path, std::string(size, 'x'));
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  REQUIRE(fd);
  REQUIRE(::fsync(fd.get()) == 0);
  REQUIRE(::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED) == 0);
  return resident_pages(path) == 0;
}

}  // namespace hoist::test
