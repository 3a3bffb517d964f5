#pragma once

// Internal to the installers: what the file and sysext kinds share. Each
// version is one entry under the component's state directory, made only by
// renaming a complete `.<entry>.partial`; a symlink at the destination names
// the current one. Switching, undoing the switch, rolling back, removing a
// version, the integrity check and the cleanup of a killed run's leftovers are
// the same for both; what differs is how an entry is named, what the link
// points to inside it, and what makes it complete.

#include <functional>
#include <string>
#include <vector>

#include "content_indexes.hpp"
#include "hoist/install/installer.hpp"
#include "hoist/sys/host_dir.hpp"

namespace hoist {

class LinkedVersionInstaller : public Installer {
 public:
  Integrity integrity(const std::string& version, const Payload* payload) override;
  std::string host_current(const ComponentState& state) override;
  bool clean_leftovers(ComponentState* state) override;
  bool has_complete(const std::string& version) override;
  bool holds(const std::string& version, const Payload& payload, const TransferOptions& options) override;
  TransferStats commit(const Payload& payload, const std::string& version, const std::string& installed,
                       const TransferOptions& options) override;
  void undo_commit() override;
  void discard_staged() override;
  void check_rollback(const std::string& version, const std::string& current) override;
  void rollback(const std::string& version, const std::string& current) override;
  void withdraw() override;
  void remove_version(const std::string& version) override;

 protected:
  LinkedVersionInstaller(const HostRoot& root, InstallTarget target);

  /// The name of `version`'s entry among the versions.
  [[nodiscard]] virtual std::string entry_name(const std::string& version) const = 0;
  /// The host path that the destination's link holds for `version`.
  [[nodiscard]] virtual std::string link_target(const std::string& version) const = 0;
  /// The version whose link_target() is `target`; "" when it is no such link.
  [[nodiscard]] virtual std::string version_in_link(const std::string& target) const = 0;
  /// Whether `versions` holds `version` complete.
  [[nodiscard]] virtual bool has_version(const HostDir& versions, const std::string& version) const = 0;
  /// The link that undo_commit() puts back when the destination was not a
  /// symlink before the switch ("": remove the link); may refuse the switch.
  [[nodiscard]] virtual std::string link_before_first_switch(const HostDir& parent) const = 0;

  /// Whether `versions` holds `version` with exactly the payload's content.
  [[nodiscard]] virtual bool holds_payload(const HostDir& versions, const std::string& version, const Payload& payload,
                                           const TransferOptions& options) const = 0;

  /// Whether an earlier run left `version` complete and with the payload's content
  /// (holds_payload()), which stage() then reuses; a complete one that differs (an
  /// image re-tagged with other bytes) is removed, to be staged again. Throws when
  /// its entry exists but is not complete; `incomplete` says how ("is not a regular file").
  bool staged_before(const HostDir& versions, const std::string& version, const std::string& incomplete,
                     const Payload& payload, const TransferOptions& options) const;

  /// Makes `entry` among `versions`: `make` writes `partial` completely and
  /// durably, then it is renamed to `entry` and the rename made durable. On an
  /// error the partial is removed and the error rethrown.
  static void publish(const HostDir& versions, const std::string& entry,
                      const std::function<void(const std::string& partial)>& make);

  /// Copies the payload file into `name` of `dir`, fsynced, reporting progress:
  /// one file added (or changed, when `replaces`). With `digest`, it gets the SHA-256 of what the copy holds: the
  /// verified one of `options.payload_file_digest` (the payload file is unchanged since it was opened, which
  /// Payload::check_unchanged() proves), else hashed as it is written.
  static TransferStats copy_payload_file(const Payload& payload, const HostDir& dir, const std::string& name,
                                         bool replaces, const TransferOptions& options, Sha256Digest* digest = nullptr);

  /// The SHA-256 of the payload file: `options.payload_file_digest` (the verified SHA256SUMS) when given and
  /// trusted (Compare::content), else read.
  static Sha256Digest payload_digest(const Payload& payload, const TransferOptions& options);

  /// The SHA-256 of the regular file `relpath` under `versions`, which is `name` in the content index of
  /// `version`: the index's digest while the file is the inode it indexed (and `compare` trusts it), else read.
  [[nodiscard]] Sha256Digest version_file_digest(const HostDir& versions, const std::string& version,
                                                 const std::string& relpath, const std::string& name,
                                                 Compare compare) const;

  /// What installing the payload file over the copy `installed` (a path under
  /// `versions`; "" when there is none) changes: one file added, changed, or
  /// unchanged when their contents are equal (dry runs).
  static TransferStats preview_payload_file(const Payload& payload, const HostDir* versions,
                                            const std::string& installed);

  /// The middle of `text` when it is `prefix`, a name without '/', then `suffix`; "" otherwise.
  static std::string name_between(const std::string& text, const std::string& prefix, const std::string& suffix);

  /// Records a version that stage() wrote, for discard_staged().
  void staged(const std::string& version) { m_staged = version; }

  const HostRoot& m_root;
  InstallTarget m_target;
  std::string m_link_name;          ///< the destination's file name
  std::string m_dest_parent;        ///< the destination's directory (host path)
  std::string m_versions_path;      ///< <state>/<component> (host path)
  std::vector<std::string> m_made;  ///< the directories this object made (host paths), for discard_staged()
  /// The content index of each version (content_indexes.hpp), for the kinds that write one (file): one entry, the
  /// version's file, so that a staged copy is checked against the payload without reading it.
  ContentIndexes m_indexes;

 private:
  void switch_link(const std::string& version);

  std::string m_staged;
  bool m_committed = false;
  std::string m_old_link;
};

}  // namespace hoist
