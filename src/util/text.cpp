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

namespace {

/// The length of the valid UTF-8 sequence at the start of `text` (its first byte at least 0x80), or 0.
size_t utf8_sequence(std::string_view text) {
  const auto at = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = at(0);
  size_t size = 0;
  unsigned char low = 0x80;
  unsigned char high = 0xbf;
  if (lead >= 0xc2 && lead <= 0xdf) {
    size = 2;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    size = 3;
    low = lead == 0xe0 ? 0xa0 : 0x80;   // no overlong form
    high = lead == 0xed ? 0x9f : 0xbf;  // no surrogate
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    size = 4;
    low = lead == 0xf0 ? 0x90 : 0x80;
    high = lead == 0xf4 ? 0x8f : 0xbf;  // nothing past U+10FFFF
  } else {
    return 0;
  }
  if (text.size() < size || at(1) < low || at(1) > high) {
    return 0;
  }
  for (size_t i = 2; i < size; ++i) {
    if (at(i) < 0x80 || at(i) > 0xbf) {
      return 0;
    }
  }
  return size;
}

void append_hex(std::string& out, unsigned char byte) {
  constexpr std::array<char, 16> k_hex = {'0', '1', '2', '3', '4', '5', '6', '7',
                                          '8', '9', 'a', 'b', 'c', 'd', 'e', 'f'};
  out += "\\x";
  out += k_hex[byte >> 4U];
  out += k_hex[byte & 0xfU];
}

}  // namespace

std::string escaped(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x80) {
      // Valid UTF-8 stays as it is but for the C1 controls (U+0080 to U+009F: 0x9b is CSI to some terminals);
      // a byte that is not part of valid UTF-8 is escaped, so that a log line is always valid UTF-8.
      const size_t size = utf8_sequence(text.substr(i));
      if (size == 0 || (size == 2 && byte == 0xc2 && static_cast<unsigned char>(text[i + 1]) <= 0x9f)) {
        append_hex(out, byte);
        ++i;
        continue;
      }
      out.append(text.substr(i, size));
      i += size;
      continue;
    }
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (is_control(c)) {
      append_hex(out, byte);
    } else {
      out += c;
    }
    ++i;
  }
  return out;
}

std::string in_quotes(std::string_view text) {
  return "'" + escaped(text) + "'";
}

std::string joined(const std::vector<std::string>& items, std::string_view separator) {
  std::string text;
  for (const auto& item : items) {
    if (!text.empty()) {
      text += separator;
    }
    text += item;
  }
  return text;
}

}  // namespace hoist
