#include "hoist/sys/tls_context.hpp"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "openssl_ptr.hpp"

namespace hoist {

namespace {

BioPtr memory_bio(const std::string& pem) {
  return BioPtr(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

SysError tls_error(std::string_view what, std::string_view source) {
  std::string message = "failed to ";
  message += what;
  message += " from ";
  message += source;
  message += ": ";
  message += openssl_error_text(OpenSslError::newest, "unknown");
  return SysError{std::move(message), 0};
}

// Adds every certificate of a PEM bundle (a ca.crt often holds several during a
// CA rotation); at least one must be there.
Expected<void> add_trusted(SSL_CTX* ctx, const std::string& pem, std::string_view source) {
  X509_STORE* store = SSL_CTX_get_cert_store(ctx);
  BioPtr bio = memory_bio(pem);
  int count = 0;
  while (X509Ptr cert{PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)}) {
    if (X509_STORE_add_cert(store, cert.get()) != 1) {
      return tls_error("add a CA certificate", source);
    }
    ++count;
  }
  // The loop ends on "no start line" at the end of the data: not an error.
  ERR_clear_error();
  if (count == 0) {
    return SysError{"failed to read a CA certificate from " + std::string(source) + ": no PEM certificate found", 0};
  }
  return {};
}

Expected<void> use_client_identity(SSL_CTX* ctx, const TlsSettings& settings, std::string_view source) {
  BioPtr cert_bio = memory_bio(settings.client_cert_pem);
  X509Ptr cert{PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr)};
  if (!cert || SSL_CTX_use_certificate(ctx, cert.get()) != 1) {
    return tls_error("load the client certificate", source);
  }
  // Intermediates of the client certificate, if the PEM has more than one.
  while (X509Ptr extra{PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr)}) {
    if (SSL_CTX_add1_chain_cert(ctx, extra.get()) != 1) {
      return tls_error("load the client certificate chain", source);
    }
  }
  ERR_clear_error();
  BioPtr key_bio = memory_bio(settings.client_key_pem);
  PkeyPtr key{PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr)};
  if (!key || SSL_CTX_use_PrivateKey(ctx, key.get()) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
    return tls_error("load the client key", source);
  }
  return {};
}

}  // namespace

void TlsContext::Free::operator()(ssl_ctx_st* ctx) const noexcept {
  SSL_CTX_free(ctx);
}

Expected<TlsContext> TlsContext::create(const TlsSettings& settings, std::string_view source) {
  std::unique_ptr<ssl_ctx_st, Free> ctx(SSL_CTX_new(TLS_client_method()));
  if (!ctx) {
    return tls_error("create a TLS context", source);
  }
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  // kube-apiserver may close a watch without close_notify; the HTTP framing
  // (chunked, Content-Length) is what detects a truncated body.
  SSL_CTX_set_options(ctx.get(), SSL_OP_IGNORE_UNEXPECTED_EOF);
  if (settings.ca_pem.empty()) {
    return SysError{"no CA certificate configured in " + std::string(source) +
                        ": hoist always verifies the API server's certificate",
                    0};
  }
  if (auto added = add_trusted(ctx.get(), settings.ca_pem, source); !added) {
    return added.error();
  }
  if (!settings.client_cert_pem.empty() || !settings.client_key_pem.empty()) {
    if (auto used = use_client_identity(ctx.get(), settings, source); !used) {
      return used.error();
    }
  }
  return TlsContext(std::move(ctx));
}

}  // namespace hoist
