// libFuzzer target: base64_decode(), against a reference written here from RFC
// 4648 alone. Text is accepted exactly when, without spaces, tabs, CR and LF,
// it is whole 4-character groups of the standard alphabet with '=' only as one
// or two last characters; what is accepted decodes to the reference's bytes.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "hoist/sys/base64.hpp"

namespace {

void require(bool condition) {
  if (!condition) {
    std::abort();
  }
}

int sextet(char c) {
  if (c >= 'A' && c <= 'Z') {
    return c - 'A';
  }
  if (c >= 'a' && c <= 'z') {
    return c - 'a' + 26;
  }
  if (c >= '0' && c <= '9') {
    return c - '0' + 52;
  }
  if (c == '+') {
    return 62;
  }
  if (c == '/') {
    return 63;
  }
  return -1;
}

std::optional<std::string> reference_decode(std::string_view text) {
  std::string compact;
  for (const char c : text) {
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n') {
      compact += c;
    }
  }
  if (compact.size() % 4 != 0) {
    return std::nullopt;
  }
  std::string out;
  for (std::size_t group = 0; group < compact.size(); group += 4) {
    const bool last = group + 4 == compact.size();
    std::uint32_t bits = 0;
    int pads = 0;
    for (std::size_t i = 0; i < 4; ++i) {
      const char c = compact[group + i];
      if (c == '=' && last && i >= 2) {
        ++pads;
        bits <<= 6U;
        continue;
      }
      const int value = sextet(c);
      if (value < 0 || pads > 0) {
        return std::nullopt;
      }
      bits = (bits << 6U) | static_cast<std::uint32_t>(value);
    }
    out += static_cast<char>((bits >> 16U) & 0xffU);
    if (pads < 2) {
      out += static_cast<char>((bits >> 8U) & 0xffU);
    }
    if (pads < 1) {
      out += static_cast<char>(bits & 0xffU);
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  hoist::Expected<std::string> decoded = hoist::base64_decode(text, "fuzz");
  const std::optional<std::string> expected = reference_decode(text);
  require(decoded.has_value() == expected.has_value());
  if (expected) {
    require(*decoded == *expected);
  } else {
    require(decoded.error().message == "failed to decode fuzz: not valid base64");
  }
  return 0;
}
