#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hoist/sys/metadata.hpp"
#include "hoist/util/expected.hpp"
#include "hoist/util/fd.hpp"

struct archive;
struct archive_entry;

namespace hoist {

/// One libarchive read handle over one archive file: every format libarchive
/// reads (tar, cpio, zip, 7z, iso9660, ar, …) but raw, empty and mtree (raw and
/// empty would call any file an archive; mtree reads the files it names from
/// the local filesystem), plain or under gzip, bzip2, xz, lzip, zstd or lz4:
/// the filters built into the binary whose checks check_compression() enforces.
/// No filter that runs an external program (lzop, lrzip, grzip) is enabled.
class ArchiveReader {
 public:
  /// Opens `path` and reads the format's first bytes. Fails when no format
  /// recognises the file: it is then not an archive.
  static Expected<ArchiveReader> open(const std::filesystem::path& path);
  /// The same over `fd`, a file opened for reading at offset 0 that the reader
  /// then owns; `display` names it in errors.
  static Expected<ArchiveReader> open(Fd fd, std::string display);

  ArchiveReader(ArchiveReader&& other) noexcept;
  ArchiveReader& operator=(ArchiveReader&& other) noexcept;
  ArchiveReader(const ArchiveReader&) = delete;
  ArchiveReader& operator=(const ArchiveReader&) = delete;
  ~ArchiveReader();

  /// The next entry's header, or nullptr after the last entry. The entry is
  /// valid until the next call. Names are the archive's bytes, or its UTF-16
  /// decoded to UTF-8 (ArchiveNamesAsUtf8): a zip entry's name is its bytes as
  /// stored, with or without the UTF-8 flag (zip_local_names()). A name that
  /// cannot be decoded (a 7-Zip name with a lone surrogate) is an error naming
  /// the archive and the entry (its number, and the name before it), EILSEQ.
  Expected<archive_entry*> next();

  /// Decodes the whole file once to check its compression's own integrity
  /// (check_compressed_stream()). Returns why the archive is damaged or refused
  /// ("its gzip CRC-32 does not match its data", "it is compressed with lzop,
  /// which hoist does not read"), or nullopt; a SysError when it cannot be read
  /// (ECANCELED once `stop` is set). It reads with pread only: another thread
  /// may call it while this one reads the entries.
  [[nodiscard]] Expected<std::optional<std::string>> check_compression(const std::atomic<bool>* stop = nullptr) const;

  /// A run of the current entry's data at `offset` (sparse entries skip offsets).
  struct Block {
    const void* data = nullptr;
    size_t size = 0;
    int64_t offset = 0;
  };
  /// The next block of the current entry's data; a block of size 0 at its end.
  /// Fails with EBADMSG, naming the entry, when the data does not match what the
  /// format recorded for it (a zip entry's CRC-32).
  Expected<Block> read_block();

  /// The archive file's size on disk, for the unpack-ratio limit.
  [[nodiscard]] uint64_t file_size() const noexcept { return m_file_size; }
  [[nodiscard]] const std::string& display() const noexcept { return m_display; }

 private:
  ArchiveReader(struct archive* handle, Fd fd, uint64_t file_size, std::string display)
      : m_archive(handle), m_fd(std::move(fd)), m_file_size(file_size), m_display(std::move(display)) {}
  [[nodiscard]] SysError error(std::string_view what) const;
  /// Gives a zip entry whose name libarchive could not convert the name its local header stores.
  Expected<void> restore_zip_name(archive_entry* entry);

  struct archive* m_archive = nullptr;
  archive_entry* m_entry = nullptr;                     ///< the entry next() returned last
  size_t m_entries = 0;                                 ///< how many entries next() returned
  bool m_names_as_utf8 = false;                         ///< read under ArchiveNamesAsUtf8 (names_need_utf8_locale)
  std::string m_last_name;                              ///< the name of the entry next() returned last
  std::optional<std::vector<std::string>> m_zip_names;  ///< zip_local_names(), read when first needed
  Fd m_fd;
  uint64_t m_file_size = 0;
  std::string m_display;
};

/// The metadata of an archive entry: type and mode, numeric uid/gid, mtime
/// (the current time when it has none), size, device number. When the entry
/// has an access ACL with a mask, the group bits are the mask (as on disk).
NodeMeta entry_meta(archive_entry* entry);

/// The xattrs of an archive entry, with its POSIX ACLs (which libarchive keeps
/// apart, parsed) encoded as `system.posix_acl_access`/`_default` xattrs, unless
/// the archive has that xattr itself (then it is taken as it is).
Xattrs entry_xattrs(archive_entry* entry);

/// Why the entry's POSIX ACLs cannot be written as they are, or nullopt: an ACL
/// entry that names a user or group without a numeric id (and no xattr of that
/// ACL to take instead). hoist keeps numeric ids, as rsync --numeric-ids does.
std::optional<std::string> entry_acl_problem(archive_entry* entry);

/// The entry's path as stored. NUL cannot appear in it: libarchive cuts names there.
std::string_view entry_path(archive_entry* entry);
/// The hard link target, or empty when the entry is not a hard link.
std::string_view entry_hardlink(archive_entry* entry);
/// The symlink target.
std::string_view entry_symlink(archive_entry* entry);
/// How many names the entry's inode had where the archive was made, as the format
/// recorded it: cpio records it, tar does not (0).
unsigned entry_nlink(archive_entry* entry);

}  // namespace hoist
