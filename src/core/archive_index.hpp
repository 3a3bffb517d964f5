#pragma once

// Internal to the transfer engine: the entries of an archive extracted so
// far, and the checks that every later entry passes against them.

#include <sys/types.h>

#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "transfer_counters.hpp"

namespace hoist::transfer {

/// What is known of an extracted entry: enough to check later names against it
/// and to make hard links to it.
struct EntryState {
  mode_t type = 0;
  bool implicit = false;  ///< a directory made for deeper entries and not (yet) listed itself
  bool owned = false;     ///< a regular file written here, not linked from link_dest
  Outcome outcome = Outcome::added;
  size_t dir_record = 0;  ///< directories: index of their metadata record
  dev_t compare_dev = 0;  ///< the inode at the same path in link_dest, if any
  ino_t compare_ino = 0;
};

/// The extracted entries of one archive by normalized path. Every check
/// refuses with hoist::Error(ExitCode::verification) naming the entry as the
/// archive spells it (`raw`).
class ArchiveIndex {
 public:
  explicit ArchiveIndex(std::string archive_display) : m_archive(std::move(archive_display)) {}

  /// Checks the directories above `path`: each must be a directory of this
  /// archive, never a symlink it made or another non-directory. Returns those
  /// that do not exist yet, shallowest first, for the caller to make.
  std::vector<std::string_view> check_parents(std::string_view path, std::string_view raw) const;

  /// Checks the target of a hard link entry: inside the payload, an earlier
  /// entry, not a directory. Returns its state and sets `target` to its normal path.
  const EntryState& check_link_target(std::string_view raw, std::string_view link, std::string& target) const;

  /// The entry at `path`, or nullptr.
  [[nodiscard]] EntryState* find(std::string_view path);

  void add(std::string path, const EntryState& state) { m_entries.emplace(std::move(path), state); }

  [[nodiscard]] const std::string& archive() const noexcept { return m_archive; }

 private:
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };

  std::string m_archive;
  /// The directory whose ancestry the last check passed: entries come grouped by directory.
  mutable std::string m_last_parent;
  std::unordered_map<std::string, EntryState, StringHash, std::equal_to<>> m_entries;
};

}  // namespace hoist::transfer
