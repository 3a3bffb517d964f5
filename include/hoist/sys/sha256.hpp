#pragma once

#include <openssl/types.h>

#include <array>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "hoist/util/expected.hpp"

namespace hoist {

/// A SHA-256 digest as its 32 bytes.
using Sha256Digest = std::array<std::byte, 32>;

/// The 64 lowercase hex digits of `digest`.
std::string to_hex(const Sha256Digest& digest);

/// The digest that 64 hex digits (either case) spell; nullopt for anything else.
std::optional<Sha256Digest> digest_from_hex(std::string_view hex);

/// A streaming SHA-256 over OpenSSL's EVP interface. Owns its EVP_MD_CTX.
/// Feed it with update() as data arrives, then take the digest with final_hex().
/// Move-only; a moved-from object may only be destroyed or assigned to.
class Sha256 {
 public:
  /// Starts an empty digest. Throws hoist::Failure only when OpenSSL cannot set up
  /// SHA-256 at all (out of memory, no provider offers it), which no input can cause.
  Sha256();
  Sha256(Sha256&&) noexcept = default;
  Sha256& operator=(Sha256&&) noexcept = default;
  ~Sha256() = default;

  /// Adds `data` to the digest.
  void update(std::span<const std::byte> data);
  /// Adds the bytes of `text` to the digest.
  void update(std::string_view text);

  /// Finishes the digest and returns it as 64 lowercase hex digits. The object then
  /// starts over, empty, so it can hash the next input.
  [[nodiscard]] std::string final_hex();
  /// The same as 32 bytes.
  [[nodiscard]] Sha256Digest final_digest();

 private:
  struct CtxDeleter {
    void operator()(EVP_MD_CTX* ctx) const noexcept;
  };
  std::unique_ptr<EVP_MD_CTX, CtxDeleter> m_ctx;
};

/// The SHA-256 (64 lowercase hex digits) of the regular file `relpath` relative to
/// `dirfd` (AT_FDCWD, or absolute `relpath`, works too). The last component is not
/// followed if it is a symbolic link, and anything but a regular file is refused:
/// a FIFO or a device in a payload would block or never end. Errors name `relpath`.
Expected<std::string> sha256_file(int dirfd, const std::string& relpath);

/// The SHA-256 (64 lowercase hex digits) of what `fd` yields from its current
/// offset to end of file, read 256 KiB at a time. `display` is the path named in
/// error messages ("fd <n>" when empty). Does not close `fd`.
Expected<std::string> sha256_fd(int fd, std::string_view display = {});

/// The SHA-256 of the whole file `fd`, read with pread(2) from offset 0 so that its
/// file offset stays where it is, through a buffer of the calling thread.
Expected<Sha256Digest> sha256_of_file(int fd, std::string_view display);

}  // namespace hoist
