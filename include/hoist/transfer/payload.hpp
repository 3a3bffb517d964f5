#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "hoist/sys/compressed_stream.hpp"

namespace hoist {

/// What `--source` names.
enum class PayloadType {
  directory,  ///< a directory tree
  archive,    ///< a file that libarchive reads as an archive (tar, cpio, zip, … under any filter)
  file,       ///< any other regular file (a binary, a sysext .raw image)
};

/// The payload of an upgrade: a path in the container, opened and classified.
class Payload {
 public:
  /// Classifies `source`. Throws UsageError naming it when it does not exist or
  /// is neither a directory nor a regular file.
  static Payload open(const std::filesystem::path& source);

  [[nodiscard]] PayloadType type() const noexcept { return m_type; }
  [[nodiscard]] const std::filesystem::path& path() const noexcept { return m_path; }
  /// For a file payload that starts as a compressed stream hoist does not read
  /// (lzop, lrzip, grzip, compress, legacy lz4): that compression's name; else "".
  [[nodiscard]] const std::string& unsupported_compression() const noexcept { return m_unsupported_compression; }
  /// For a file payload that starts as a compressed stream hoist reads (gzip,
  /// xz, …) but that libarchive could not read a first entry of: why that
  /// stream is damaged (check_compressed_stream()), or nullopt when it is whole
  /// (then it is a compressed file, not an archive). Throws Failure when the
  /// file cannot be read.
  [[nodiscard]] std::optional<std::string> compression_problem() const;

 private:
  Payload(std::filesystem::path path, PayloadType type) : m_path(std::move(path)), m_type(type) {}
  static Payload file_payload(const std::filesystem::path& source);
  std::filesystem::path m_path;
  PayloadType m_type;
  std::string m_unsupported_compression;
  std::optional<Compression> m_compression;
};

}  // namespace hoist
