#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hoist {

/// Whether `text` holds a control character (U+0000 to U+001F, or U+007F).
/// A NUL is one: a C string would end there, so a path that holds one names
/// another file once it reaches a system call.
[[nodiscard]] bool has_control_character(std::string_view text) noexcept;

/// The value of one hex digit (`0-9`, `a-f`, `A-F`), -1 for any other character.
[[nodiscard]] constexpr int hex_digit_value(char c) noexcept {
  if (c >= '0' && c <= '9') {
    return c - '0';
  }
  if (c >= 'a' && c <= 'f') {
    return c - 'a' + 10;
  }
  if (c >= 'A' && c <= 'F') {
    return c - 'A' + 10;
  }
  return -1;
}

/// `text` with the backslash and control characters escaped (`\\`, `\n`, `\t`,
/// `\r`, `\x1b`), C1 controls (U+0080 to U+009F) and every byte that is not
/// part of valid UTF-8 too (`\xe9`), for messages that quote untrusted text: a
/// hostile name can then neither forge a log line nor hide a NUL, and the
/// message is valid UTF-8. Valid UTF-8 (`café`) stays as it is.
[[nodiscard]] std::string escaped(std::string_view text);

/// `text` escaped (escaped()) and in single quotes: how a message quotes a path,
/// an entry name or any other text that a payload or the host may have chosen.
[[nodiscard]] std::string in_quotes(std::string_view text);

/// `items` one after the other with `separator` between them: how a message lists units, checks, components.
[[nodiscard]] std::string joined(const std::vector<std::string>& items, std::string_view separator);

}  // namespace hoist
