// base64_decode(): the one base64 decoder, for kubeconfig `*-data` fields and signature files.

#include <catch2/catch.hpp>
#include <string>

#include "hoist/sys/base64.hpp"

namespace {

std::string decoded(std::string_view text) {
  return hoist::base64_decode(text, "the input").value();
}

bool refused(std::string_view text) {
  const auto result = hoist::base64_decode(text, "the input");
  if (result) {
    return false;
  }
  CHECK(result.error().message == "failed to decode the input: not valid base64");
  return true;
}

}  // namespace

TEST_CASE("base64_decode takes padded text wrapped with LF or CRLF, spaces and tabs", "[base64]") {
  CHECK(decoded("aG9pc3Qh") == "hoist!");
  CHECK(decoded("aG9pc3Q=") == "hoist");
  CHECK(decoded("aA==") == "h");
  CHECK(decoded("+/8=") == "\xfb\xff");
  // openssl base64 wraps at 64 columns; a signature file may end in a line break or come from Windows.
  CHECK(decoded("aG9p\nc3Q=\n") == "hoist");
  CHECK(decoded("aG9p\r\nc3Q=\r\n") == "hoist");
  CHECK(decoded(" \taG9p c3Qh\t \n") == "hoist!");
  // An empty kubeconfig field decodes to nothing (the PEM parser then says what is missing).
  CHECK(decoded("").empty());
  CHECK(decoded(" \n").empty());
}

TEST_CASE("base64_decode refuses other characters, a cut group and padding anywhere but the end", "[base64]") {
  CHECK(refused("a$=="));
  CHECK(refused("aG9p-c3Q"));  // the URL-safe alphabet is another encoding
  CHECK(refused("aG9p_c3Q"));
  CHECK(refused(std::string_view("aG9pc3Qh\0", 9)));
  CHECK(refused("aG9p\vc3Qh"));  // whitespace is space, tab, CR and LF only
  CHECK(refused("aG9p\fc3Qh"));
  CHECK(refused("aG9pc3Q"));  // not a whole number of 4-character groups
  CHECK(refused("aG9pc3Qh="));
  CHECK(refused("aA=a"));      // '=' only at the end
  CHECK(refused("aA==aA=="));  // two padded groups
  CHECK(refused("a==="));      // at most two '='
  CHECK(refused("===="));
}
