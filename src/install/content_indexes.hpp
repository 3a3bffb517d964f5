#pragma once

// The content indexes of one component's versions (ARCHITECTURE.md, "Content identity"), one file a version:
//
//   <state>/<component>/.index/<version>            written durably before the version gets its final name
//   <state>/<component>/.index/.hoist-tmp.<version>.* a write in progress; a leftover when no run holds the lock
//
// A version never starts with '.', so `.index` names no version of the file and sysext kinds, which keep their
// versions in <state>/<component>/ too.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "hoist/install/installer.hpp"
#include "hoist/sys/host_root.hpp"
#include "hoist/transfer/content_index.hpp"

namespace hoist {

class ContentIndexes {
 public:
  ContentIndexes(const HostRoot& root, const InstallTarget& target);

  /// Whether load() warns of an index it cannot read: the transfer does, the verification that runs before it
  /// and finds the same index does not say it twice.
  enum class Damaged { warn, quiet };

  /// The index of `version`. nullopt when there is none (a version an older hoist staged, or a first install);
  /// a damaged one is nullopt too, with a warning: the transfer then reads the files, never trusting their
  /// size and mtime.
  [[nodiscard]] std::optional<ContentIndex> load(const std::string& version, Damaged damaged = Damaged::warn) const;

  /// Writes the index of `version`, atomically and durably. The directories it makes go to `made`.
  void save(const std::string& version, const ContentIndex& index, std::vector<std::string>* made = nullptr) const;

  /// Gives `version` the index of `from`, by a hard link, when `index` (which the caller compared with `from`'s)
  /// holds what that file holds: a sync that changed nothing writes no index again. Otherwise, or when `from` has
  /// no index file any more, save()s `index`.
  void save_like(const std::string& version, const ContentIndex& index, const std::string& from,
                 const ContentIndex* from_index, std::vector<std::string>* made = nullptr) const;

  /// Removes the index of `version`, if there is one.
  void remove(const std::string& version) const;

  /// Removes what killed runs left: temporaries, and the index of every version that `kept` does not accept
  /// (its version was removed, or never got its final name). Returns how many it removed.
  int clean(const std::function<bool(const std::string& version)>& kept) const;

  /// The host path of the directory, for messages and tests.
  [[nodiscard]] const std::string& path() const noexcept { return m_path; }

 private:
  const HostRoot& m_root;
  std::string m_component;
  std::string m_path;
};

}  // namespace hoist
