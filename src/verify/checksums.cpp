#include "hoist/verify/checksums.hpp"

#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <new>
#include <optional>
#include <utility>

#include "hoist/sys/base64.hpp"
#include "hoist/sys/openssl_ptr.hpp"
#include "hoist/sys/sha256.hpp"
#include "hoist/util/error.hpp"
#include "hoist/util/fd.hpp"
#include "hoist/util/file_io.hpp"
#include "hoist/util/text.hpp"

namespace hoist {

namespace {

constexpr std::size_t k_hex_length = 64;
constexpr std::size_t k_max_sums_size = 16U << 20U;
// A PEM public key is a few hundred bytes and a signature at most ~100 (or its base64);
// the limits only keep a wrong file (an image, a tarball) from being read whole.
constexpr std::size_t k_max_key_size = 64U << 10U;
constexpr std::size_t k_max_signature_size = 64U << 10U;

/// Reads a whole input file, a path in the container that the user named. Every
/// failure is bad input: UsageError naming the path.
std::string read_input_file(const std::filesystem::path& path, std::size_t max_bytes) {
  auto data = read_file_at(AT_FDCWD, path.string(), path.string(), max_bytes);
  if (!data) {
    throw UsageError(data.error().message);
  }
  return std::move(*data);
}

// ---- SHA256SUMS syntax ----

[[noreturn]] void throw_invalid(std::string_view source, std::size_t line_number, std::string_view what) {
  throw Error(ExitCode::verification, "invalid SHA256SUMS " + in_quotes(source) + " line " +
                                          std::to_string(line_number) + ": " + std::string(what));
}

bool is_hex_digit(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

std::string to_lower_hex(std::string_view hex) {
  std::string lower(hex);
  for (char& c : lower) {
    if (c >= 'A' && c <= 'F') {
      c = static_cast<char>(c - 'A' + 'a');
    }
  }
  return lower;
}

/// Why `name` is not a payload-relative path, or empty when it is one.
std::string name_problem(std::string_view name) {
  if (name.find('\0') != std::string_view::npos) {
    return "file name contains a NUL byte";
  }
  for (const char c : name) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return "file name contains a control character";
    }
  }
  if (name.front() == '/') {
    return "file name " + in_quotes(name) + " is not relative";
  }
  std::size_t start = 0;
  for (;;) {
    const std::size_t slash = name.find('/', start);
    const std::string_view component = name.substr(start, slash == std::string_view::npos ? slash : slash - start);
    if (component.empty()) {
      return "file name " + in_quotes(name) + " has an empty component";
    }
    // Payload entries are compared as strings, so './bin/k3s' would never match 'bin/k3s':
    // refusing it here gives the user the reason instead of a confusing "not listed".
    if (component == ".") {
      return "file name " + in_quotes(name) + " has a '.' component";
    }
    if (component == "..") {
      return "file name " + in_quotes(name) + " has a '..' component";
    }
    if (slash == std::string_view::npos) {
      return {};
    }
    start = slash + 1;
  }
}

// ---- OpenSSL ----

/// The reason of the oldest error in OpenSSL's queue (the root cause; later entries
/// are the callers that passed it up), and an empty queue afterwards.
std::string openssl_error_text() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) {
    return "unknown OpenSSL error";
  }
  if (const char* reason = ERR_reason_error_string(code); reason != nullptr) {
    return reason;
  }
  char buffer[256];
  ERR_error_string_n(code, buffer, sizeof buffer);
  return buffer;
}

const unsigned char* bytes(std::string_view text) {
  return reinterpret_cast<const unsigned char*>(text.data());
}

enum class KeyKind { ed25519, ecdsa_p256 };

struct PublicKey {
  PkeyPtr key;
  KeyKind kind;
};

/// Never asked for: a PUBLIC KEY block is not encrypted. Without it OpenSSL would
/// prompt on the terminal if a decoder ever wanted a passphrase.
int no_passphrase(char* /*buf*/, int /*size*/, int /*rwflag*/, void* /*userdata*/) {
  return -1;
}

PublicKey load_public_key(const std::filesystem::path& path) {
  const std::string name = path.string();
  const std::string pem = read_input_file(path, k_max_key_size);
  // PEM_read_bio_PUBKEY would also take the public half of a private key; a private
  // key has no business on a node, so insist on the block that 'openssl pkey -pubout' writes.
  if (pem.find("-----BEGIN PUBLIC KEY-----") == std::string::npos) {
    throw UsageError("failed to read public key " + in_quotes(name) +
                     ": no PEM 'PUBLIC KEY' block (write one with 'openssl pkey -in KEY -pubout')");
  }
  ERR_clear_error();
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) {
    throw std::bad_alloc();
  }
  PkeyPtr key(PEM_read_bio_PUBKEY(bio.get(), nullptr, no_passphrase, nullptr));
  if (!key) {
    // OpenSSL's decoders say little ("unsupported"), so lead with what was expected.
    throw UsageError("failed to read public key " + in_quotes(name) +
                     ": not a valid PEM public key (OpenSSL: " + openssl_error_text() + ")");
  }

  const char* k_supported = " (supported: Ed25519, ECDSA P-256)";
  const int id = EVP_PKEY_get_base_id(key.get());
  if (id == EVP_PKEY_ED25519) {
    return {std::move(key), KeyKind::ed25519};
  }
  if (id == EVP_PKEY_EC) {
    char group[80] = {};
    std::size_t length = 0;
    if (EVP_PKEY_get_group_name(key.get(), group, sizeof group, &length) != 1) {
      throw UsageError("unsupported public key " + in_quotes(name) + ": EC key without a named curve" + k_supported);
    }
    // OpenSSL names P-256 by its X9.62 name.
    if (std::string_view(group, length) == "prime256v1") {
      return {std::move(key), KeyKind::ecdsa_p256};
    }
    throw UsageError("unsupported public key " + in_quotes(name) + ": EC on curve " + std::string(group, length) +
                     k_supported);
  }
  const char* type = EVP_PKEY_get0_type_name(key.get());
  throw UsageError("unsupported public key " + in_quotes(name) + ": " + (type != nullptr ? type : "unknown type") +
                   k_supported);
}

void verify_signature_of(std::string_view data, const std::string& sums_name, const std::filesystem::path& signature,
                         const std::filesystem::path& public_key) {
  // The key first: an unusable key is a configuration error that a signature cannot fix.
  const PublicKey key = load_public_key(public_key);
  const std::string raw = read_input_file(signature, k_max_signature_size);
  // The file is read as base64 when it is nothing but base64 text (and not blank). A raw 64-byte
  // Ed25519 or ~71-byte DER signature is all base64 characters with negligible probability, so the
  // guess cannot hide a real raw signature.
  Expected<std::string> decoded = base64_decode(raw, in_quotes(signature.string()));
  const std::string sig = decoded && !decoded->empty() ? std::move(*decoded) : raw;

  MdCtxPtr ctx(EVP_MD_CTX_new());
  if (!ctx) {
    throw std::bad_alloc();
  }
  // Ed25519 signs the message itself (no pre-hash), which OpenSSL spells as a NULL digest.
  const EVP_MD* md = key.kind == KeyKind::ed25519 ? nullptr : EVP_sha256();
  if (EVP_DigestVerifyInit(ctx.get(), nullptr, md, nullptr, key.key.get()) != 1) {
    throw Failure("failed to set up signature verification with public key " + in_quotes(public_key.string()) + ": " +
                  openssl_error_text());
  }
  const int result = EVP_DigestVerify(ctx.get(), bytes(sig), sig.size(), bytes(data), data.size());
  // A bad signature leaves OpenSSL's reasons (often just "bad signature") in the queue;
  // the message below says all there is, and the queue must not leak into later calls.
  ERR_clear_error();
  if (result != 1) {
    throw Error(ExitCode::verification, "signature of " + in_quotes(sums_name) + " does not verify with public key " +
                                            in_quotes(public_key.string()));
  }
}

}  // namespace

// ---- Sha256Sums ----

Sha256Sums Sha256Sums::parse(std::string_view text, std::string_view source_name) {
  Sha256Sums sums;
  sums.m_source = source_name;
  std::map<std::string, std::size_t, std::less<>> first_line;
  std::size_t line_number = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    ++line_number;
    const std::size_t end = text.find('\n', pos);
    const std::string_view line = text.substr(pos, end == std::string_view::npos ? end : end - pos);
    pos = end == std::string_view::npos ? text.size() : end + 1;

    if (line.empty()) {
      throw_invalid(source_name, line_number, "empty line");
    }
    if (line.back() == '\r') {
      throw_invalid(source_name, line_number, "ends with a carriage return (CRLF line endings are not accepted)");
    }
    // sha256sum escapes names holding '\\' or a newline and marks the line with a
    // leading backslash; such names are no payload's, so say so rather than "hex".
    if (line.front() == '\\') {
      throw_invalid(source_name, line_number, "escaped file names (a line starting with '\\') are not supported");
    }
    std::size_t hex_digits = 0;
    while (hex_digits < line.size() && hex_digits <= k_hex_length && is_hex_digit(line[hex_digits])) {
      ++hex_digits;
    }
    if (hex_digits != k_hex_length) {
      throw_invalid(source_name, line_number, "expected 64 hex digits");
    }
    // The two characters after the hash: "  " (text mode) or " *" (binary mode), which
    // mean the same to sha256sum and to systemd-sysupdate.
    const std::string_view separator = "expected two spaces or ' *' between the hash and the file name";
    if (line.size() == k_hex_length) {
      throw_invalid(source_name, line_number, "missing file name");
    }
    if (line[k_hex_length] != ' ') {
      throw_invalid(source_name, line_number, separator);
    }
    if (line.size() == k_hex_length + 1) {
      throw_invalid(source_name, line_number, "missing file name");
    }
    if (line[k_hex_length + 1] != ' ' && line[k_hex_length + 1] != '*') {
      throw_invalid(source_name, line_number, separator);
    }
    const std::string_view name = line.substr(k_hex_length + 2);
    if (name.empty()) {
      throw_invalid(source_name, line_number, "missing file name");
    }
    if (const std::string problem = name_problem(name); !problem.empty()) {
      throw_invalid(source_name, line_number, problem);
    }
    if (const auto it = first_line.find(name); it != first_line.end()) {
      throw_invalid(source_name, line_number,
                    "duplicate file name " + in_quotes(name) + " (first on line " + std::to_string(it->second) + ")");
    }
    first_line.emplace(name, line_number);
    sums.m_entries.emplace(name, to_lower_hex(line.substr(0, k_hex_length)));
  }
  if (sums.m_entries.empty()) {
    // An empty list would verify an empty payload and nothing else; it is always a mistake.
    throw Error(ExitCode::verification, "invalid SHA256SUMS " + in_quotes(source_name) + ": no entries");
  }
  return sums;
}

Sha256Sums Sha256Sums::load(const std::filesystem::path& path) {
  return parse(read_input_file(path, k_max_sums_size), path.string());
}

std::optional<std::string> Sha256Sums::expected_for(std::string_view name) const {
  const auto it = m_entries.find(std::string(name));
  if (it == m_entries.end()) {
    return std::nullopt;
  }
  return it->second;
}

// ---- verification of payload files ----

namespace {

[[noreturn]] void throw_not_listed(const Sha256Sums& sums, std::string_view name) {
  throw Error(ExitCode::verification, in_quotes(name) + " is not listed in SHA256SUMS " + in_quotes(sums.source()));
}

void compare(std::string_view name, const std::string& expected, std::string_view actual_hex) {
  const std::string actual = to_lower_hex(actual_hex);
  if (actual != expected) {
    throw Error(ExitCode::verification,
                "checksum mismatch for " + in_quotes(name) + ": expected " + expected + ", got " + actual);
  }
}

}  // namespace

void verify_file(const Sha256Sums& sums, std::string_view name, const std::filesystem::path& file) {
  if (!sums.expected_for(name)) {
    throw_not_listed(sums, name);
  }
  verify_digest(sums, name, sha256_file(AT_FDCWD, file.string()).value());
}

void verify_digest(const Sha256Sums& sums, std::string_view name, std::string_view actual_hex) {
  const std::optional<std::string> expected = sums.expected_for(name);
  if (!expected) {
    throw_not_listed(sums, name);
  }
  compare(name, *expected, actual_hex);
}

bool Sha256Verifier::expect(std::string_view name) const {
  return m_sums.expected_for(name).has_value();
}

void Sha256Verifier::check(std::string_view name, std::string_view actual_hex) {
  const std::optional<std::string> expected = m_sums.expected_for(name);
  if (!expected) {
    throw_not_listed(m_sums, name);
  }
  compare(name, *expected, actual_hex);
  m_seen.emplace(name);
}

void Sha256Verifier::finish() const {
  const std::string* first_missing = nullptr;
  std::size_t missing = 0;
  for (const auto& [name, hex] : m_sums.entries()) {
    if (!m_seen.contains(name)) {
      if (first_missing == nullptr) {
        first_missing = &name;
      }
      ++missing;
    }
  }
  if (first_missing != nullptr) {
    std::string message = in_quotes(*first_missing) + " is listed in SHA256SUMS but not in the payload";
    if (missing > 1) {
      message += " (and " + std::to_string(missing - 1) + " more)";
    }
    throw Error(ExitCode::verification, message);
  }
}

// ---- signatures ----

void verify_signature(const std::filesystem::path& sums, const std::filesystem::path& signature,
                      const std::filesystem::path& public_key) {
  verify_signature_of(read_input_file(sums, k_max_sums_size), sums.string(), signature, public_key);
}

Sha256Sums load_verified(const std::filesystem::path& sums, const std::filesystem::path& signature,
                         const std::filesystem::path& public_key) {
  const std::string data = read_input_file(sums, k_max_sums_size);
  verify_signature_of(data, sums.string(), signature, public_key);
  return Sha256Sums::parse(data, sums.string());
}

}  // namespace hoist
