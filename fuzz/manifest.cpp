// libFuzzer target: the payload manifest (strict JSON: duplicate keys, unknown
// keys, types, versions). Any input parses or is refused with hoist::Error.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "hoist/model/manifest.hpp"
#include "hoist/util/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const hoist::Manifest manifest = hoist::parse_manifest(text, "/payload/manifest.json");
    (void)manifest;
  } catch (const hoist::Error&) {
    // refused: fine
  }
  return 0;
}
