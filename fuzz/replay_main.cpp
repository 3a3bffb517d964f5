// A main for a libFuzzer target without libFuzzer: runs LLVMFuzzerTestOneInput
// once on each file named, or on each regular file of each directory named (in
// name order), and exits 0 if none crashed. CMakeLists.txt builds one per target
// with the ordinary compiler, and ctest replays the seed corpus fuzz/corpus/<target>
// with it: the seeds are the regression tests of every crash found so far.
//
//   fuzz-replay-<target> FILE|DIR...

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

namespace fs = std::filesystem;

bool replay(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "replay: cannot read %s\n", file.c_str());
    return false;
  }
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) {
    std::fprintf(stderr, "replay: cannot read %s\n", file.c_str());
    return false;
  }
  std::fprintf(stderr, "replay: %s (%zu bytes)\n", file.c_str(), bytes.size());
  LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
    return 2;
  }
  std::size_t replayed = 0;
  for (int i = 1; i < argc; ++i) {
    const fs::path arg = argv[i];
    std::error_code error;
    std::vector<fs::path> files;
    if (fs::is_directory(arg, error)) {
      for (const auto& entry : fs::directory_iterator(arg, error)) {
        if (entry.is_regular_file()) {
          files.push_back(entry.path());
        }
      }
      if (error) {
        std::fprintf(stderr, "replay: cannot list %s: %s\n", arg.c_str(), error.message().c_str());
        return 1;
      }
      std::sort(files.begin(), files.end());
    } else {
      files.push_back(arg);
    }
    for (const auto& file : files) {
      if (!replay(file)) {
        return 1;
      }
      ++replayed;
    }
  }
  if (replayed == 0) {
    std::fprintf(stderr, "replay: no input found in what was named\n");
    return 1;
  }
  std::fprintf(stderr, "replay: %zu inputs, none crashed\n", replayed);
  return 0;
}
