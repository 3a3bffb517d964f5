#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "hoist/sys/tls_context.hpp"
#include "hoist/sys/wake_flag.hpp"
#include "hoist/util/expected.hpp"
#include "hoist/util/fd.hpp"

struct ssl_st;

namespace hoist {

using Deadline = std::chrono::steady_clock::time_point;

/// errnum of a SysError from TlsStream when the server's certificate was
/// refused (not an errno: the chain or the name did not verify).
inline constexpr int k_errnum_tls_verification = -1;

/// A client's TLS connection over TCP, the OpenSSL side of the Kubernetes
/// client's HTTPS (kube/https_connection.hpp frames HTTP on it). Every wait
/// honours a deadline and an optional WakeFlag, and a failure returns a SysError
/// whose errnum is ETIMEDOUT (deadline), ECANCELED (interrupted), EPROTO (a TLS
/// failure that is not a system call's), k_errnum_tls_verification, or the errno
/// of the failed call. Messages name the server as "host:port". Not thread-safe.
class TlsStream {
 public:
  /// Connects to `host` (an IPv4/IPv6 literal, or a DNS name resolved with
  /// getaddrinfo) and completes the TLS handshake, verifying the certificate
  /// chain and that it was issued for `host` (IP SAN for an address, DNS SAN for
  /// a name). Polls `interrupt` too when it is given.
  static Expected<TlsStream> open(const TlsContext& tls, const std::string& host, std::uint16_t port, Deadline deadline,
                                  const WakeFlag* interrupt = nullptr);

  TlsStream(TlsStream&&) noexcept;
  TlsStream& operator=(TlsStream&&) noexcept;
  ~TlsStream();

  /// Writes all of `bytes`.
  Expected<void> send(const std::string& bytes, Deadline deadline);

  /// Appends the bytes that arrived to `in`; 0 means the peer closed the connection.
  Expected<std::size_t> fill(std::string& in, Deadline deadline);

  /// "host:port" as errors name it (an IPv6 host in brackets).
  [[nodiscard]] const std::string& peer() const noexcept { return m_peer; }

 private:
  struct SslFree {
    void operator()(ssl_st* ssl) const noexcept;
  };
  TlsStream(Fd socket, std::string peer, const WakeFlag* interrupt);
  Expected<void> handshake(const std::string& host, Deadline deadline);
  Expected<void> wait(short events, Deadline deadline);

  Fd m_socket;
  std::unique_ptr<ssl_st, SslFree> m_ssl;
  std::string m_peer;
  const WakeFlag* m_interrupt = nullptr;
};

/// "host:port", with an IPv6 literal in brackets, as URLs and Host headers need it.
std::string host_port(const std::string& host, std::uint16_t port);

}  // namespace hoist
