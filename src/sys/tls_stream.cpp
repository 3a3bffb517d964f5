#include "hoist/sys/tls_stream.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "openssl_ptr.hpp"

namespace hoist {

namespace {

constexpr std::size_t k_read_size = std::size_t{16} * 1024;

bool is_ip_literal(const std::string& host) {
  unsigned char buffer[sizeof(in6_addr)];
  return ::inet_pton(AF_INET, host.c_str(), buffer) == 1 || ::inet_pton(AF_INET6, host.c_str(), buffer) == 1;
}

struct AddrinfoFree {
  void operator()(addrinfo* list) const noexcept { ::freeaddrinfo(list); }
};

int remaining_ms(Deadline deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return static_cast<int>(std::clamp<long long>(left.count(), 0, 24LL * 3600 * 1000));
}

// Waits until `fd` is ready for `events`, the deadline passes, or `interrupt` is raised.
Expected<void> wait_fd(int fd, short events, Deadline deadline, const WakeFlag* interrupt, const std::string& peer) {
  for (;;) {
    pollfd entries[2] = {{fd, events, 0}, {interrupt ? interrupt->fd() : -1, POLLIN, 0}};
    const int ready = ::poll(entries, interrupt ? 2 : 1, remaining_ms(deadline));
    if (ready < 0 && errno == EINTR) {
      continue;
    }
    if (ready < 0) {
      return sys_error("poll the connection to '" + peer + "'");
    }
    if (interrupt && (entries[1].revents & POLLIN) != 0) {
      return SysError{"interrupted while talking to '" + peer + "'", ECANCELED};
    }
    if (ready == 0) {
      return SysError{"timed out talking to '" + peer + "'", ETIMEDOUT};
    }
    return {};
  }
}

// Connects a non-blocking socket to one address, honouring the deadline.
Expected<Fd> connect_one(const sockaddr* address, socklen_t length, Deadline deadline, const WakeFlag* interrupt,
                         const std::string& peer) {
  Fd fd(::socket(address->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) {
    return sys_error("create a socket for '" + peer + "'");
  }
  if (::connect(fd.get(), address, length) != 0) {
    if (errno != EINPROGRESS) {
      return sys_error("connect to '" + peer + "'");
    }
    if (auto ready = wait_fd(fd.get(), POLLOUT, deadline, interrupt, peer); !ready) {
      return ready.error();
    }
    int error = 0;
    socklen_t size = sizeof error;
    if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &size) != 0) {
      return sys_error("connect to '" + peer + "'");
    }
    if (error != 0) {
      return sys_error("connect to '" + peer + "'", error);
    }
  }
  const int one = 1;
  // Requests are small and written in one go; do not let Nagle hold them back.
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

Expected<Fd> connect_tcp(const std::string& host, std::uint16_t port, Deadline deadline, const WakeFlag* interrupt,
                         const std::string& peer) {
  // IP literals (all that in-cluster config gives) are parsed here: getaddrinfo
  // in a static glibc binary may need NSS modules that a scratch image lacks.
  sockaddr_in v4{};
  sockaddr_in6 v6{};
  if (::inet_pton(AF_INET, host.c_str(), &v4.sin_addr) == 1) {
    v4.sin_family = AF_INET;
    v4.sin_port = htons(port);
    return connect_one(reinterpret_cast<const sockaddr*>(&v4), sizeof v4, deadline, interrupt, peer);
  }
  if (::inet_pton(AF_INET6, host.c_str(), &v6.sin6_addr) == 1) {
    v6.sin6_family = AF_INET6;
    v6.sin6_port = htons(port);
    return connect_one(reinterpret_cast<const sockaddr*>(&v6), sizeof v6, deadline, interrupt, peer);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* raw = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &raw); rc != 0) {
    return SysError{"failed to resolve '" + host + "': " + ::gai_strerror(rc), rc == EAI_SYSTEM ? errno : EHOSTUNREACH};
  }
  std::unique_ptr<addrinfo, AddrinfoFree> list(raw);
  SysError last{"failed to resolve '" + host + "': no address", EHOSTUNREACH};
  for (const addrinfo* entry = list.get(); entry != nullptr; entry = entry->ai_next) {
    auto fd = connect_one(entry->ai_addr, entry->ai_addrlen, deadline, interrupt, peer);
    if (fd) {
      return fd;
    }
    last = fd.error();
    if (last.errnum == ETIMEDOUT || last.errnum == ECANCELED) {
      break;
    }
  }
  return last;
}

}  // namespace

std::string host_port(const std::string& host, std::uint16_t port) {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

void TlsStream::SslFree::operator()(ssl_st* ssl) const noexcept {
  SSL_free(ssl);
}

TlsStream::TlsStream(Fd socket, std::string peer, const WakeFlag* interrupt)
    : m_socket(std::move(socket)), m_peer(std::move(peer)), m_interrupt(interrupt) {}
TlsStream::TlsStream(TlsStream&&) noexcept = default;
TlsStream& TlsStream::operator=(TlsStream&&) noexcept = default;
// No close_notify: the connection is dropped either after a complete response
// or on an error, and a shutdown could block on a dead peer.
TlsStream::~TlsStream() = default;

Expected<TlsStream> TlsStream::open(const TlsContext& tls, const std::string& host, std::uint16_t port,
                                    Deadline deadline, const WakeFlag* interrupt) {
  const std::string peer = host_port(host, port);
  auto socket = connect_tcp(host, port, deadline, interrupt, peer);
  if (!socket) {
    return socket.error();
  }
  TlsStream connection(std::move(*socket), peer, interrupt);
  connection.m_ssl.reset(SSL_new(tls.get()));
  if (!connection.m_ssl) {
    return SysError{
        "failed to create a TLS session for '" + peer + "': " + openssl_error_text(OpenSslError::newest, "unknown"), 0};
  }
  if (auto done = connection.handshake(host, deadline); !done) {
    return done.error();
  }
  return connection;
}

Expected<void> TlsStream::handshake(const std::string& host, Deadline deadline) {
  SSL* ssl = m_ssl.get();
  SSL_set_fd(ssl, m_socket.get());
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  // The name check is what makes a CA-signed certificate of another server fail.
  // kube-apiserver's serving certificate carries the service IP as an IP SAN.
  X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  const bool ip = is_ip_literal(host);
  if ((ip ? X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str()) : X509_VERIFY_PARAM_set1_host(param, host.c_str(), 0)) !=
      1) {
    return SysError{
        "failed to set the expected TLS name '" + host + "': " + openssl_error_text(OpenSslError::newest, "unknown"),
        0};
  }
  if (!ip) {
    SSL_set_tlsext_host_name(ssl, host.c_str());  // SNI, for names only (RFC 6066)
  }
  for (;;) {
    ERR_clear_error();
    const int rc = SSL_connect(ssl);
    if (rc == 1) {
      return {};
    }
    const int error = SSL_get_error(ssl, rc);
    if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
      if (auto ready = wait(error == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline); !ready) {
        return SysError{"TLS handshake with '" + m_peer + "' failed: " + ready.error().message, ready.error().errnum};
      }
      continue;
    }
    if (const long verify = SSL_get_verify_result(ssl); verify != X509_V_OK) {
      ERR_clear_error();
      return SysError{"TLS handshake with '" + m_peer +
                          "' failed: the server's certificate is not trusted: " + X509_verify_cert_error_string(verify),
                      k_errnum_tls_verification};
    }
    const int saved = errno;
    // An empty error queue: the server closed the connection mid-handshake.
    const std::string reason = openssl_error_text(OpenSslError::newest, "connection closed by the server");
    if (error == SSL_ERROR_SYSCALL && saved != 0) {
      return SysError{"TLS handshake with '" + m_peer + "' failed: " + errno_text(saved), saved};
    }
    return SysError{"TLS handshake with '" + m_peer + "' failed: " + reason, EPROTO};
  }
}

Expected<void> TlsStream::wait(short events, Deadline deadline) {
  return wait_fd(m_socket.get(), events, deadline, m_interrupt, m_peer);
}

Expected<void> TlsStream::send(const std::string& bytes, Deadline deadline) {
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    ERR_clear_error();
    std::size_t written = 0;
    const int rc = SSL_write_ex(m_ssl.get(), bytes.data() + sent, bytes.size() - sent, &written);
    if (rc == 1) {
      sent += written;
      continue;
    }
    const int error = SSL_get_error(m_ssl.get(), rc);
    if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
      if (auto ready = wait(error == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline); !ready) {
        return ready.error();
      }
      continue;
    }
    const int saved = errno;
    return SysError{
        "failed to send a request to '" + m_peer + "': " +
            (error == SSL_ERROR_SYSCALL && saved != 0 ? errno_text(saved)
                                                      : openssl_error_text(OpenSslError::newest, "unknown")),
        saved != 0 ? saved : EPROTO};
  }
  return {};
}

Expected<std::size_t> TlsStream::fill(std::string& in, Deadline deadline) {
  char buffer[k_read_size];
  for (;;) {
    ERR_clear_error();
    std::size_t got = 0;
    const int rc = SSL_read_ex(m_ssl.get(), buffer, sizeof buffer, &got);
    if (rc == 1) {
      in.append(buffer, got);
      return got;
    }
    const int error = SSL_get_error(m_ssl.get(), rc);
    if (error == SSL_ERROR_ZERO_RETURN) {
      return std::size_t{0};
    }
    if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
      if (auto ready = wait(error == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline); !ready) {
        return ready.error();
      }
      continue;
    }
    const int saved = errno;
    if (error == SSL_ERROR_SYSCALL && saved == 0) {
      return std::size_t{0};  // EOF without close_notify
    }
    return SysError{
        "failed to read from '" + m_peer + "': " +
            (error == SSL_ERROR_SYSCALL ? errno_text(saved) : openssl_error_text(OpenSslError::newest, "unknown")),
        error == SSL_ERROR_SYSCALL ? saved : EPROTO};
  }
}

}  // namespace hoist
