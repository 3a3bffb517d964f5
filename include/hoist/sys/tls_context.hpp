#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "hoist/util/expected.hpp"

struct ssl_ctx_st;

namespace hoist {

/// The TLS settings of a client, in PEM, as a kubeconfig or a service account
/// gives them. There is deliberately no way to turn verification off.
struct TlsSettings {
  std::string ca_pem;           ///< the certificates the server's chain must end in (required)
  std::string client_cert_pem;  ///< optional client certificate (kubeconfig client-certificate-data)
  std::string client_key_pem;   ///< its private key
};

/// An OpenSSL SSL_CTX for a client that verifies the server's certificate chain
/// against exactly the configured CAs (never the system store: a cluster's CA is
/// its own), TLS 1.2 or newer. Shared by threads once built.
class TlsContext {
 public:
  /// Builds the context; `source` names where the PEM came from in errors
  /// (e.g. "'/var/run/secrets/kubernetes.io/serviceaccount/ca.crt'").
  static Expected<TlsContext> create(const TlsSettings& settings, std::string_view source);

  [[nodiscard]] ssl_ctx_st* get() const noexcept { return m_ctx.get(); }

 private:
  struct Free {
    void operator()(ssl_ctx_st* ctx) const noexcept;
  };
  explicit TlsContext(std::unique_ptr<ssl_ctx_st, Free> ctx) : m_ctx(std::move(ctx)) {}
  std::unique_ptr<ssl_ctx_st, Free> m_ctx;
};

}  // namespace hoist
