#include "hoist/util/text.hpp"

#include <algorithm>
#include <array>

namespace hoist {

namespace {

bool is_control(char c) {
  const auto byte = static_cast<unsigned char>(c);
  return byte < 0x20 || byte == 0x7f;
}

}  // namespace

bool has_control_character(std::string_view text) noexcept {
  return std::any_of(text.begin(), text.end(), is_control);
}

std::string escaped(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (is_control(c)) {
      constexpr std::array<char, 16> k_hex = {'0', '1', '2', '3', '4', '5', '6', '7',
                                              '8', '9', 'a', 'b', 'c', 'd', 'e', 'f'};
      out += "\\x";
      out += k_hex[byte >> 4U];
      out += k_hex[byte & 0xfU];
    } else {
      out += c;
    }
  }
  return out;
}

std::string in_quotes(std::string_view text) {
  return "'" + escaped(text) + "'";
}

}  // namespace hoist
