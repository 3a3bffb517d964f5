#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "hoist/kube/http_response_reader.hpp"
#include "hoist/kube/tls_context.hpp"
#include "hoist/sys/wake_flag.hpp"
#include "hoist/util/expected.hpp"
#include "hoist/util/fd.hpp"

struct ssl_st;

namespace hoist {

using Deadline = std::chrono::steady_clock::time_point;

/// errnum of a SysError from HttpsConnection when the server's certificate was
/// refused (not an errno: the chain or the name did not verify).
inline constexpr int k_errnum_tls_verification = -1;

/// One HTTP/1.1 exchange over TLS, written for the Kubernetes API: a request, then
/// its response read as it arrives, so that a chunked watch stream is consumed
/// event by event. Every wait honours a deadline and an optional WakeFlag, and a
/// failure returns a SysError whose errnum is ETIMEDOUT (deadline), ECANCELED
/// (interrupted), EPROTO (malformed response), k_errnum_tls_verification, or the
/// errno of the failed call. Messages name the server as "host:port", never a
/// header: the caller's Authorization header does not appear in any error.
/// Not thread-safe; one connection belongs to one thread.
class HttpsConnection {
 public:
  /// Connects to `host` (an IPv4/IPv6 literal, or a DNS name resolved with
  /// getaddrinfo) and completes the TLS handshake, verifying the certificate
  /// chain and that it was issued for `host` (IP SAN for an address, DNS SAN for
  /// a name). Polls `interrupt` too when it is given.
  static Expected<HttpsConnection> open(const TlsContext& tls, const std::string& host, std::uint16_t port,
                                        Deadline deadline, const WakeFlag* interrupt = nullptr);

  HttpsConnection(HttpsConnection&&) noexcept;
  HttpsConnection& operator=(HttpsConnection&&) noexcept;
  ~HttpsConnection();

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
  [[nodiscard]] const std::string& peer() const noexcept { return m_peer; }

 private:
  struct SslFree {
    void operator()(ssl_st* ssl) const noexcept;
  };
  HttpsConnection(Fd socket, std::string peer, const WakeFlag* interrupt);
  Expected<void> handshake(const std::string& host, Deadline deadline);
  Expected<void> wait(short events, Deadline deadline);
  /// Appends the bytes that arrived to `in`; 0 means the peer closed the connection.
  Expected<std::size_t> fill(std::string& in, Deadline deadline);

  Fd m_socket;
  std::unique_ptr<ssl_st, SslFree> m_ssl;
  std::string m_peer;
  const WakeFlag* m_interrupt = nullptr;
  HttpResponseReader m_reader;  // the framing of the responses, on the bytes fill() reads
};

/// "host:port", with an IPv6 literal in brackets, as URLs and Host headers need it.
std::string host_port(const std::string& host, std::uint16_t port);

}  // namespace hoist
