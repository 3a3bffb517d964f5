#pragma once

// Internal to the transfer engine: the entries of an archive extracted so
// far, and the checks that every later entry passes against them.

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
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
  uint32_t dir_record = 0;  ///< implicit directories: index of their metadata record
};

/// The extracted entries of one archive, as a tree of names: each entry keeps
/// its parent's number and its own name, 12 bytes plus the name and a slot of
/// the hash table, so that 100,000 entries take about 2.5 MiB and not the
/// 14 MiB that a map by full path took. Every check refuses with
/// hoist::Error(ExitCode::verification) naming the entry as the archive spells
/// it (`raw`).
class ArchiveIndex {
 public:
  using Id = uint32_t;
  /// The payload root, a directory that is always there.
  static constexpr Id k_root = 0;

  explicit ArchiveIndex(std::string archive_display);

  /// Checks the directories above `path`: each must be a directory of this
  /// archive, never a symlink it made or another non-directory. Returns those
  /// that do not exist yet, shallowest first, for the caller to add before the
  /// entry itself.
  std::vector<std::string_view> check_parents(std::string_view path, std::string_view raw);

  /// Checks the target of a hard link entry: inside the payload, an earlier
  /// entry, not a directory. Returns its state and sets `target` to its normal path.
  EntryState check_link_target(std::string_view raw, std::string_view link, std::string& target) const;

  /// The entry at the normal path `path` ("" is the root), if there is one.
  [[nodiscard]] std::optional<Id> find(std::string_view path) const;
  /// The entry `name` in the directory `parent`, if there is one.
  [[nodiscard]] std::optional<Id> find_child(Id parent, std::string_view name) const;

  [[nodiscard]] EntryState state(Id id) const;
  /// A directory first made for deeper entries is now listed itself.
  void mark_listed(Id id);

  /// Adds the entry at `path`, whose parent is a directory already added.
  void add(std::string_view path, const EntryState& state);

  [[nodiscard]] const std::string& archive() const noexcept { return m_archive; }

 private:
  struct Node {
    Id parent = 0;
    uint32_t name_at = 0;   ///< where the name starts in m_names
    uint8_t name_size = 0;  ///< check_entry_name() keeps names within NAME_MAX
    uint8_t type = 0;       ///< S_IFMT >> 12
    uint8_t flags = 0;      ///< k_implicit, k_owned and the outcome
  };
  static_assert(sizeof(Node) == 12);
  static constexpr uint8_t k_implicit = 1;
  static constexpr uint8_t k_owned = 2;
  static constexpr unsigned k_outcome_shift = 2;

  static constexpr unsigned k_node_chunk_bits = 12;  // 4096 nodes, 48 KiB a chunk
  static constexpr unsigned k_name_chunk_bits = 16;  // 64 KiB of names a chunk

  [[nodiscard]] const Node& node(Id id) const {
    return m_nodes[id >> k_node_chunk_bits][id & ((Id{1} << k_node_chunk_bits) - 1)];
  }
  Node& node(Id id) { return m_nodes[id >> k_node_chunk_bits][id & ((Id{1} << k_node_chunk_bits) - 1)]; }
  [[nodiscard]] std::string_view name(const Node& n) const {
    if (n.name_size == 0) {
      return {};
    }
    return {m_names[n.name_at >> k_name_chunk_bits].get() + (n.name_at & ((1U << k_name_chunk_bits) - 1)), n.name_size};
  }
  [[nodiscard]] size_t hash(Id parent, std::string_view name) const;
  /// The slot that holds `name` in `parent`, or the empty slot where it would go.
  [[nodiscard]] size_t slot_of(Id parent, std::string_view name) const;
  Id new_node(Id parent, std::string_view name);
  void grow_slots();
  /// The directory at the normal path `path` ("" is the root), through the cache of the last parent.
  [[nodiscard]] std::optional<Id> find_directory(std::string_view path) const;

  std::string m_archive;
  std::array<uint64_t, 2> m_hash_key;
  std::vector<std::unique_ptr<Node[]>> m_nodes;
  Id m_count = 0;
  std::vector<std::unique_ptr<char[]>> m_names;
  uint64_t m_names_end = 0;  ///< where the next name goes
  /// Node number + 1 for each entry but the root; 0 is an empty slot. Linear
  /// probing, at most seven eighths full.
  std::vector<Id> m_slots;
  /// The metadata records of the directories made for deeper entries and not listed yet.
  std::unordered_map<Id, uint32_t> m_implicit_records;
  /// The directory whose ancestry the last check passed: entries come grouped by directory.
  std::string m_last_parent;
  std::optional<Id> m_last_parent_id;
};

}  // namespace hoist::transfer
