#include "hoist/verify/sums_signature.hpp"

#include <cstddef>
#include <string>
#include <utility>

#include "hoist/model/input_file.hpp"
#include "hoist/sys/base64.hpp"
#include "hoist/sys/signature.hpp"
#include "hoist/util/error.hpp"
#include "hoist/util/text.hpp"

namespace hoist {

namespace {

// A PEM public key is a few hundred bytes and a signature at most ~100 (or its base64);
// the limits only keep a wrong file (an image, a tarball) from being read whole.
constexpr std::size_t k_max_key_size = 64U << 10U;
constexpr std::size_t k_max_signature_size = 64U << 10U;

void verify_signature_of(std::string_view data, const std::string& sums_name, const std::filesystem::path& signature,
                         const std::filesystem::path& public_key) {
  // The key first: an unusable key is a configuration error that a signature cannot fix.
  Expected<SignatureKey> key = SignatureKey::from_pem(read_input_file(public_key, k_max_key_size), public_key.string());
  if (!key) {
    throw UsageError(key.error().message);
  }
  const std::string raw = read_input_file(signature, k_max_signature_size);
  // The file is read as base64 when it is nothing but base64 text (and not blank). A raw 64-byte
  // Ed25519 or ~71-byte DER signature is all base64 characters with negligible probability, so the
  // guess cannot hide a real raw signature.
  Expected<std::string> decoded = base64_decode(raw, in_quotes(signature.string()));
  const std::string sig = decoded && !decoded->empty() ? std::move(*decoded) : raw;
  if (!key->verifies(data, sig).value()) {
    throw Error(ExitCode::verification, "signature of " + in_quotes(sums_name) + " does not verify with public key " +
                                            in_quotes(public_key.string()));
  }
}

}  // namespace

void verify_signature(const std::filesystem::path& sums, const std::filesystem::path& signature,
                      const std::filesystem::path& public_key) {
  verify_signature_of(read_input_file(sums, k_max_sums_size), sums.string(), signature, public_key);
}

Sha256Sums load_verified(const std::filesystem::path& sums, const std::filesystem::path& signature,
                         const std::filesystem::path& public_key) {
  const std::string data = read_input_file(sums, k_max_sums_size);
  verify_signature_of(data, sums.string(), signature, public_key);
  return Sha256Sums::parse(data, sums.string(), quoting_for(sums));
}

}  // namespace hoist
