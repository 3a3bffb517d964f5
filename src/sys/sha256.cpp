#include "hoist/sys/sha256.hpp"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <new>
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

std::string Sha256::final_hex() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(m_ctx.get(), digest, &length) != 1) {
    throw_openssl_failure("finish SHA-256");
  }
  // Re-initialise at once, so the object is never left in the finalised state where
  // another update() would be undefined.
  init_sha256(m_ctx.get());

  static constexpr char k_hex_digits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(std::size_t{2} * length);
  for (unsigned int i = 0; i < length; ++i) {
    hex += k_hex_digits[digest[i] >> 4U];
    hex += k_hex_digits[digest[i] & 0x0fU];
  }
  return hex;
}

Expected<std::string> sha256_fd(int fd, std::string_view display) {
  const std::string name = display.empty() ? "fd " + std::to_string(fd) : in_quotes(display);
  // On the heap: 256 KiB is too much for the stack of a thread that may be small.
  std::vector<std::byte> buffer(k_read_buffer_size);
  Sha256 sha;
  for (;;) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return sys_error("read " + name);
    }
    if (n == 0) {
      break;
    }
    sha.update(std::span(buffer.data(), static_cast<std::size_t>(n)));
  }
  return sha.final_hex();
}

Expected<std::string> sha256_file(int dirfd, const std::string& relpath) {
  // O_NONBLOCK only so that opening a FIFO cannot hang; it changes nothing for the
  // regular file that fstat below insists on.
  Fd fd(::openat(dirfd, relpath.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK));
  if (!fd) {
    return sys_error("open " + in_quotes(relpath));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return sys_error("stat " + in_quotes(relpath));
  }
  if (!S_ISREG(st.st_mode)) {
    return SysError{"failed to hash " + in_quotes(relpath) + ": not a regular file", 0};
  }
  return sha256_fd(fd.get(), relpath);
}

}  // namespace hoist
