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

TEST_CASE("escaped() writes control characters and the backslash as escapes, other bytes as they are", "[text]") {
  CHECK(escaped("plain/path") == "plain/path");
  CHECK(escaped(std::string("/etc\0/app", 9)) == "/etc\\x00/app");
  CHECK(escaped("a\nb\tc\rd") == "a\\nb\\tc\\rd");
  CHECK(escaped("\x1b[31mred\x7f") == "\\x1b[31mred\\x7f");
  CHECK(escaped("back\\slash") == "back\\\\slash");
  CHECK(escaped("caf\xc3\xa9") == "caf\xc3\xa9");
  for (int byte = 0; byte < 256; ++byte) {
    CHECK_FALSE(has_control_character(escaped(std::string(1, static_cast<char>(byte)))));
  }
}
