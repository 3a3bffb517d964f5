// hoist-durable-bench DIR FILES SIZE ROUNDS
//
// The measurement behind hoist's choice of one syncfs(2) over an fsync of each
// file (docs/how-it-works.md, "Durability and crash safety"): ROUNDS times, FILES fresh files
// of SIZE bytes (in FILES/50+1 directories) under a new directory in DIR, made
// durable by make_tree_durable() with each strategy, each starting from a
// sync(2). Prints one line a round: "FILES SIZE PER_FILE_SECONDS SYNCFS_SECONDS".
// scripts/bench-durability runs it and prints the table.

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "../scoped_temp_dir.hpp"
#include "hoist/sys/durable_tree.hpp"
#include "hoist/util/fd.hpp"

namespace {

namespace fs = std::filesystem;

double durable_seconds(const fs::path& root, hoist::Durability durability) {
  hoist::Fd dir(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir) {
    throw std::runtime_error("failed to open '" + root.string() + "': " + std::strerror(errno));
  }
  const auto start = std::chrono::steady_clock::now();
  auto made = hoist::make_tree_durable(dir.get(), durability, root.string());
  const auto end = std::chrono::steady_clock::now();
  if (!made) {
    throw std::runtime_error(made.error().message);
  }
  return std::chrono::duration<double>(end - start).count();
}

// A whole positive number from argv, else 0.
long positive(const char* text) {
  char* rest = nullptr;
  errno = 0;
  const long value = std::strtol(text, &rest, 10);
  return *text != '\0' && *rest == '\0' && errno == 0 && value > 0 ? value : 0;
}

}  // namespace

int main(int argc, char** argv) {
  const long files = argc == 5 ? positive(argv[2]) : 0;
  const long size = argc == 5 ? positive(argv[3]) : 0;
  const long rounds = argc == 5 ? positive(argv[4]) : 0;
  if (files == 0 || size == 0 || rounds == 0) {
    std::fprintf(stderr, "usage: %s DIR FILES SIZE ROUNDS (FILES, SIZE in bytes and ROUNDS above 0)\n", argv[0]);
    return 2;
  }
  std::string pattern = (fs::path(argv[1]) / "hoist-durable-bench.XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    std::fprintf(stderr, "%s: failed to make a directory in '%s': %s\n", argv[0], argv[1], std::strerror(errno));
    return 1;
  }
  const fs::path work = pattern;
  int status = 0;
  try {
    for (long round = 0; round < rounds; ++round) {
      ::sync();  // both start from a clean page cache
      hoist::test::write_files(work / "fsync", files, files / 50 + 1, static_cast<size_t>(size));
      const double fsync_seconds = durable_seconds(work / "fsync", hoist::Durability::per_file_fsync);
      ::sync();
      hoist::test::write_files(work / "syncfs", files, files / 50 + 1, static_cast<size_t>(size));
      const double syncfs_seconds = durable_seconds(work / "syncfs", hoist::Durability::syncfs);
      std::printf("%ld %ld %.4f %.4f\n", files, size, fsync_seconds, syncfs_seconds);
      std::fflush(stdout);
      fs::remove_all(work / "fsync");
      fs::remove_all(work / "syncfs");
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s: %s\n", argv[0], error.what());
    status = 1;
  }
  std::error_code ignored;
  fs::remove_all(work, ignored);
  return status;
}
