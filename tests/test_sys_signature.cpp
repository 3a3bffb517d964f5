// SignatureKey: the sys room's OpenSSL seam for detached signatures.

#include <catch2/catch.hpp>
#include <cerrno>
#include <string>

#include "hoist/sys/signature.hpp"
#include "hoist/util/file_io.hpp"
#include "scoped_temp_dir.hpp"
#include "transfer_fixture.hpp"

namespace {

using hoist::test::run;
using hoist::test::ScopedTempDir;

std::string read_text(const std::filesystem::path& path) {
  return hoist::read_file_at(AT_FDCWD, path.string(), path.string()).value();
}

}  // namespace

TEST_CASE("SignatureKey refuses what is no public key with EINVAL and another kind of key with ENOTSUP",
          "[signature]") {
  const auto none = hoist::SignatureKey::from_pem("hello", "k.pem");
  REQUIRE_FALSE(none);
  CHECK(none.error().errnum == EINVAL);
  CHECK(none.error().message ==
        "failed to read public key 'k.pem': no PEM 'PUBLIC KEY' block (write one with 'openssl pkey -in KEY -pubout')");
  const auto garbage =
      hoist::SignatureKey::from_pem("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n", "k.pem");
  REQUIRE_FALSE(garbage);
  CHECK(garbage.error().errnum == EINVAL);

  const ScopedTempDir tmp;
  const std::string rsa = (tmp / "rsa.pem").string();
  run("openssl genpkey -quiet -algorithm RSA -pkeyopt rsa_keygen_bits:1024 -out '" + rsa + "' && openssl pkey -in '" +
      rsa + "' -pubout -out '" + rsa + ".pub'");
  const auto other = hoist::SignatureKey::from_pem(read_text(rsa + ".pub"), "rsa.pub");
  REQUIRE_FALSE(other);
  CHECK(other.error().errnum == ENOTSUP);
  CHECK(other.error().message == "unsupported public key 'rsa.pub': RSA (supported: Ed25519, ECDSA P-256)");
}

TEST_CASE("SignatureKey::verifies tells a good Ed25519 signature from one over other bytes", "[signature]") {
  const ScopedTempDir tmp;
  const std::string key = (tmp / "ed.pem").string();
  const std::string data = (tmp / "data").string();
  run("printf 'signed bytes' > '" + data + "' && openssl genpkey -quiet -algorithm ed25519 -out '" + key +
      "' && openssl pkey -in '" + key + "' -pubout -out '" + key + ".pub' && openssl pkeyutl -sign -rawin -inkey '" +
      key + "' -in '" + data + "' -out '" + data + ".sig'");
  const hoist::SignatureKey public_key = hoist::SignatureKey::from_pem(read_text(key + ".pub"), "ed.pub").value();
  const std::string signature = read_text(data + ".sig");
  CHECK(public_key.verifies("signed bytes", signature).value());
  CHECK_FALSE(public_key.verifies("signed bytez", signature).value());
  CHECK_FALSE(public_key.verifies("signed bytes", "").value());
}
