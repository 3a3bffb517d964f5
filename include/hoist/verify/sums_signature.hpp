#pragma once

// The signature check of a SHA256SUMS file: a detached signature by a public key.

#include <filesystem>

#include "hoist/verify/checksums.hpp"

namespace hoist {

/// Verifies the detached signature `signature` over the bytes of the file `sums`.
///
/// `public_key` is a PEM public key of a kind SignatureKey checks (include/hoist/sys/signature.hpp
/// says which kinds, and the commands that make their keys and signatures).
/// The signature file holds the raw signature or its base64 (line-wrapped or not): it is
/// read as base64 only when it is nothing but base64 text.
///
/// Throws UsageError for an unreadable file, a file that is not a PEM public key, or a
/// key of another type (RSA, another curve); Error(ExitCode::verification) with
/// `signature of '<sums>' does not verify with public key '<key>'` when it does not verify.
void verify_signature(const std::filesystem::path& sums, const std::filesystem::path& signature,
                      const std::filesystem::path& public_key);

/// verify_signature() and Sha256Sums::load() over one read of `sums`, so that the bytes
/// parsed are exactly the bytes verified, even if the file changes in between.
Sha256Sums load_verified(const std::filesystem::path& sums, const std::filesystem::path& signature,
                         const std::filesystem::path& public_key);

}  // namespace hoist
