#pragma once

#include <openssl/types.h>

#include <array>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hoist/util/expected.hpp"

namespace hoist {

/// A SHA-256 digest as its 32 bytes.
using Sha256Digest = std::array<std::byte, 32>;

/// The 64 lowercase hex digits of `digest`.
std::string to_hex(const Sha256Digest& digest);

/// The digest that 64 hex digits (either case) spell; nullopt for anything else.
std::optional<Sha256Digest> digest_from_hex(std::string_view hex);

/// Names with their SHA-256 digests, sorted by name: a verified SHA256SUMS as the transfer looks its payload's
/// files up in it. One array of (name, 32 bytes), not a tree of nodes holding hex strings: a payload of 100,000
/// files lists as many, and the lookups run while everything else of the staging is in memory too.
class DigestTable {
 public:
  struct Entry {
    std::string name;
    Sha256Digest digest;
  };

  DigestTable() = default;
  /// Takes `entries` sorted by name, each name once (Sha256Sums::parse() makes them so).
  explicit DigestTable(std::vector<Entry> entries) : m_entries(std::move(entries)) {}

  /// The digest listed for `name`, or nullptr.
  [[nodiscard]] const Sha256Digest* find(std::string_view name) const;
  /// The position of `name` in the table (begin() + index), or size() when it is not listed.
  [[nodiscard]] std::size_t index_of(std::string_view name) const;

  [[nodiscard]] std::size_t size() const noexcept { return m_entries.size(); }
  [[nodiscard]] bool empty() const noexcept { return m_entries.empty(); }
  [[nodiscard]] const Entry& operator[](std::size_t index) const { return m_entries[index]; }
  [[nodiscard]] std::vector<Entry>::const_iterator begin() const noexcept { return m_entries.begin(); }
  [[nodiscard]] std::vector<Entry>::const_iterator end() const noexcept { return m_entries.end(); }

 private:
  std::vector<Entry> m_entries;
};

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

/// The same as bytes, read as sha256_of_file() reads (a buffer and a context of the calling thread, not made for
/// each file). Errors name `display`, or `relpath` when it is empty.
Expected<Sha256Digest> sha256_of_file_at(int dirfd, const std::string& relpath, std::string_view display = {});

/// The SHA-256 (64 lowercase hex digits) of what `fd` yields from its current
/// offset to end of file, read 256 KiB at a time. `display` is the path named in
/// error messages ("fd <n>" when empty). Does not close `fd`.
Expected<std::string> sha256_fd(int fd, std::string_view display = {});

/// The SHA-256 of the whole file `fd`, read with pread(2) from offset 0 so that its
/// file offset stays where it is, through a buffer of the calling thread.
Expected<Sha256Digest> sha256_of_file(int fd, std::string_view display);

/// The SHA-256 of the first `size` bytes of `fd` (fewer where the file ends before), read as sha256_of_file()
/// reads. A payload file is hashed as far as its lstat said it ends, as DataCopier copies it: what is compared is
/// what would be copied, and the read that would only find the end of the file is not made.
Expected<Sha256Digest> sha256_of_file(int fd, uint64_t size, std::string_view display);

}  // namespace hoist
