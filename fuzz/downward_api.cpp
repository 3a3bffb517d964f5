// libFuzzer target: the downward-API files (/run/system-upgrade/pod/{labels,annotations})
// that parse_downward_api() reads. The input is read twice. As a file: nothing
// but a value or a named line comes out, no value holds a NUL, and no message
// carries a control character (the source and the reason are escaped). As a
// value: quoted as the kubelet's Go %q would write it (here with \xHH for
// every byte that is not printable ASCII), it reads back byte for byte, or is
// refused as a NUL when it holds one.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "hoist/model/suc_context.hpp"
#include "hoist/util/text.hpp"

namespace {

void require(bool condition) {
  if (!condition) {
    std::abort();
  }
}

std::string go_quoted(std::string_view value) {
  std::string out = "\"";
  for (const char c : value) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte >= 0x20 && byte < 0x7f) {
      out += c;
    } else {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", byte);
      out += hex;
    }
  }
  return out + "\"";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);

  const std::string source = "/run/system-upgrade/pod/labels\n";
  const hoist::DownwardApi parsed = hoist::parse_downward_api(input, source);
  size_t lines = 0;
  for (size_t start = 0; start < input.size(); ++lines) {
    const size_t end = input.find('\n', start);
    start = end == std::string::npos ? input.size() : end + 1;
  }
  require(parsed.values.size() + parsed.unreadable.size() <= lines);
  for (const auto& [key, value] : parsed.values) {
    require(!key.empty() && key.find('\n') == std::string::npos);
    require(value.find('\0') == std::string::npos);
  }
  for (const std::string& message : parsed.unreadable) {
    require(!hoist::has_control_character(message));
  }

  const hoist::DownwardApi back = hoist::parse_downward_api("key=" + go_quoted(input) + "\n", "labels");
  if (input.find('\0') != std::string::npos) {
    require(back.values.empty() && back.unreadable.size() == 1);
  } else {
    require(back.unreadable.empty() && back.values.size() == 1 && back.values.at("key") == input);
  }
  return 0;
}
