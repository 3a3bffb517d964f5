#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "hoist/util/expected.hpp"

namespace hoist {

/// The status line and headers of an HTTP response; header names in lower case.
struct HttpResponseHead {
  int status = 0;
  std::string reason;
  std::map<std::string, std::string> headers;
};

/// The framing of HTTP/1.1 responses (RFC 9112), apart from the transport, so that
/// it can be tested and fuzzed on bytes alone. Strict where leniency lets a server
/// (or whatever sits in between) make the client read another body than it sent:
/// the status code is three digits from 100 to 599; a header name is a token with no space before
/// its colon; Content-Length is 1*DIGIT (at most 18 digits) and a chunk size
/// 1*HEXDIG (at most 15 digits), never a sign, a "0x" or a leading space as
/// std::stoull would take them; two Content-Length headers must be identical
/// (RFC 9110 8.6 lets a recipient take identical duplicates) and Content-Length
/// never comes with Transfer-Encoding; Transfer-Encoding is `chunked` alone.
/// Every refusal is a SysError with EPROTO, "malformed HTTP response from '<peer>':
/// <what>".
class HttpResponseReader {
 public:
  /// Appends the bytes that arrived to `in` and returns how many, 0 once the peer
  /// closed the connection; its errors are passed on as they are.
  using Fill = std::function<Expected<std::size_t>(std::string& in)>;

  /// `peer` names the server in errors ("host:port").
  explicit HttpResponseReader(std::string peer) : m_peer(std::move(peer)) {}

  /// Reads the status line and headers of the next response.
  Expected<HttpResponseHead> read_head(const Fill& fill);

  /// Reads the next part of the body, framing removed: at least one byte, or an
  /// empty string once the body is complete. A body cut short is ECONNRESET.
  Expected<std::string> read_some(const Fill& fill);

  /// Reads the rest of the body; refuses one larger than `max_bytes` (EFBIG).
  Expected<std::string> read_body(const Fill& fill, std::size_t max_bytes);

 private:
  enum class Framing { none, length, chunked, until_close };
  enum class ChunkState { size, data, data_end, trailers, done };

  Expected<std::string> read_chunked(const Fill& fill);
  Expected<void> read_chunk_size(const std::string& line);
  Expected<void> choose_framing(const HttpResponseHead& head, std::size_t content_lengths);
  [[nodiscard]] SysError protocol_error(const std::string& what) const;
  [[nodiscard]] SysError closed_early() const;

  std::string m_peer;
  std::string m_in;  // bytes received and not consumed yet
  Framing m_framing = Framing::none;
  std::uint64_t m_remaining = 0;  // of the body (length) or of the current chunk
  ChunkState m_chunk = ChunkState::size;
};

}  // namespace hoist
