#include <catch2/catch.hpp>
#include <string>

#include "hoist/util/text.hpp"

using hoist::escaped;
using hoist::has_control_character;

TEST_CASE("control characters are found wherever they stand, NUL and DEL included", "[text]") {
  CHECK_FALSE(has_control_character(""));
  CHECK_FALSE(has_control_character("/opt/app caf\xc3\xa9 ~"));
  CHECK(has_control_character(std::string("/etc\0/app", 9)));
  CHECK(has_control_character("/opt/app\n"));
  CHECK(has_control_character("\x1b[31m"));
  CHECK(has_control_character("a\x7f"));
  for (int byte = 0; byte < 256; ++byte) {
    const std::string one(1, static_cast<char>(byte));
    CHECK(has_control_character(one) == (byte < 0x20 || byte == 0x7f));
  }
}

TEST_CASE("escaped() writes control characters and the backslash as escapes, valid UTF-8 as it is", "[text]") {
  CHECK(escaped("plain/path") == "plain/path");
  CHECK(escaped(std::string("/etc\0/app", 9)) == "/etc\\x00/app");
  CHECK(escaped("a\nb\tc\rd") == "a\\nb\\tc\\rd");
  CHECK(escaped("\x1b[31mred\x7f") == "\\x1b[31mred\\x7f");
  CHECK(escaped("back\\slash") == "back\\\\slash");
  CHECK(escaped("caf\xc3\xa9") == "caf\xc3\xa9");
  CHECK(escaped("\xe6\x97\xa5\xf0\x9f\x98\x80") == "\xe6\x97\xa5\xf0\x9f\x98\x80");  // 日 and an emoji
  // Not UTF-8: Latin-1, a lone continuation byte, a cut sequence, overlong forms, a surrogate, past U+10FFFF.
  CHECK(escaped("caf\xe9") == "caf\\xe9");
  CHECK(escaped("\x80x") == "\\x80x");
  CHECK(escaped("\xe6\x97") == "\\xe6\\x97");
  CHECK(escaped("\xc0\xaf") == "\\xc0\\xaf");
  CHECK(escaped("\xe0\x80\xaf") == "\\xe0\\x80\\xaf");
  CHECK(escaped("\xed\xa0\x80") == "\\xed\\xa0\\x80");
  CHECK(escaped("\xf4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");
  // C1 controls, valid UTF-8 but CSI and the like to some terminals.
  CHECK(escaped("\xc2\x9b"
                "31m") ==
        "\\xc2\\x9b"
        "31m");
  CHECK(escaped("\xc2\xa0") == "\xc2\xa0");
  for (int byte = 0; byte < 256; ++byte) {
    const std::string alone = escaped(std::string(1, static_cast<char>(byte)));
    CHECK_FALSE(has_control_character(alone));
    CHECK((byte < 0x80 || alone == "\\x" + std::string(1, "0123456789abcdef"[byte >> 4]) +
                                       std::string(1, "0123456789abcdef"[byte & 15])));
  }
}

TEST_CASE("a hex digit's value in either case, and -1 for anything else", "[text]") {
  CHECK(hoist::hex_digit_value('0') == 0);
  CHECK(hoist::hex_digit_value('9') == 9);
  CHECK(hoist::hex_digit_value('a') == 10);
  CHECK(hoist::hex_digit_value('F') == 15);
  for (const char c : {'g', 'G', ' ', '-', '+', 'x', '\0', '/', ':', '@', '`'}) {
    CAPTURE(static_cast<int>(c));
    CHECK(hoist::hex_digit_value(c) == -1);
  }
}

TEST_CASE("joined() puts the separator between items only", "[text]") {
  CHECK(hoist::joined({}, ", ").empty());
  CHECK(hoist::joined({"k3s.service"}, ", ") == "k3s.service");
  CHECK(hoist::joined({"a", "", "c"}, "; ") == "a; ; c");
}
