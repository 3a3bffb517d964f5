#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "hoist/sys/host_root.hpp"
#include "hoist/sys/mount_namespace.hpp"
#include "hoist/sys/remount_one.hpp"
#include "hoist/util/expected.hpp"
#include "hoist/util/fd.hpp"

namespace hoist {

/// Where a mount was found and changed.
enum class MountView {
  host,  ///< the host's mount namespace (entered by the helper)
  own,   ///< this process's mount namespace
};

/// One mount that holds a path hoist writes.
struct HeldMount {
  std::string host_path;  ///< the path asked for
  MountView view = MountView::own;
  MountEntry entry;      ///< the mount, as the table of `view` showed it before any change
  bool changed = false;  ///< false: it was writable already (or listed before)
  RemountScope scope = RemountScope::mount;
};

/// The mount of `mounts` seen in `view` whose id is `id`, or nullptr.
const HeldMount* find_held_mount(const std::vector<HeldMount>& mounts, MountView view, int id);

/// Makes the mounts that hold some host paths writable for as long as it
/// lives, and puts back read-only what it changed: on restore(), on
/// destruction, and even when this process is killed (SIGKILL included).
///
/// The remounts of the mount namespace that matters, the host's when given,
/// else our own, are made by a forked helper process: a forked child is
/// single-threaded, so setns(2) works whatever threads this process has, and
/// it holds the remounts, reading a pipe from this process. When that pipe
/// closes, by restore() or because this process died, it remounts read-only
/// and exits. The helper ignores SIGTERM and SIGINT, which a terminal or a
/// shutdown sends to the whole process group, until it has put things back.
///
/// With a host namespace, this process writes through its own copies of the
/// host's mounts (a SUC pod's `/host` is a recursive bind made when the pod
/// started, with propagation off): the kernel copies a mount's flags but not
/// later changes to them, so a copy that is read-only here is made writable
/// here too (its own flag only), and put back first. Each path's nearest
/// existing directory must be the same inode in both views, else the pod does
/// not see the host's mount at all (mounted after the pod started) and writing
/// through `root` would land on the wrong filesystem: that is refused.
class RemountHolder {
 public:
  /// `host_namespace`: the host's mount namespace, or nullptr to work in our
  /// own. `root` is the host root (resolving paths in our own namespace); in
  /// the host's namespace the helper resolves them from its root `/`.
  ///
  /// `left_writable`: mounts an earlier holder of this process changed and
  /// could not put back (restore() failed). One of them found writable again,
  /// by its id in the same view, counts as changed: it is put back read-only
  /// with the scope it was made writable with, as if this holder had made it so.
  static Expected<RemountHolder> engage(const HostRoot& root, const MountNamespace* host_namespace,
                                        const std::vector<std::string>& host_paths,
                                        const std::vector<HeldMount>& left_writable = {});

  RemountHolder(RemountHolder&& other) noexcept;
  RemountHolder& operator=(RemountHolder&&) = delete;
  RemountHolder(const RemountHolder&) = delete;
  /// restore(), its errors dropped: call restore() to see them.
  ~RemountHolder();

  /// The mounts found, in the order of the paths.
  [[nodiscard]] const std::vector<HeldMount>& mounts() const noexcept { return m_mounts; }

  /// Puts back read-only what was made writable (our own copies first, then
  /// the helper's), and waits for the helper to exit. Later calls do nothing.
  Expected<void> restore();

 private:
  struct LocalChange {
    MountEntry entry;
    RemountScope scope;
    Fd mount_root;
  };
  RemountHolder() = default;

  pid_t m_helper = -1;
  Fd m_command;  ///< write end: closing it tells the helper to restore
  Fd m_report;   ///< read end: the helper's report lines
  std::vector<HeldMount> m_mounts;
  std::vector<LocalChange> m_local;
};

}  // namespace hoist
