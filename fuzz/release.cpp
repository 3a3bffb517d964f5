// libFuzzer target: os-release parsing and the extension-release check. The
// input is a host os-release, NUL, an extension-release, NUL, an architecture.
// Parsing never throws anything but hoist::Error; the check either passes or
// throws hoist::Error with the verification exit code.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "hoist/util/error.hpp"
#include "hoist/verify/extension_release.hpp"
#include "hoist/verify/os_release.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  std::string_view parts[3];
  for (std::string_view& part : parts) {
    const std::size_t nul = rest.find('\0');
    part = rest.substr(0, nul);
    rest = nul == std::string_view::npos ? std::string_view() : rest.substr(nul + 1);
  }
  try {
    const hoist::OsRelease host = hoist::parse_os_release(parts[0], "host");
    const hoist::OsRelease extension = hoist::parse_os_release(parts[1], "extension");
    (void)hoist::release_value(host, "ID");
    try {
      hoist::check_extension_release(host, extension, "fuzz", parts[2].empty() ? "x86-64" : parts[2], "fuzz");
    } catch (const hoist::Error& e) {
      if (e.code() != hoist::ExitCode::verification) {
        std::abort();
      }
    }
  } catch (const hoist::Error&) {
    // refused: fine
  }
  return 0;
}
