#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "hoist/model/component.hpp"
#include "hoist/model/state.hpp"
#include "hoist/model/version_gate.hpp"
#include "hoist/sys/durable_tree.hpp"
#include "hoist/sys/host_root.hpp"
#include "hoist/transfer/content_index.hpp"
#include "hoist/transfer/payload.hpp"
#include "hoist/transfer/transfer.hpp"

namespace hoist {

/// Where one component lives on the host.
struct InstallTarget {
  std::string component;
  ComponentKind kind = ComponentKind::tree;
  std::string destination;  ///< host path
  std::string state_dir;    ///< host path of the state directory (`--state-dir`)
};

/// The staging name of a version's entry in its directory, `.<entry>.partial`:
/// made there, renamed to `<entry>` once complete and durable.
std::string partial_name(std::string_view entry);

/// What an interrupted run leaves among versions: a staging (`.*.partial`) or
/// a temporary file (k_temp_prefix, sys/temporary_name.hpp).
bool is_staging_leftover(std::string_view name);

/// `dir/name` of host paths, whether or not `dir` ends with '/'.
std::string join_host_path(const std::string& dir, std::string_view name);

/// One component's changes to the host, in the phases of a run, so that a run
/// of several components can stage them all before it switches any:
///
///   clean_leftovers → stage → commit (the switch) → [undo_commit | discard_staged]
///
/// Every step is atomic and durable on its own: a SIGKILL between or inside any
/// of them leaves the host on a complete version, and the next run's
/// clean_leftovers() removes (tree, file) or undoes (sync) what was left.
/// Errors throw hoist::Error; nothing is logged below info level steps.
class Installer {
 public:
  virtual ~Installer() = default;

  /// Whether the host has `version` (the state's current) whole: `current` (tree)
  /// or the file's link (file) points at a complete copy of it; the destination
  /// matches the payload (sync; without a payload: the backup dir exists).
  virtual Integrity integrity(const std::string& version, const Payload* payload) = 0;

  /// The version the host's own commit points name as current: the `current` link (tree), the destination's
  /// link (file, sysext), or the sync journal read against `state` (an `undo.<v>@<state's current>` that a
  /// killed run completed; the target of `state.rollback` once its backup was taken into use). "" when they
  /// name no complete version that hoist installed. Reads only.
  virtual std::string host_current(const ComponentState& state) = 0;

  /// Removes what killed runs left: partial stagings, temporary links, trash of
  /// removed versions; for sync, undoes a half-done sync or finishes a half-done
  /// rollback (then updates `state` and returns true: it must be saved).
  virtual bool clean_leftovers(ComponentState* state) = 0;

  /// Whether the host holds `version` complete among the component's versions: the name that only the rename of a
  /// durable staging makes (tree, file, sysext), whether or not anything points at it (a version `hoist stage` left,
  /// or a kept one). The sync kind stages nothing: false. Reads only.
  virtual bool has_complete(const std::string& version) = 0;

  /// Whether the complete `version` (has_complete()) holds exactly the payload: a dry comparison of the payload
  /// with it, its content index vouching for its files while they are the inodes it indexed, and the payload's
  /// side taken from `options` (the verified SHA256SUMS) where they list it. With both, nothing is read. What
  /// stage() asks before it reuses a version an earlier run staged. Reads only; false for sync.
  virtual bool holds(const std::string& version, const Payload& payload, const TransferOptions& options) = 0;

  /// The tree that the transfer of a directory payload compares it with, and whose files it keeps where they hold
  /// the payload's bytes: the current version's directory (tree kind, beside which stage() writes), or the
  /// destination (sync kind, for `installed`, the state's current version), with its content index. nullopt when
  /// there is none to compare with, or no index of it that parses: a first install, the file and sysext kinds.
  /// Reads only. What lets verification leave unread a payload file whose listed digest the installed side holds.
  [[nodiscard]] virtual std::optional<IndexedTree> installed_tree(const std::string& /*installed*/) {
    return std::nullopt;
  }
  /// Refuses what commit() would refuse at the destination, changing nothing: a `current` or `previous` that is
  /// not a symlink, or a destination that is not a directory (tree); a directory at the file's path (file); an
  /// image at the link's path that is not hoist's link (sysext); a destination that is not a directory, or is a
  /// mount point its backups cannot sit beside (sync). So that `hoist stage` decides before the drain what the
  /// switch would only find after it. Throws hoist::Failure naming the path.
  virtual void check_switch() = 0;

  /// Writes `version` beside what is installed, durably, without switching to
  /// it. A complete copy of `version` left by an earlier run is reused when it holds exactly the payload (holds());
  /// one that does not is removed and staged again. For sync, does nothing (the sync is the commit).
  virtual TransferStats stage(const Payload& payload, const std::string& version, const TransferOptions& options) = 0;

  /// The version that was at the destination before hoist and that stage()
  /// kept (file kind: k_pre_hoist_version), if it kept one.
  [[nodiscard]] virtual std::optional<std::string> adopted_version() const { return std::nullopt; }

  /// Before stage(): the security.selinux label the state recorded for the
  /// kept copies (ComponentState::selinux_label). Only the file kind keeps one.
  virtual void use_selinux_label(const std::string& /*label*/) {}

  /// The security.selinux label stage() gave the kept copy, for the state to
  /// record (file kind: the recorded one, else that of the file the first
  /// switch replaced), or "".
  [[nodiscard]] virtual std::string selinux_label() const { return {}; }

  /// Makes `version` the current one: the atomic switch (tree, file), or the
  /// sync itself, keeping the replaced entries (sync). `installed` is the
  /// state's current version ("" before the first install). Returns what the
  /// sync changed (zero for the others: their work was stage()).
  virtual TransferStats commit(const Payload& payload, const std::string& version, const std::string& installed,
                               const TransferOptions& options) = 0;

  /// Called once every component of the run is switched and its state saved:
  /// drops what only an undo_commit() needed (sync: the older backups).
  virtual void finish() {}

  /// Undoes the last commit() of this object (a later component failed).
  virtual void undo_commit() = 0;

  /// Removes a version that stage() of this object wrote and that was never
  /// switched to.
  virtual void discard_staged() = 0;

  /// What an upgrade from `installed` to the payload would change (dry run).
  virtual TransferStats preview(const Payload& payload, const std::string& installed,
                                const TransferOptions& options) = 0;

  /// Checks that `version` can be rolled back to from `current`; throws
  /// UsageError naming a missing or incomplete version.
  virtual void check_rollback(const std::string& version, const std::string& current) = 0;

  /// Switches back to the kept `version` (tree, file: re-points the link and,
  /// for tree, `previous` to `current`; sync: restores the backup).
  virtual void rollback(const std::string& version, const std::string& current) = 0;

  /// Removes the destination's link, durably, so that no version is current; the kept versions stay (sysext: a
  /// first install that systemd-sysext did not merge leaves nothing linked). Throws hoist::Failure for the kinds
  /// that have no link of their own to remove (tree, sync).
  virtual void withdraw();

  /// Removes the kept `version` from the host (the --keep garbage collection).
  virtual void remove_version(const std::string& version) = 0;
};

std::unique_ptr<Installer> make_tree_installer(const HostRoot& root, InstallTarget target, Durability durability);
std::unique_ptr<Installer> make_file_installer(const HostRoot& root, InstallTarget target, Durability durability);
std::unique_ptr<Installer> make_sync_installer(const HostRoot& root, InstallTarget target, Durability durability);
/// The sysext kind (src/install/sysext_installer.cpp).
std::unique_ptr<Installer> make_sysext_installer(const HostRoot& root, InstallTarget target, Durability durability);

/// The installer for `target.kind`.
std::unique_ptr<Installer> make_installer(const HostRoot& root, InstallTarget target, Durability durability);

}  // namespace hoist
