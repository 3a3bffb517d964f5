#pragma once

#include <filesystem>
#include <string>

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

 private:
  Payload(std::filesystem::path path, PayloadType type) : m_path(std::move(path)), m_type(type) {}
  std::filesystem::path m_path;
  PayloadType m_type;
};

}  // namespace hoist
