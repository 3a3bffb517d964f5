#include "hoist/sys/archive_reader.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "archive_charset.hpp"
#include "hoist/sys/compressed_stream.hpp"
#include "hoist/sys/posix_acl.hpp"
#include "hoist/sys/zip_names.hpp"
#include "hoist/util/text.hpp"

namespace hoist {

namespace {

// libarchive reads the file in blocks of this size.
constexpr size_t k_block_size = size_t{128} * 1024;

void enable_formats(struct archive* handle) {
  // Not archive_read_support_format_all(): it adds empty (any 0-byte file) and
  // mtree (reads whatever files the text names). raw is never in _all.
  // Return codes are ignored: a format whose library is missing just stays off.
  archive_read_support_format_7zip(handle);
  archive_read_support_format_ar(handle);
  archive_read_support_format_cab(handle);
  archive_read_support_format_cpio(handle);
  archive_read_support_format_iso9660(handle);
  archive_read_support_format_lha(handle);
  archive_read_support_format_rar(handle);
  archive_read_support_format_rar5(handle);
  archive_read_support_format_tar(handle);
  archive_read_support_format_warc(handle);
  archive_read_support_format_xar(handle);
  archive_read_support_format_zip(handle);
  // Not archive_read_support_filter_all(): it adds filters that run a program
  // found on PATH (lrzip, grzip, and lzop without liblzo2) and filters without
  // a check (compress, lzma, uu, rpm). These are built in, and each has a check
  // that check_compressed_stream() enforces.
  archive_read_support_filter_gzip(handle);
  archive_read_support_filter_bzip2(handle);
  archive_read_support_filter_xz(handle);
  archive_read_support_filter_lzip(handle);
  archive_read_support_filter_zstd(handle);
  archive_read_support_filter_lz4(handle);
}

uint16_t acl_tag(int tag) {
  switch (tag) {
    case ARCHIVE_ENTRY_ACL_USER_OBJ: return PosixAclEntry::user_obj;
    case ARCHIVE_ENTRY_ACL_USER: return PosixAclEntry::user;
    case ARCHIVE_ENTRY_ACL_GROUP_OBJ: return PosixAclEntry::group_obj;
    case ARCHIVE_ENTRY_ACL_GROUP: return PosixAclEntry::group;
    case ARCHIVE_ENTRY_ACL_MASK: return PosixAclEntry::mask;
    case ARCHIVE_ENTRY_ACL_OTHER: return PosixAclEntry::other;
    default: return 0;
  }
}

/// The entry's POSIX ACL of `type` (ACCESS or DEFAULT); empty when it has none.
/// libarchive keeps the owner, group and other entries of an access ACL in the
/// mode and gives them back first when there are other entries. A named user or
/// group entry that the archive gave without a numeric id (GNU tar's --acls
/// writes `user:alice:rw-`) comes back with the id -1; `names`, when given,
/// receives the first such entry's tag and name.
std::vector<PosixAclEntry> entry_acl(archive_entry* entry, int type, std::string* names = nullptr) {
  std::vector<PosixAclEntry> acl;
  if (archive_entry_acl_reset(entry, type) <= 0) {
    return acl;
  }
  int entry_type = 0;
  int permset = 0;
  int tag = 0;
  int id = 0;
  const char* name = nullptr;
  while (archive_entry_acl_next(entry, type, &entry_type, &permset, &tag, &id, &name) == ARCHIVE_OK) {
    const uint16_t kernel_tag = acl_tag(tag);
    if (kernel_tag == 0) {
      continue;  // NFSv4 "everyone": not a POSIX ACL entry
    }
    const bool named = kernel_tag == PosixAclEntry::user || kernel_tag == PosixAclEntry::group;
    if (named && id < 0 && names != nullptr && names->empty()) {
      *names =
          std::string(kernel_tag == PosixAclEntry::user ? "user " : "group ") + in_quotes(name != nullptr ? name : "");
    }
    acl.push_back(PosixAclEntry{kernel_tag, static_cast<uint16_t>(permset & 07), static_cast<uint32_t>(id)});
  }
  return acl;
}

constexpr std::pair<int, const char*> k_acl_kinds[] = {{ARCHIVE_ENTRY_ACL_TYPE_ACCESS, "system.posix_acl_access"},
                                                       {ARCHIVE_ENTRY_ACL_TYPE_DEFAULT, "system.posix_acl_default"}};

bool has_xattr(const Xattrs& xattrs, std::string_view name) {
  return std::any_of(xattrs.begin(), xattrs.end(), [name](const Xattr& x) { return x.name == name; });
}

bool entry_has_xattr(archive_entry* entry, std::string_view name) {
  if (archive_entry_xattr_reset(entry) <= 0) {
    return false;
  }
  const char* xattr_name = nullptr;
  const void* value = nullptr;
  size_t size = 0;
  while (archive_entry_xattr_next(entry, &xattr_name, &value, &size) == ARCHIVE_OK) {
    if (xattr_name != nullptr && xattr_name == name) {
      return true;
    }
  }
  return false;
}

// Whether libarchive gives the names of `format` only by converting them to the locale's charset, with no way to
// their bytes: UTF-16 names (7-Zip; ISO 9660's Joliet, where Rock Ridge names are bytes; RAR 4's Unicode names;
// LHA's Unicode extension) and CAB's UTF-8 ones. These are read with ArchiveNamesAsUtf8. A tar's names (pax:
// UTF-8, which libarchive keeps as bytes when it cannot convert them), a zip's (zip_local_names()) and a RAR 5's
// (UTF-8, archive_entry_pathname_utf8()) are taken as their bytes instead: the conversion would compose them.
bool names_need_utf8_locale(int format) {
  switch (format & ARCHIVE_FORMAT_BASE_MASK) {
    case ARCHIVE_FORMAT_7ZIP:
    case ARCHIVE_FORMAT_ISO9660:
    case ARCHIVE_FORMAT_CAB:
    case ARCHIVE_FORMAT_LHA: return true;
    case ARCHIVE_FORMAT_RAR: return format == ARCHIVE_FORMAT_RAR;  // RAR 4; ARCHIVE_FORMAT_RAR_V5 shares the base
    default: return false;
  }
}

// The format of the archive on `fd` as libarchive sees it after a first header, read on a handle of its own, or
// 0. `fd` is left at offset 0.
int probe_format(int fd) {
  struct archive* probe = archive_read_new();
  if (probe == nullptr) {
    return 0;
  }
  enable_formats(probe);
  int format = 0;
  archive_entry* entry = nullptr;
  if (archive_read_open_fd(probe, fd, k_block_size) == ARCHIVE_OK) {
    const int rc = archive_read_next_header(probe, &entry);
    if (rc == ARCHIVE_OK || rc == ARCHIVE_WARN) {
      format = archive_format(probe);
    }
  }
  archive_read_free(probe);
  ::lseek(fd, 0, SEEK_SET);
  return format;
}

}  // namespace

Expected<ArchiveReader> ArchiveReader::open(const std::filesystem::path& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (!fd) {
    return sys_error("open archive " + in_quotes(path.string()));
  }
  return open(std::move(fd), path.string());
}

Expected<ArchiveReader> ArchiveReader::open(Fd fd, std::string display) {
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return sys_error("stat archive " + in_quotes(display));
  }
  struct archive* handle = archive_read_new();
  if (handle == nullptr) {
    return SysError{"failed to read archive " + in_quotes(display) + ": out of memory", ENOMEM};
  }
  ArchiveReader reader(handle, std::move(fd), static_cast<uint64_t>(st.st_size), display);
  enable_formats(handle);
  // libarchive picks the charset to decode names to once a handle, at its first name: the format decides it, and
  // the format is known only once a first header is read, on another handle.
  reader.m_names_as_utf8 = names_need_utf8_locale(probe_format(reader.m_fd.get()));
  std::optional<ArchiveNamesAsUtf8> as_utf8;
  if (reader.m_names_as_utf8) {
    as_utf8.emplace();
  }
  // The fd variant keeps seeking (zip reads its central directory at the end).
  if (archive_read_open_fd(handle, reader.m_fd.get(), k_block_size) != ARCHIVE_OK) {
    return reader.error("read archive " + in_quotes(display));
  }
  return reader;
}

ArchiveReader::ArchiveReader(ArchiveReader&& other) noexcept
    : m_archive(std::exchange(other.m_archive, nullptr)),
      m_entry(std::exchange(other.m_entry, nullptr)),
      m_entries(other.m_entries),
      m_names_as_utf8(other.m_names_as_utf8),
      m_last_name(std::move(other.m_last_name)),
      m_zip_names(std::move(other.m_zip_names)),
      m_fd(std::move(other.m_fd)),
      m_file_size(other.m_file_size),
      m_display(std::move(other.m_display)) {}

ArchiveReader& ArchiveReader::operator=(ArchiveReader&& other) noexcept {
  if (this != &other) {
    if (m_archive != nullptr) {
      archive_read_free(m_archive);
    }
    m_archive = std::exchange(other.m_archive, nullptr);
    m_entry = std::exchange(other.m_entry, nullptr);
    m_entries = other.m_entries;
    m_names_as_utf8 = other.m_names_as_utf8;
    m_last_name = std::move(other.m_last_name);
    m_zip_names = std::move(other.m_zip_names);
    m_fd = std::move(other.m_fd);
    m_file_size = other.m_file_size;
    m_display = std::move(other.m_display);
  }
  return *this;
}

ArchiveReader::~ArchiveReader() {
  if (m_archive != nullptr) {
    archive_read_free(m_archive);
  }
}

SysError ArchiveReader::error(std::string_view what) const {
  const char* text = archive_error_string(m_archive);
  const int errnum = archive_errno(m_archive);
  return SysError{"failed to " + std::string(what) + ": " + (text != nullptr ? text : "unknown libarchive error"),
                  errnum};
}

Expected<archive_entry*> ArchiveReader::next() {
  archive_entry* entry = nullptr;
  int rc = 0;
  {
    std::optional<ArchiveNamesAsUtf8> as_utf8;
    if (m_names_as_utf8) {
      as_utf8.emplace();
    }
    rc = archive_read_next_header(m_archive, &entry);
    if (rc == ARCHIVE_OK || rc == ARCHIVE_WARN) {
      // Some names are converted when first asked for: asked here, where the charset is right, and kept.
      (void)archive_entry_pathname(entry);
      (void)archive_entry_hardlink(entry);
      (void)archive_entry_symlink(entry);
      (void)archive_entry_uname(entry);
      (void)archive_entry_gname(entry);
    }
  }
  if (rc == ARCHIVE_EOF) {
    return static_cast<archive_entry*>(nullptr);
  }
  // ARCHIVE_WARN: e.g. an unknown pax keyword or a name not in the locale's charset; the entry is usable.
  if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN) {
    return error("read archive " + in_quotes(m_display));
  }
  m_entry = entry;
  ++m_entries;
  if (archive_entry_pathname(entry) == nullptr &&
      (archive_format(m_archive) & ARCHIVE_FORMAT_BASE_MASK) == ARCHIVE_FORMAT_ZIP) {
    if (auto restored = restore_zip_name(entry); !restored) {
      return restored.error();
    }
  }
  if (archive_entry_pathname(entry) == nullptr) {
    // A name kept as UTF-8 that the C locale cannot hold (RAR 5): its bytes.
    if (const char* utf8 = archive_entry_pathname_utf8(entry); utf8 != nullptr) {
      archive_entry_copy_pathname(entry, utf8);
    }
  }
  if (archive_entry_pathname(entry) == nullptr) {
    // Never a name made up, nor "": the entry has none hoist could write.
    const char* why = rc == ARCHIVE_WARN ? archive_error_string(m_archive) : nullptr;
    return SysError{
        "failed to read archive " + in_quotes(m_display) + ": the name of its entry " + std::to_string(m_entries) +
            (m_last_name.empty() ? std::string(" (the first)") : " (after " + in_quotes(m_last_name) + ")") +
            " cannot be decoded as UTF-8" + (why != nullptr ? std::string(" (") + why + ")" : ""),
        EILSEQ};
  }
  m_last_name = archive_entry_pathname(entry);
  return entry;
}

Expected<void> ArchiveReader::restore_zip_name(archive_entry* entry) {
  // libarchive converts a name with zip's UTF-8 flag to the locale's charset; the static binary runs in the C
  // locale, which holds no byte past 0x7f, and libarchive then drops the name. The local header has its bytes.
  if (!m_zip_names) {
    auto names = zip_local_names(m_fd.get(), m_file_size);
    if (!names) {
      return SysError{"failed to read archive " + in_quotes(m_display) + ": " + names.error().message,
                      names.error().errnum};
    }
    m_zip_names = std::move(*names);
  }
  if (m_entries > m_zip_names->size()) {
    return SysError{"failed to read archive " + in_quotes(m_display) +
                        ": its central directory lists fewer entries than the archive has",
                    EILSEQ};
  }
  const std::string& name = (*m_zip_names)[m_entries - 1];
  archive_entry_copy_pathname(entry, name.c_str());
  // What libarchive does for the names it can read: a name ending in '/' is a directory, whatever the mode says.
  if (!name.empty() && name.back() == '/' && archive_entry_filetype(entry) != AE_IFDIR) {
    archive_entry_set_filetype(entry, AE_IFDIR);
    archive_entry_set_perm(entry, archive_entry_perm(entry) | 0111);
    archive_entry_set_size(entry, 0);
  }
  return {};
}

Expected<ArchiveReader::Block> ArchiveReader::read_block() {
  Block block;
  la_int64_t offset = 0;
  const int rc = archive_read_data_block(m_archive, &block.data, &block.size, &offset);
  if (rc == ARCHIVE_EOF) {
    return Block{};
  }
  if (rc == ARCHIVE_WARN) {
    // On data, libarchive warns only when the entry's data does not match what the
    // format recorded for it (zip's CRC-32 and sizes): the data is damaged.
    const char* text = archive_error_string(m_archive);
    return SysError{"the data of entry " + in_quotes(m_entry != nullptr ? entry_path(m_entry) : "") +
                        " does not pass the format's check (" + (text != nullptr ? text : "no detail") + ")",
                    EBADMSG};
  }
  if (rc != ARCHIVE_OK) {
    return error("read archive " + in_quotes(m_display));
  }
  block.offset = offset;
  return block;
}

Expected<std::optional<std::string>> ArchiveReader::check_compression(const std::atomic<bool>* stop) const {
  char head[16] = {};
  const ssize_t n = ::pread(m_fd.get(), head, sizeof head, 0);
  if (n < 0) {
    return sys_error("read archive " + in_quotes(m_display));
  }
  std::string unsupported;
  const std::optional<Compression> compression =
      detect_compression(std::string_view(head, static_cast<size_t>(n)), unsupported);
  if (!compression) {
    return std::optional<std::string>("it is compressed with " + unsupported + ", which hoist does not read");
  }
  auto verdict = check_compressed_stream(m_fd.get(), *compression, stop);
  if (!verdict) {
    return SysError{"failed to read archive " + in_quotes(m_display) + ": " + verdict.error().message,
                    verdict.error().errnum};
  }
  return verdict;
}

NodeMeta entry_meta(archive_entry* entry) {
  NodeMeta meta;
  meta.mode = archive_entry_mode(entry);
  meta.uid = static_cast<uid_t>(archive_entry_uid(entry));
  meta.gid = static_cast<gid_t>(archive_entry_gid(entry));
  if (archive_entry_mtime_is_set(entry) != 0) {
    meta.mtime.tv_sec = archive_entry_mtime(entry);
    meta.mtime.tv_nsec = archive_entry_mtime_nsec(entry);
  } else {
    ::clock_gettime(CLOCK_REALTIME, &meta.mtime);
  }
  if (meta.type() == S_IFREG) {
    meta.size = static_cast<uint64_t>(std::max<la_int64_t>(0, archive_entry_size(entry)));
  }
  if (meta.type() == S_IFCHR || meta.type() == S_IFBLK) {
    meta.rdev = archive_entry_rdev(entry);
  }
  // libarchive folds the ACL's group entry into the mode's group bits; on disk
  // (and in stat) they are the mask's.
  for (const PosixAclEntry& acl : entry_acl(entry, ARCHIVE_ENTRY_ACL_TYPE_ACCESS)) {
    if (acl.tag == PosixAclEntry::mask) {
      meta.mode = (meta.mode & ~mode_t{070}) | static_cast<mode_t>(acl.perm << 3U);
    }
  }
  return meta;
}

Xattrs entry_xattrs(archive_entry* entry) {
  Xattrs xattrs;
  if (archive_entry_xattr_reset(entry) > 0) {
    const char* name = nullptr;
    const void* value = nullptr;
    size_t size = 0;
    while (archive_entry_xattr_next(entry, &name, &value, &size) == ARCHIVE_OK) {
      if (name == nullptr || *name == '\0') {
        continue;
      }
      std::string bytes(static_cast<const char*>(value), size);
      // GNU tar --selinux stores a label twice: as a string (RHT.security.selinux) and
      // as the raw xattr, which ends with the NUL that setfilecon() wrote. The raw
      // value is the one kept, whichever order libarchive gives them in.
      if (std::string_view(name) == "security.selinux" &&
          std::any_of(xattrs.begin(), xattrs.end(), [&](const Xattr& x) {
            return x.name == name && x.value.size() == bytes.size() + 1 && x.value.back() == '\0' &&
                   x.value.starts_with(bytes);
          })) {
        continue;
      }
      // Otherwise, an archive that lists a name twice: the last one wins, as it would on disk.
      std::erase_if(xattrs, [&](const Xattr& x) { return x.name == name; });
      xattrs.push_back(Xattr{name, std::move(bytes)});
    }
  }
  for (const auto& [type, name] : k_acl_kinds) {
    // An ACL that came as an xattr too (GNU tar --xattrs-include='system.*') is the
    // kernel's own form, with numeric ids: it is taken as it is.
    if (has_xattr(xattrs, name)) {
      continue;
    }
    auto acl = entry_acl(entry, type);
    if (!acl.empty()) {
      xattrs.push_back(Xattr{name, encode_posix_acl(std::move(acl))});
    }
  }
  std::sort(xattrs.begin(), xattrs.end(), [](const Xattr& a, const Xattr& b) { return a.name < b.name; });
  return xattrs;
}

std::optional<std::string> entry_acl_problem(archive_entry* entry) {
  if (archive_entry_acl_count(entry, ARCHIVE_ENTRY_ACL_TYPE_POSIX1E) <= 0) {
    return std::nullopt;
  }
  for (const auto& [type, name] : k_acl_kinds) {
    std::string names;
    entry_acl(entry, type, &names);
    // entry_xattrs() takes the raw xattr of the ACL when the archive has it: then no name matters.
    if (!names.empty() && !entry_has_xattr(entry, name)) {
      return std::string("its ") + (type == ARCHIVE_ENTRY_ACL_TYPE_ACCESS ? "access" : "default") + " ACL names " +
             names +
             " without a numeric id, and hoist keeps ids, never names (GNU tar --acls writes names: add "
             "--xattrs --xattrs-include='system.posix_acl_*', or make the archive with bsdtar)";
    }
  }
  return std::nullopt;
}

std::string_view entry_path(archive_entry* entry) {
  const char* path = archive_entry_pathname(entry);
  return path != nullptr ? path : "";
}

std::string_view entry_hardlink(archive_entry* entry) {
  const char* target = archive_entry_hardlink(entry);
  return target != nullptr ? target : "";
}

std::string_view entry_symlink(archive_entry* entry) {
  const char* target = archive_entry_symlink(entry);
  return target != nullptr ? target : "";
}

unsigned entry_nlink(archive_entry* entry) {
  return archive_entry_nlink(entry);
}

}  // namespace hoist
