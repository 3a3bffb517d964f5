#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "hoist/util/expected.hpp"

struct evp_pkey_st;

namespace hoist {

/// A public key that checks detached signatures (OpenSSL), of one of two kinds:
///  - Ed25519 (pure, one-shot: the signature is over the message itself), as
///    `openssl pkeyutl -sign -rawin -inkey ed.pem -in FILE -out FILE.sig` writes it;
///  - ECDSA P-256 over SHA-256, DER-encoded, as
///    `openssl dgst -sha256 -sign ec.pem -out FILE.sig FILE` writes it.
class SignatureKey {
 public:
  /// Parses `pem`, the text of the key file `display`: a PEM 'PUBLIC KEY' block
  /// (SubjectPublicKeyInfo, what `openssl pkey -pubout` writes), never the public
  /// half of a private key. Fails with EINVAL when there is no such block or it
  /// does not parse (with OpenSSL's reason), ENOTSUP for a key of another kind
  /// (RSA, another curve); the message names `display` and says which kinds are
  /// supported.
  static Expected<SignatureKey> from_pem(std::string_view pem, std::string_view display);

  SignatureKey(SignatureKey&&) noexcept = default;
  SignatureKey& operator=(SignatureKey&&) noexcept = default;
  ~SignatureKey();

  /// Whether `signature` is this key's signature of `data`. Fails, naming the
  /// key, only when OpenSSL cannot set up the check. Leaves OpenSSL's error
  /// queue empty.
  [[nodiscard]] Expected<bool> verifies(std::string_view data, std::string_view signature) const;

 private:
  enum class Kind { ed25519, ecdsa_p256 };
  struct Free {
    void operator()(evp_pkey_st* key) const noexcept;
  };
  SignatureKey(std::unique_ptr<evp_pkey_st, Free> key, Kind kind, std::string display)
      : m_key(std::move(key)), m_kind(kind), m_display(std::move(display)) {}

  std::unique_ptr<evp_pkey_st, Free> m_key;
  Kind m_kind;
  std::string m_display;
};

}  // namespace hoist
