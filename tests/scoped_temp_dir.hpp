#pragma once

#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>

namespace hoist::test {

/// A fresh directory under $TMPDIR (or /tmp), removed with everything in it
/// when the object dies.
class ScopedTempDir {
 public:
  ScopedTempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "hoist-test.XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error("mkdtemp failed");
    }
    m_path = pattern;
  }
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;
  ~ScopedTempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(m_path, ignored);
  }
  [[nodiscard]] const std::filesystem::path& path() const { return m_path; }
  [[nodiscard]] std::filesystem::path operator/(const std::string& relative) const { return m_path / relative; }

 private:
  std::filesystem::path m_path;
};

/// The threads of this process now (/proc/self/status). A sanitizer's runtime may keep a thread of its own (TSan
/// does), so tests compare it with a count taken before, never with 1.
inline int thread_count() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Threads:", 0) == 0) {
      return std::stoi(line.substr(8));
    }
  }
  return -1;
}

/// The threads of this process once those that were joined have left it: at most 5 s for the count to fall to
/// `expected`, then the count. pthread_join returns when the kernel clears the thread's id, which it does before the
/// thread leaves the process's count; under qemu-user, the emulator's own thread ends a moment later still. A thread
/// that was never joined is still counted after 5 s.
inline int thread_count_settled(int expected) {
  int count = thread_count();
  for (int waited_ms = 0; count > expected && waited_ms < 5000; ++waited_ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    count = thread_count();
  }
  return count;
}

/// Writes `content` to `path`, creating parent directories.
inline void write_text(const std::filesystem::path& path, const std::string& content) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
}

/// Reads a whole file.
inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// Writes `files` files of `size` bytes ('x'), named f<i>, into `dirs` directories d<i % dirs> under `root`.
inline void write_files(const std::filesystem::path& root, long files, long dirs, size_t size) {
  const std::string content(size, 'x');
  for (long i = 0; i < files; ++i) {
    write_text(root / ("d" + std::to_string(i % dirs)) / ("f" + std::to_string(i)), content);
  }
}

}  // namespace hoist::test
