#include "hoist/sys/signature.hpp"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <cerrno>
#include <new>
#include <utility>

#include "hoist/util/text.hpp"
#include "openssl_ptr.hpp"

namespace hoist {

namespace {

const unsigned char* bytes(std::string_view text) {
  return reinterpret_cast<const unsigned char*>(text.data());
}

/// Never asked for: a PUBLIC KEY block is not encrypted. Without it OpenSSL would
/// prompt on the terminal if a decoder ever wanted a passphrase.
int no_passphrase(char* /*buf*/, int /*size*/, int /*rwflag*/, void* /*userdata*/) {
  return -1;
}

}  // namespace

void SignatureKey::Free::operator()(evp_pkey_st* key) const noexcept {
  EVP_PKEY_free(key);
}

SignatureKey::~SignatureKey() = default;

Expected<SignatureKey> SignatureKey::from_pem(std::string_view pem, std::string_view display) {
  const std::string name(display);
  // PEM_read_bio_PUBKEY would also take the public half of a private key; a private
  // key has no business on a node, so insist on the block that 'openssl pkey -pubout' writes.
  if (pem.find("-----BEGIN PUBLIC KEY-----") == std::string_view::npos) {
    return SysError{"failed to read public key " + in_quotes(name) +
                        ": no PEM 'PUBLIC KEY' block (write one with 'openssl pkey -in KEY -pubout')",
                    EINVAL};
  }
  ERR_clear_error();
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) {
    throw std::bad_alloc();
  }
  std::unique_ptr<evp_pkey_st, Free> key(PEM_read_bio_PUBKEY(bio.get(), nullptr, no_passphrase, nullptr));
  if (!key) {
    // OpenSSL's decoders say little ("unsupported"), so lead with what was expected.
    return SysError{"failed to read public key " + in_quotes(name) + ": not a valid PEM public key (OpenSSL: " +
                        openssl_error_text(OpenSslError::oldest, "unknown OpenSSL error") + ")",
                    EINVAL};
  }

  const char* k_supported = " (supported: Ed25519, ECDSA P-256)";
  const int id = EVP_PKEY_get_base_id(key.get());
  if (id == EVP_PKEY_ED25519) {
    return SignatureKey(std::move(key), Kind::ed25519, name);
  }
  if (id == EVP_PKEY_EC) {
    char group[80] = {};
    std::size_t length = 0;
    if (EVP_PKEY_get_group_name(key.get(), group, sizeof group, &length) != 1) {
      return SysError{"unsupported public key " + in_quotes(name) + ": EC key without a named curve" + k_supported,
                      ENOTSUP};
    }
    // OpenSSL names P-256 by its X9.62 name.
    if (std::string_view(group, length) == "prime256v1") {
      return SignatureKey(std::move(key), Kind::ecdsa_p256, name);
    }
    return SysError{
        "unsupported public key " + in_quotes(name) + ": EC on curve " + std::string(group, length) + k_supported,
        ENOTSUP};
  }
  const char* type = EVP_PKEY_get0_type_name(key.get());
  return SysError{
      "unsupported public key " + in_quotes(name) + ": " + (type != nullptr ? type : "unknown type") + k_supported,
      ENOTSUP};
}

Expected<bool> SignatureKey::verifies(std::string_view data, std::string_view signature) const {
  MdCtxPtr ctx(EVP_MD_CTX_new());
  if (!ctx) {
    throw std::bad_alloc();
  }
  // Ed25519 signs the message itself (no pre-hash), which OpenSSL spells as a NULL digest.
  const EVP_MD* md = m_kind == Kind::ed25519 ? nullptr : EVP_sha256();
  if (EVP_DigestVerifyInit(ctx.get(), nullptr, md, nullptr, m_key.get()) != 1) {
    return SysError{"failed to set up signature verification with public key " + in_quotes(m_display) + ": " +
                        openssl_error_text(OpenSslError::oldest, "unknown OpenSSL error"),
                    EINVAL};
  }
  const int result = EVP_DigestVerify(ctx.get(), bytes(signature), signature.size(), bytes(data), data.size());
  // A bad signature leaves OpenSSL's reasons (often just "bad signature") in the queue;
  // the caller's message says all there is, and the queue must not leak into later calls.
  ERR_clear_error();
  return result == 1;
}

}  // namespace hoist
