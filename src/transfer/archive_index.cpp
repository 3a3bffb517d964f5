#include "archive_index.hpp"

#include <sys/stat.h>

#include <limits>
#include <stdexcept>

#include "hoist/transfer/entry_name.hpp"
#include "hoist/util/error.hpp"
#include "hoist/util/siphash.hpp"
#include "hoist/util/text.hpp"
#include "transfer_support.hpp"

namespace hoist::transfer {

namespace {

std::pair<std::string_view, std::string_view> split_last(std::string_view path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string_view::npos) {
    return {std::string_view(), path};
  }
  return {path.substr(0, slash), path.substr(slash + 1)};
}

}  // namespace

ArchiveIndex::ArchiveIndex(std::string archive_display)
    : m_archive(std::move(archive_display)), m_hash_key(process_hash_key()) {
  const Id root = new_node(k_root, "");
  node(root).type = S_IFDIR >> 12U;
}

// Keyed (SipHash, a key per process): the names come from the archive, and names
// chosen to collide would make every insert walk one long run of slots.
size_t ArchiveIndex::hash(Id parent, std::string_view name) const {
  return static_cast<size_t>(siphash24(m_hash_key[0] ^ parent, m_hash_key[1], name));
}

size_t ArchiveIndex::slot_of(Id parent, std::string_view name) const {
  const size_t mask = m_slots.size() - 1;
  for (size_t i = hash(parent, name) & mask;; i = (i + 1) & mask) {
    const Id held = m_slots[i];
    if (held == 0) {
      return i;
    }
    const Node& n = node(held - 1);
    if (n.parent == parent && this->name(n) == name) {
      return i;
    }
  }
}

void ArchiveIndex::grow_slots() {
  std::vector<Id> old = std::move(m_slots);
  m_slots.assign(old.empty() ? size_t{1024} : old.size() * 2, 0);
  for (const Id held : old) {
    if (held != 0) {
      const Node& n = node(held - 1);
      m_slots[slot_of(n.parent, name(n))] = held;
    }
  }
}

ArchiveIndex::Id ArchiveIndex::new_node(Id parent, std::string_view name) {
  if (m_count == std::numeric_limits<Id>::max() - 1) {
    throw Error(ExitCode::verification, "refusing archive " + in_quotes(m_archive) + ": it has more than " +
                                            std::to_string(m_count) + " entries");
  }
  constexpr uint32_t k_name_chunk = 1U << k_name_chunk_bits;
  // check_entry_name() keeps every name within NAME_MAX, so a name always fits a chunk.
  if (name.size() > std::numeric_limits<uint8_t>::max()) {
    throw std::logic_error("archive index: name longer than NAME_MAX");
  }
  if (!name.empty() && (m_names.empty() || (m_names_end & (k_name_chunk - 1)) + name.size() > k_name_chunk ||
                        m_names_end >> k_name_chunk_bits >= m_names.size())) {
    if (m_names.size() >= (uint64_t{1} << (32U - k_name_chunk_bits))) {
      throw Error(ExitCode::verification,
                  "refusing archive " + in_quotes(m_archive) + ": its names take more than 4 GiB");
    }
    m_names_end = uint64_t{m_names.size()} << k_name_chunk_bits;
    m_names.push_back(std::make_unique_for_overwrite<char[]>(k_name_chunk));
  }
  const Id id = m_count++;
  if ((id & ((Id{1} << k_node_chunk_bits) - 1)) == 0) {
    m_nodes.push_back(std::make_unique<Node[]>(size_t{1} << k_node_chunk_bits));
  }
  Node& n = node(id);
  n.parent = parent;
  n.name_size = static_cast<uint8_t>(name.size());
  if (!name.empty()) {
    n.name_at = static_cast<uint32_t>(m_names_end);
    std::copy(name.begin(), name.end(),
              m_names[m_names_end >> k_name_chunk_bits].get() + (m_names_end & (k_name_chunk - 1)));
    m_names_end += name.size();
  }
  return id;
}

std::optional<ArchiveIndex::Id> ArchiveIndex::find_child(Id parent, std::string_view name) const {
  if (m_slots.empty()) {
    return std::nullopt;
  }
  const Id held = m_slots[slot_of(parent, name)];
  return held == 0 ? std::nullopt : std::optional<Id>(held - 1);
}

std::optional<ArchiveIndex::Id> ArchiveIndex::find_directory(std::string_view path) const {
  if (m_last_parent_id && path == m_last_parent) {
    return m_last_parent_id;
  }
  Id current = k_root;
  for (size_t start = 0; start < path.size();) {
    const size_t slash = std::min(path.find('/', start), path.size());
    const std::optional<Id> child = find_child(current, path.substr(start, slash - start));
    if (!child || node(*child).type != S_IFDIR >> 12U) {
      return std::nullopt;
    }
    current = *child;
    start = slash + 1;
  }
  return current;
}

std::optional<ArchiveIndex::Id> ArchiveIndex::find(std::string_view path) const {
  if (path.empty()) {
    return k_root;
  }
  const auto [parent_path, name] = split_last(path);
  const std::optional<Id> parent = find_directory(parent_path);
  return parent ? find_child(*parent, name) : std::nullopt;
}

std::vector<std::string_view> ArchiveIndex::check_parents(std::string_view path, std::string_view raw) {
  std::vector<std::string_view> missing;
  const size_t last_slash = path.rfind('/');
  if (last_slash == std::string_view::npos) {
    return missing;
  }
  // Entries are never removed and directories stay directories: a parent that passed once passes again.
  const std::string_view parent_path = path.substr(0, last_slash);
  if (m_last_parent_id && parent_path == m_last_parent) {
    return missing;
  }
  Id current = k_root;
  bool resolved = true;
  for (size_t slash = path.find('/'), start = 0; slash != std::string_view::npos;
       start = slash + 1, slash = path.find('/', start)) {
    const std::string_view parent = path.substr(0, slash);
    if (!resolved) {
      missing.push_back(parent);
      continue;
    }
    const std::optional<Id> child = find_child(current, path.substr(start, slash - start));
    if (!child) {
      missing.push_back(parent);
      resolved = false;
      continue;
    }
    const mode_t type = mode_t{node(*child).type} << 12U;
    // Our own walk opens directories with O_NOFOLLOW and would fail anyway; this says why.
    if (type == S_IFLNK) {
      refuse_entry(raw, m_archive,
                   "it passes through " + in_quotes(parent) + ", a symlink made earlier in the archive");
    }
    if (type != S_IFDIR) {
      refuse_entry(raw, m_archive, "its parent " + in_quotes(parent) + " is not a directory");
    }
    current = *child;
  }
  // The missing ones are added by the caller before the entry; add() notes the parent's number then.
  m_last_parent = parent_path;
  m_last_parent_id = resolved ? std::optional<Id>(current) : std::nullopt;
  return missing;
}

EntryState ArchiveIndex::check_link_target(std::string_view raw, std::string_view link, std::string& target) const {
  if (check_entry_name(link, target) != NameProblem::none || target.empty()) {
    refuse_entry(raw, m_archive, "it is a hard link to " + in_quotes(link) + ", outside the payload");
  }
  const std::optional<Id> id = find(target);
  const EntryState found = id ? state(*id) : EntryState{};
  if (!id || found.implicit) {
    refuse_entry(raw, m_archive,
                 "it is a hard link to " + in_quotes(link) + ", which is not an earlier entry of the archive");
  }
  if (found.type == S_IFDIR) {
    refuse_entry(raw, m_archive, "it is a hard link to the directory " + in_quotes(link));
  }
  return found;
}

EntryState ArchiveIndex::state(Id id) const {
  const Node& n = node(id);
  EntryState s;
  s.type = mode_t{n.type} << 12U;
  s.implicit = (n.flags & k_implicit) != 0;
  s.owned = (n.flags & k_owned) != 0;
  s.outcome = static_cast<Outcome>(n.flags >> k_outcome_shift);
  if (s.implicit) {
    s.dir_record = m_implicit_records.at(id);
  }
  return s;
}

void ArchiveIndex::mark_listed(Id id) {
  node(id).flags &= static_cast<uint8_t>(~k_implicit);
  m_implicit_records.erase(id);
}

void ArchiveIndex::add(std::string_view path, const EntryState& state) {
  const auto [parent_path, name] = split_last(path);
  const std::optional<Id> parent = find_directory(parent_path);
  // Room for one more entry (m_count counts the root, which has no slot), then its one lookup.
  if (static_cast<size_t>(m_count) * 8 > m_slots.size() * 7) {
    grow_slots();
  }
  const size_t slot = parent ? slot_of(*parent, name) : 0;
  if (!parent || m_slots[slot] != 0) {
    throw std::logic_error("archive index: added an entry without its directory, or twice");
  }
  const Id id = new_node(*parent, name);
  Node& n = node(id);
  n.type = static_cast<uint8_t>((state.type & S_IFMT) >> 12U);
  n.flags = static_cast<uint8_t>((state.implicit ? k_implicit : 0) | (state.owned ? k_owned : 0) |
                                 (static_cast<unsigned>(state.outcome) << k_outcome_shift));
  if (state.implicit) {
    m_implicit_records.emplace(id, state.dir_record);
  }
  m_slots[slot] = id + 1;
  if (state.type == S_IFDIR && path == m_last_parent) {
    m_last_parent_id = id;
  }
}

}  // namespace hoist::transfer
