#pragma once

// Internal to the verify room: reading the files a user names for verification
// (SHA256SUMS, its signature, the public key).

#include <fcntl.h>

#include <cstddef>
#include <filesystem>
#include <string>
#include <utility>

#include "hoist/util/error.hpp"
#include "hoist/util/file_io.hpp"

namespace hoist {

/// The most of a SHA256SUMS file that is read.
inline constexpr std::size_t k_max_sums_size = 16U << 20U;

/// Reads a whole input file, a path in the container that the user named. Every
/// failure is bad input: UsageError naming the path.
inline std::string read_input_file(const std::filesystem::path& path, std::size_t max_bytes) {
  auto data = read_file_at(AT_FDCWD, path.string(), path.string(), max_bytes);
  if (!data) {
    throw UsageError(data.error().message);
  }
  return std::move(*data);
}

}  // namespace hoist
