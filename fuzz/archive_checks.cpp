// libFuzzer target: the checks hoist makes on an archive file before libarchive
// unpacks it. The input is the file: its compression is detected from its first
// bytes and the whole stream decoded (check_compressed_stream), and its zip
// records followed to the local headers' names (zip_local_names). Either gives a
// verdict or a SysError; neither may crash, hang or read past the file.

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "hoist/sys/compressed_stream.hpp"
#include "hoist/sys/zip_names.hpp"
#include "hoist/util/fd.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const hoist::Fd file(::memfd_create("archive", MFD_CLOEXEC));
  if (!file || ::ftruncate(file.get(), 0) != 0 || ::pwrite(file.get(), data, size, 0) != static_cast<ssize_t>(size)) {
    std::abort();
  }
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  std::string unsupported;
  if (const auto compression = hoist::detect_compression(bytes.substr(0, 16), unsupported)) {
    if (!unsupported.empty()) {
      std::abort();
    }
    auto verdict = hoist::check_compressed_stream(file.get(), *compression);
    if (*compression == hoist::Compression::none && (!verdict || verdict->has_value())) {
      std::abort();  // nothing to check is never a problem
    }
  } else if (unsupported.empty()) {
    std::abort();
  }
  if (auto names = hoist::zip_local_names(file.get(), size)) {
    // Every name comes from a 30-byte local header inside the file.
    if (names->size() > size / 30) {
      std::abort();
    }
  }
  return 0;
}
