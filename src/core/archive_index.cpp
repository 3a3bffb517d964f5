#include "archive_index.hpp"

#include <sys/stat.h>

#include <algorithm>

#include "hoist/core/entry_name.hpp"

namespace hoist::transfer {

std::vector<std::string_view> ArchiveIndex::check_parents(std::string_view path, std::string_view raw) const {
  std::vector<std::string_view> missing;
  // Entries are never removed and directories stay directories: a parent that passed once passes again.
  const std::string_view parent_path = path.substr(0, std::min(path.size(), path.rfind('/')));
  if (path.find('/') == std::string_view::npos || parent_path == m_last_parent) {
    return missing;
  }
  for (size_t slash = path.find('/'); slash != std::string_view::npos; slash = path.find('/', slash + 1)) {
    const std::string_view parent = path.substr(0, slash);
    const auto it = m_entries.find(parent);
    if (it == m_entries.end()) {
      missing.push_back(parent);
      continue;
    }
    // Our own walk opens directories with O_NOFOLLOW and would fail anyway; this says why.
    if (it->second.type == S_IFLNK) {
      refuse_entry(raw, m_archive,
                   "it passes through '" + escape_name(parent) + "', a symlink made earlier in the archive");
    }
    if (it->second.type != S_IFDIR) {
      refuse_entry(raw, m_archive, "its parent '" + escape_name(parent) + "' is not a directory");
    }
  }
  // The missing ones are made by the caller before the next check.
  m_last_parent = parent_path;
  return missing;
}

const EntryState& ArchiveIndex::check_link_target(std::string_view raw, std::string_view link,
                                                  std::string& target) const {
  if (check_entry_name(link, target) != NameProblem::none || target.empty()) {
    refuse_entry(raw, m_archive, "it is a hard link to '" + escape_name(link) + "', outside the payload");
  }
  const auto it = m_entries.find(target);
  if (it == m_entries.end() || it->second.implicit) {
    refuse_entry(raw, m_archive,
                 "it is a hard link to '" + escape_name(link) + "', which is not an earlier entry of the archive");
  }
  if (it->second.type == S_IFDIR) {
    refuse_entry(raw, m_archive, "it is a hard link to the directory '" + escape_name(link) + "'");
  }
  return it->second;
}

EntryState* ArchiveIndex::find(std::string_view path) {
  const auto it = m_entries.find(path);
  return it == m_entries.end() ? nullptr : &it->second;
}

}  // namespace hoist::transfer
