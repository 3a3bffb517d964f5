// libFuzzer target: SHA256SUMS parsing. Any input parses or is refused with
// hoist::Error; what parses lists only safe relative names with 64 lowercase hex
// digits, and every listed name is found again by expected_for().

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "hoist/util/error.hpp"
#include "hoist/verify/checksums.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const hoist::Sha256Sums sums = hoist::Sha256Sums::parse(text, "fuzz");
    if (sums.entries().empty()) {
      std::abort();
    }
    for (const auto& [name, digest] : sums.entries()) {
      const std::string hex = hoist::to_hex(digest);
      if (hex.size() != 64 || hex.find_first_not_of("0123456789abcdef") != std::string::npos || name.empty() ||
          name.front() == '/' || name.find('\0') != std::string::npos || name == ".." || name.rfind("../", 0) == 0 ||
          name.find("/../") != std::string::npos || sums.expected_for(name) != hex) {
        std::abort();
      }
    }
  } catch (const hoist::Error&) {
    // refused: fine
  }
  return 0;
}
