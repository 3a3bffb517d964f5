// libFuzzer target: an HTTP/1.1 response as the API server (or anything between)
// might send it, arriving in pieces whose size the input chooses, read as
// HttpsConnection reads it: the status line and headers, then the body with its
// framing (Content-Length, chunked, or until close) removed. Any input is read or
// refused with a SysError; nothing may crash, and a body is never longer than the
// bytes that came in nor than the limit.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "hoist/kube/http_response_reader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) {
    return 0;
  }
  // The first byte sets the piece size (1-256 bytes), as TLS records would cut the stream.
  const std::size_t piece = std::size_t{data[0]} + 1;
  const std::string_view stream(reinterpret_cast<const char*>(data + 1), size - 1);
  std::size_t at = 0;
  const hoist::HttpResponseReader::Fill fill = [&](std::string& in) -> hoist::Expected<std::size_t> {
    const std::size_t n = std::min(piece, stream.size() - at);
    in.append(stream.substr(at, n));
    at += n;
    return n;
  };
  hoist::HttpResponseReader reader("fuzz.invalid:6443");
  // Two responses in a row, as a kept-alive connection would carry them.
  for (int response = 0; response < 2; ++response) {
    auto head = reader.read_head(fill);
    if (!head) {
      return 0;
    }
    if (head->status < 100 || head->status > 599) {
      std::abort();  // RFC 9110's range, always
    }
    constexpr std::size_t k_limit = 1U << 16U;
    auto body = reader.read_body(fill, k_limit);
    if (!body) {
      return 0;
    }
    if (body->size() > stream.size() || body->size() > k_limit) {
      std::abort();
    }
  }
  return 0;
}
