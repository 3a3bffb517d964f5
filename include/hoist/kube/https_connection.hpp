#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "hoist/kube/http_response_reader.hpp"
#include "hoist/sys/tls_stream.hpp"
#include "hoist/util/expected.hpp"

namespace hoist {

/// One HTTP/1.1 exchange over TLS (sys/tls_stream.hpp), written for the
/// Kubernetes API: a request, then its response read as it arrives, so that a
/// chunked watch stream is consumed event by event. Every wait honours a deadline
/// and an optional WakeFlag, and a failure returns a SysError whose errnum is
/// ETIMEDOUT (deadline), ECANCELED (interrupted), EPROTO (malformed response),
/// k_errnum_tls_verification, or the errno of the failed call. Messages name the
/// server as "host:port", never a header: the caller's Authorization header does
/// not appear in any error. Not thread-safe; one connection belongs to one thread.
class HttpsConnection {
 public:
  /// Connects and completes the TLS handshake (TlsStream::open).
  static Expected<HttpsConnection> open(const TlsContext& tls, const std::string& host, std::uint16_t port,
                                        Deadline deadline, const WakeFlag* interrupt = nullptr);

  /// Sends a whole request (request line, headers, blank line; no body).
  Expected<void> send(const std::string& request, Deadline deadline);

  /// Reads the status line and headers of the response.
  Expected<HttpResponseHead> read_head(Deadline deadline);

  /// Reads the next part of the body, chunked framing removed: at least one byte,
  /// or an empty string once the body is complete. A body cut short is EPROTO.
  Expected<std::string> read_some(Deadline deadline);

  /// Reads the rest of the body; refuses one larger than `max_bytes`.
  Expected<std::string> read_body(Deadline deadline, std::size_t max_bytes);

  /// "host:port" as errors name it (an IPv6 host in brackets).
  [[nodiscard]] const std::string& peer() const noexcept { return m_stream.peer(); }

 private:
  explicit HttpsConnection(TlsStream stream);

  TlsStream m_stream;
  HttpResponseReader m_reader;  // the framing of the responses, on the bytes the stream reads
};

}  // namespace hoist
