#pragma once

// The content index of an installed tree (ARCHITECTURE.md, "Content identity"): for each regular file, the
// SHA-256 of its bytes, the stamp of the inode they were taken of and, when they were read from a payload file,
// that file's stamp. It lets the next transfer find a file unchanged without reading it, and never by its size
// and mtime alone.

#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hoist/sys/sha256.hpp"
#include "hoist/util/expected.hpp"
#include "hoist/util/fd.hpp"

namespace hoist {

/// What tells one state of an inode from another. The ctime cannot be set from user space: any write, chmod,
/// chown, xattr change, link or rename moves it, also one that puts the mtime back afterwards.
struct FileStamp {
  uint64_t ino = 0;
  int64_t size = 0;
  int64_t mtime_sec = 0;
  uint32_t mtime_nsec = 0;
  int64_t ctime_sec = 0;
  uint32_t ctime_nsec = 0;

  static FileStamp of(const struct stat& st);
  bool operator==(const FileStamp&) const = default;
};

/// The payload file whose bytes an entry's digest was read from: its filesystem, inode and ctime when it was
/// read (its size and mtime are the entry's own: an entry is made only of a file equal to the payload's in
/// both). While the payload file is that inode with that ctime, it still holds those bytes. ino 0: none known.
struct SourceStamp {
  uint64_t dev = 0;
  uint64_t ino = 0;
  int64_t ctime_sec = 0;
  uint32_t ctime_nsec = 0;

  static SourceStamp of(const struct stat& st);
  [[nodiscard]] bool known() const { return ino != 0; }
  bool operator==(const SourceStamp&) const = default;
};

/// Path → SHA-256 and stamp, for the regular files of one tree. Built by a transfer (add(), from any thread),
/// written by serialize(), read back by parse(); looked up by directory and name, the way a walk meets files.
class ContentIndex {
 public:
  struct Entry {
    Sha256Digest digest{};
    FileStamp stamp;
    SourceStamp source;  ///< the payload file the digest was read from, if known
    bool operator==(const Entry&) const = default;
  };

  ContentIndex() = default;
  ContentIndex(ContentIndex&& other) noexcept;
  ContentIndex& operator=(ContentIndex&& other) noexcept;
  ContentIndex(const ContentIndex&) = delete;
  ContentIndex& operator=(const ContentIndex&) = delete;
  ~ContentIndex() = default;

  /// Reads what serialize() wrote. Anything else (another format, a truncated or altered file: the last 32
  /// bytes are the SHA-256 of the rest) is an error naming `display` and what is wrong.
  static Expected<ContentIndex> parse(std::string_view bytes, std::string_view display);

  /// The file's bytes, sorted by directory and name, ending with their SHA-256.
  [[nodiscard]] std::string serialize() const;

  /// Records regular file `name` of the directory `dir` ("" is the tree's root; no leading or trailing '/'),
  /// replacing an earlier entry of that name. Thread-safe.
  void add(std::string_view dir, std::string_view name, const Entry& entry);

  /// Makes room for the directories and names of `like` (the index of the tree a transfer compares with), so
  /// that add() rarely grows a section. Call before any add().
  void reserve_like(const ContentIndex& like);

  /// Gives every recorded name of `names` (in `dir`) the stamp `stamp`: the names of one inode, once the last
  /// link to it was made (each link moves its ctime). Thread-safe.
  void restamp(std::string_view dir, const std::vector<std::string_view>& names, const FileStamp& stamp);

  /// The entry of `name` in `dir`, if any. Not to be called while another thread adds.
  [[nodiscard]] const Entry* find(std::string_view dir, std::string_view name) const;

  /// The digest of `name` in `dir` when its entry was taken of the inode that `st` (its lstat now) describes:
  /// the same inode number, size, mtime and ctime. nullopt when there is no entry or the file changed since.
  [[nodiscard]] std::optional<Sha256Digest> vouch(std::string_view dir, std::string_view name,
                                                  const struct stat& st) const;

  /// The digest of `name` in `dir` when its entry was read from the payload file that `source_st` (an lstat of it
  /// now) describes, unchanged since: the same filesystem, inode, ctime, size and mtime. nullopt otherwise.
  [[nodiscard]] std::optional<Sha256Digest> vouch_source(std::string_view dir, std::string_view name,
                                                         const struct stat& source_st) const;

  /// Whether `other` holds the same entries under the same names: serialize() would write the same bytes of both.
  /// Not to be called while another thread adds to either.
  [[nodiscard]] bool same_entries(const ContentIndex& other) const;

  /// The number of entries.
  [[nodiscard]] std::size_t size() const;

  /// The regular-file bytes of the tree it describes, the names of one inode counted once.
  [[nodiscard]] uint64_t total_bytes() const;

  /// Calls `visit(relpath, entry)` for every entry, sorted by directory, then name.
  void for_each(const std::function<void(const std::string& relpath, const Entry& entry)>& visit) const;

 private:
  struct Record {
    uint32_t name_at = 0;
    uint32_t name_size = 0;
    Entry entry;
  };
  struct Section {
    std::string names;  ///< the records' names, back to back
    std::vector<Record> records;
    bool sorted = true;
    [[nodiscard]] std::string_view name(const Record& record) const {
      return std::string_view(names).substr(record.name_at, record.name_size);
    }
    /// Sorts the records by name; of the records of one name, the one added last stays. Returns how many went.
    std::size_t sort();
    [[nodiscard]] const Record* find(std::string_view name) const;
    [[nodiscard]] Record* find(std::string_view name) { return const_cast<Record*>(std::as_const(*this).find(name)); }
  };

  /// The directories sorted, each section sorted (serialize(), for_each()).
  [[nodiscard]] std::vector<std::pair<const std::string*, const Section*>> sorted_sections() const;

  /// Sorts every section (under m_mutex).
  void sort_all() const;

  /// Looks directories up by std::string_view without making a std::string of it.
  struct DirHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view dir) const noexcept { return std::hash<std::string_view>{}(dir); }
  };

  mutable std::mutex m_mutex;
  /// Sorted lazily, under m_mutex. A section may be empty (reserve_like()).
  mutable std::unordered_map<std::string, Section, DirHash, std::equal_to<>> m_sections;
  /// The records of all sections, a name added twice to an unsorted section counted twice until it is sorted.
  mutable std::size_t m_count = 0;
};

/// A tree hoist wrote (a version's directory, a sync's destination) with its content index: what tells the bytes of
/// one of its files without reading them, while that file is the inode the index took them of.
struct IndexedTree {
  Fd dir;  ///< the tree's root, opened O_DIRECTORY
  ContentIndex index;

  /// The digest of regular file `relpath` ("dir/name", no leading '/') when the index vouches for it now (an lstat
  /// of it under `dir`): nullopt when it is not there, not a regular file, not indexed or changed since.
  [[nodiscard]] std::optional<Sha256Digest> vouch(std::string_view relpath) const;
};

}  // namespace hoist
