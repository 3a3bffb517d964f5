#include <catch2/catch.hpp>
#include <cerrno>
#include <string>

#include "hoist/kube/http_response_reader.hpp"

using hoist::HttpResponseReader;

namespace {

// Hands out `bytes` `step` bytes a call, then 0 (the peer closed).
struct Source {
  std::string bytes;
  std::size_t step = 1;
  std::size_t at = 0;
  HttpResponseReader::Fill fill() {
    return [this](std::string& in) -> hoist::Expected<std::size_t> {
      const std::size_t n = std::min(step, bytes.size() - at);
      in.append(bytes, at, n);
      at += n;
      return n;
    };
  }
};

// The whole body of the one response in `bytes`, or the error message.
std::string body_or_error(const std::string& bytes, std::size_t step = 1) {
  Source source{bytes, step};
  HttpResponseReader reader("api:6443");
  const auto fill = source.fill();
  auto head = reader.read_head(fill);
  if (!head) {
    return "error: " + head.error().message;
  }
  auto body = reader.read_body(fill, 1U << 20U);
  return body ? *body : "error: " + body.error().message;
}

const std::string k_bad = "error: malformed HTTP response from 'api:6443': ";

}  // namespace

TEST_CASE("a response framed by Content-Length or chunks is read whatever the pieces it arrives in", "[http]") {
  for (const std::size_t step : {1U, 3U, 4096U}) {
    CHECK(body_or_error("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloEXTRA", step) == "hello");
    CHECK(body_or_error("HTTP/1.1 200 OK\r\nContent-Length: 005\r\n\r\nhello", step) == "hello");
    CHECK(body_or_error("HTTP/1.1 200 OK\r\ntransfer-encoding: Chunked\r\n\r\n"
                        "3;ext=1\r\nhel\r\n2 ; x\r\nlo\r\nA\r\n0123456789\r\n0\r\nTrailer: x\r\n\r\n",
                        step) == "hello0123456789");
    CHECK(body_or_error("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok", step) == "ok");
    CHECK(body_or_error("HTTP/1.0 204\r\n\r\n", step).empty());
    CHECK(body_or_error("HTTP/1.1 200 OK\r\n\r\nuntil close", step) == "until close");
  }
}

TEST_CASE("Content-Length is 1*DIGIT, bounded, given once or identically", "[http]") {
  const auto with = [](const std::string& headers) {
    return body_or_error("HTTP/1.1 200 OK\r\n" + headers + "\r\n\r\n{}");
  };
  CHECK(with("Content-Length: -1") == k_bad + "bad Content-Length '-1'");
  CHECK(with("Content-Length: +2") == k_bad + "bad Content-Length '+2'");
  CHECK(with("Content-Length: 0x2") == k_bad + "bad Content-Length '0x2'");
  CHECK(with("Content-Length: 2 2") == k_bad + "bad Content-Length '2 2'");
  CHECK(with("Content-Length: 2,2") == k_bad + "bad Content-Length '2,2'");
  CHECK(with("Content-Length:") == k_bad + "bad Content-Length ''");
  CHECK(with("Content-Length: 1000000000000000000") == k_bad + "Content-Length of more than 18 digits");
  CHECK(with("Content-Length: 2\r\nContent-Length: 3") == k_bad + "two different Content-Length headers");
  CHECK(with("Content-Length: 2\r\nTransfer-Encoding: chunked") == k_bad + "both Content-Length and Transfer-Encoding");
  CHECK(with("Transfer-Encoding: chunked\r\nContent-Length: 2") == k_bad + "both Content-Length and Transfer-Encoding");
  CHECK(with("Transfer-Encoding: gzip, chunked") == k_bad + "unsupported Transfer-Encoding 'gzip, chunked'");
  CHECK(with("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked") == k_bad + "two Transfer-Encoding headers");
  CHECK(with("Content-Length : 2") == k_bad + "bad header line");
  CHECK(with("Content-Length: 2\r\n folded") == k_bad + "bad header line");
  CHECK(with("X: a\x01"
             "b\r\nContent-Length: 2") == k_bad + "a control character in header 'x'");
}

TEST_CASE("a chunk size is 1*HEXDIG, bounded, with nothing before it", "[http]") {
  const auto chunk = [](const std::string& size) {
    return body_or_error("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + size + "\r\n{}\r\n0\r\n\r\n");
  };
  CHECK(chunk("2") == "{}");
  CHECK(chunk("0002") == "{}");
  CHECK(chunk("-1") == k_bad + "bad chunk size '-1'");
  CHECK(chunk("+2") == k_bad + "bad chunk size '+2'");
  CHECK(chunk("0x2") == k_bad + "bad chunk size '0x2'");
  CHECK(chunk(" 2") == k_bad + "bad chunk size ' 2'");
  CHECK(chunk("2x") == k_bad + "bad chunk size '2x'");
  CHECK(chunk("") == k_bad + "bad chunk size ''");
  CHECK(chunk("1000000000000000") == k_bad + "chunk size of more than 15 hex digits");
  CHECK(chunk("3") == k_bad + "chunk not followed by CRLF");
}

TEST_CASE("the status code is three digits after the version", "[http]") {
  CHECK(body_or_error("HTTP/1.1 +20 OK\r\nContent-Length: 0\r\n\r\n") == k_bad + "bad status line 'HTTP/1.1 +20 OK'");
  CHECK(body_or_error("HTTP/1.1  200 OK\r\nContent-Length: 0\r\n\r\n") == k_bad + "bad status line 'HTTP/1.1  200 OK'");
  CHECK(body_or_error("HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n") == k_bad + "bad status line 'HTTP/1.1 2000 OK'");
  CHECK(body_or_error("HTTP/1.1 002 OK\r\nContent-Length: 0\r\n\r\n") == k_bad + "status code 002 outside 100-599");
  CHECK(body_or_error("HTTP/1.1 600 X\r\nContent-Length: 0\r\n\r\n") == k_bad + "status code 600 outside 100-599");
  CHECK(body_or_error("HTTP/1.1 599\r\nContent-Length: 0\r\n\r\n").empty());
  CHECK(body_or_error("HTTP/2.0 200 OK\r\nContent-Length: 0\r\n\r\n") == k_bad + "bad status line 'HTTP/2.0 200 OK'");
  CHECK(body_or_error("HTTP/1.1 200 O\x1b[K\r\nContent-Length: 0\r\n\r\n") ==
        k_bad + "bad status line 'HTTP/1.1 200 O\\x1b[K'");
}

TEST_CASE("a body cut short is ECONNRESET, not a complete body", "[http]") {
  Source source{"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello"};
  HttpResponseReader reader("api:6443");
  const auto fill = source.fill();
  REQUIRE(reader.read_head(fill).has_value());
  const auto body = reader.read_body(fill, 100);
  REQUIRE_FALSE(body.has_value());
  CHECK(body.error().errnum == ECONNRESET);
}
