#include "hoist/sys/sha256.hpp"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <vector>

#include "hoist/util/fd.hpp"
#include "hoist/util/text.hpp"
#include "openssl_ptr.hpp"

namespace hoist {

namespace {

// Large enough that a multi-GiB payload costs few syscalls, small enough to stay off
// the stack's way and out of a container's memory limit.
constexpr std::size_t k_read_buffer_size = std::size_t{256} * 1024;

/// Throws Failure for an OpenSSL call that fails only when OpenSSL itself is broken.
[[noreturn]] void throw_openssl_failure(std::string_view what) {
  throw Failure("failed to " + std::string(what) + ": " +
                openssl_error_text(OpenSslError::oldest, "unknown OpenSSL error"));
}

void init_sha256(EVP_MD_CTX* ctx) {
  if (EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) != 1) {
    throw_openssl_failure("set up SHA-256");
  }
}

}  // namespace

void Sha256::CtxDeleter::operator()(EVP_MD_CTX* ctx) const noexcept {
  EVP_MD_CTX_free(ctx);
}

Sha256::Sha256() : m_ctx(EVP_MD_CTX_new()) {
  if (!m_ctx) {
    throw std::bad_alloc();
  }
  init_sha256(m_ctx.get());
}

void Sha256::update(std::span<const std::byte> data) {
  if (data.empty()) {
    return;
  }
  if (EVP_DigestUpdate(m_ctx.get(), data.data(), data.size()) != 1) {
    throw_openssl_failure("update SHA-256");
  }
}

void Sha256::update(std::string_view text) {
  update(std::as_bytes(std::span(text.data(), text.size())));
}

Sha256Digest Sha256::final_digest() {
  Sha256Digest digest{};
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(m_ctx.get(), reinterpret_cast<unsigned char*>(digest.data()), &length) != 1 ||
      length != digest.size()) {
    throw_openssl_failure("finish SHA-256");
  }
  // Re-initialise at once, so the object is never left in the finalised state where
  // another update() would be undefined.
  init_sha256(m_ctx.get());
  return digest;
}

std::string Sha256::final_hex() {
  return to_hex(final_digest());
}

std::string to_hex(const Sha256Digest& digest) {
  static constexpr char k_hex_digits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(std::size_t{2} * digest.size());
  for (const std::byte byte : digest) {
    const auto value = std::to_integer<unsigned>(byte);
    hex += k_hex_digits[value >> 4U];
    hex += k_hex_digits[value & 0x0fU];
  }
  return hex;
}

std::optional<Sha256Digest> digest_from_hex(std::string_view hex) {
  Sha256Digest digest{};
  if (hex.size() != 2 * digest.size()) {
    return std::nullopt;
  }
  for (std::size_t i = 0; i < digest.size(); ++i) {
    const int high = hex_digit_value(hex[2 * i]);
    const int low = hex_digit_value(hex[2 * i + 1]);
    if (high < 0 || low < 0) {
      return std::nullopt;
    }
    digest[i] = static_cast<std::byte>((high << 4) | low);
  }
  return digest;
}

namespace {

bool name_before(const DigestTable::Entry& entry, std::string_view name) {
  return entry.name < name;
}

}  // namespace

std::size_t DigestTable::index_of(std::string_view name) const {
  const auto it = std::lower_bound(m_entries.begin(), m_entries.end(), name, name_before);
  return it != m_entries.end() && it->name == name ? static_cast<std::size_t>(it - m_entries.begin())
                                                   : m_entries.size();
}

const Sha256Digest* DigestTable::find(std::string_view name) const {
  const std::size_t index = index_of(name);
  return index < m_entries.size() ? &m_entries[index].digest : nullptr;
}

Expected<std::string> sha256_fd(int fd, std::string_view display) {
  const std::string name = display.empty() ? "fd " + std::to_string(fd) : in_quotes(display);
  // On the heap: 256 KiB is too much for the stack of a thread that may be small. Not zeroed: what read() does
  // not fill is never looked at.
  const auto buffer = std::make_unique_for_overwrite<std::byte[]>(k_read_buffer_size);
  Sha256 sha;
  for (;;) {
    const ssize_t n = ::read(fd, buffer.get(), k_read_buffer_size);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return sys_error("read " + name);
    }
    if (n == 0) {
      break;
    }
    sha.update(std::span(buffer.get(), static_cast<std::size_t>(n)));
  }
  return sha.final_hex();
}

Expected<Sha256Digest> sha256_of_file(int fd, std::string_view display) {
  return sha256_of_file(fd, std::numeric_limits<uint64_t>::max(), display);
}

Expected<Sha256Digest> sha256_of_file(int fd, uint64_t size, std::string_view display) {
  // One buffer and one context a thread: a walk hashes 100,000 small files, and neither is worth making each time.
  thread_local std::unique_ptr<std::byte[]> buffer;
  thread_local std::optional<Sha256> sha;
  if (!buffer) {
    buffer = std::make_unique<std::byte[]>(k_read_buffer_size);
  }
  if (!sha) {
    sha.emplace();
  }
  uint64_t offset = 0;
  while (offset < size) {
    const auto want = static_cast<size_t>(std::min<uint64_t>(k_read_buffer_size, size - offset));
    const ssize_t n = ::pread(fd, buffer.get(), want, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      const int error = errno;
      (void)sha->final_digest();  // starts over for the next file
      return sys_error("read " + in_quotes(display), error);
    }
    if (n == 0) {
      break;
    }
    sha->update(std::span(buffer.get(), static_cast<std::size_t>(n)));
    offset += static_cast<uint64_t>(n);
  }
  return sha->final_digest();
}

Expected<Sha256Digest> sha256_of_file_at(int dirfd, const std::string& relpath, std::string_view display) {
  const std::string_view named = display.empty() ? std::string_view(relpath) : display;
  // O_NONBLOCK only so that opening a FIFO cannot hang; it changes nothing for the
  // regular file that fstat below insists on.
  Fd fd(::openat(dirfd, relpath.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK));
  if (!fd) {
    return sys_error("open " + in_quotes(named));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return sys_error("stat " + in_quotes(named));
  }
  if (!S_ISREG(st.st_mode)) {
    return SysError{"failed to hash " + in_quotes(named) + ": not a regular file", 0};
  }
  return sha256_of_file(fd.get(), named);
}

Expected<std::string> sha256_file(int dirfd, const std::string& relpath) {
  auto digest = sha256_of_file_at(dirfd, relpath);
  if (!digest) {
    return digest.error();
  }
  return to_hex(*digest);
}

}  // namespace hoist
