#pragma once

#include <ctime>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "hoist/sys/compressed_stream.hpp"
#include "hoist/util/fd.hpp"

namespace hoist {

/// What `--source` names.
enum class PayloadType {
  directory,  ///< a directory tree
  archive,    ///< a file that libarchive reads as an archive (tar, cpio, zip, … under any filter)
  file,       ///< any other regular file (a binary, a sysext .raw image)
};

/// The payload of an upgrade: a path in the container, opened and classified.
///
/// A file or archive payload is opened once, here, and everything that reads
/// it afterwards (classification, verification, staging) reads that same file
/// through reopen(), never the path again: a payload replaced at its path
/// meanwhile (a writable volume) is not what gets installed. check_unchanged()
/// then proves that nothing wrote to that file while it was read.
class Payload {
 public:
  /// Classifies `source`. Throws UsageError naming it when it does not exist,
  /// cannot be opened, or is neither a directory nor a regular file.
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

  /// For a file or archive payload: a new descriptor, at offset 0, of the file
  /// open() opened (whatever is at the path now). Throws Failure naming the
  /// payload when it cannot be reopened.
  [[nodiscard]] Fd reopen() const;

  /// For a file or archive payload: throws Error(ExitCode::verification) naming
  /// the payload when the file open() opened changed since (its size,
  /// modification or change time differ: the kernel sets the change time on a
  /// write, and on the unlink of a rename over it), so that bytes read before and
  /// after a write are never taken for one verified payload. Does nothing for a directory.
  void check_unchanged() const;

 private:
  Payload(std::filesystem::path path, PayloadType type) : m_path(std::move(path)), m_type(type) {}
  /// What a write to the file changes; no one but the kernel sets the change time.
  struct Written {
    off_t size = 0;
    timespec modified{};
    timespec changed{};
  };
  static Payload file_payload(Payload payload);
  std::filesystem::path m_path;
  PayloadType m_type;
  std::shared_ptr<const Fd> m_file;  ///< file and archive payloads: the file open() opened
  Written m_written;                 ///< m_file's, when open() opened it
  std::string m_unsupported_compression;
  std::optional<Compression> m_compression;
};

}  // namespace hoist
