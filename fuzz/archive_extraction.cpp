// libFuzzer target: the input as an archive payload (any format and filter
// libarchive reads), staged into a scratch root as `hoist upgrade --kind tree`
// stages it. Any input stages or is refused with hoist::Error, and nothing is
// ever written beside the staging directory: an entry that climbs out of it
// (`..`, an absolute name, a symlink followed by a later entry, a hard link to
// an outside file) would land in, or link to, the watched sibling directory.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include "hoist/transfer/payload.hpp"
#include "hoist/transfer/transfer.hpp"
#include "hoist/util/error.hpp"
#include "hoist/util/fd.hpp"

namespace {

namespace fs = std::filesystem;

/// <scratch>/payload (the archive), <scratch>/root/staging (where it goes), and
/// <scratch>/root/outside with one file: both must look the same after each input.
struct Scratch {
  fs::path dir;
  Scratch() {
    std::string pattern = (fs::temp_directory_path() / "hoist-fuzz-archive.XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      std::perror("mkdtemp");
      std::abort();
    }
    dir = pattern;
    fs::create_directories(dir / "root/outside");
    std::ofstream(dir / "root/outside/keep") << "keep\n";
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() {
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  }
};

void check_outside(const fs::path& root) {
  for (const auto& entry : fs::directory_iterator(root)) {
    const std::string name = entry.path().filename().string();
    if (name != "outside" && name != "staging") {
      std::fprintf(stderr, "an entry was written beside the staging directory: %s\n", name.c_str());
      std::abort();
    }
  }
  std::size_t inside = 0;
  for (const auto& entry : fs::directory_iterator(root / "outside")) {
    (void)entry;
    ++inside;
  }
  struct stat st {};
  if (inside != 1 || ::lstat((root / "outside/keep").c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size != 5 ||
      st.st_nlink != 1) {
    std::fprintf(stderr, "the directory beside the staging directory changed\n");
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const Scratch scratch;
  const fs::path archive = scratch.dir / "payload";
  const fs::path root = scratch.dir / "root";
  const fs::path staging = root / "staging";
  {
    std::ofstream out(archive, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  std::error_code ignored;
  fs::remove_all(staging, ignored);
  fs::create_directory(staging);
  try {
    const hoist::Payload payload = hoist::Payload::open(archive);
    if (payload.type() == hoist::PayloadType::archive) {
      hoist::Fd dir(::open(staging.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      hoist::TransferOptions options;
      options.threads = 1;
      options.max_unpacked_bytes = 64U << 20U;
      options.max_unpack_ratio = 1000;
      (void)hoist::stage_tree(payload, dir.get(), -1, options);
    }
  } catch (const hoist::Error&) {
    // refused: fine
  }
  check_outside(root);
  fs::remove_all(staging, ignored);
  return 0;
}
