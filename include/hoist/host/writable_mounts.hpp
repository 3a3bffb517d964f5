#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hoist/model/component.hpp"
#include "hoist/sys/host_root.hpp"
#include "hoist/sys/remount_holder.hpp"

namespace hoist {

/// The host paths a component of `kind` writes (docs/how-it-works.md, "On the host"): its
/// destination, or the directory that holds the destination's link, and its
/// directory under the state directory.
std::vector<std::string> paths_written(ComponentKind kind, const std::string& destination,
                                       const std::string& component_dir);

/// The mounts a run writes to, made writable for the run (`--remount`;
/// docs/host-actions.md, "Remount"), in the host's mount namespace when this process can
/// enter it (`namespace_path`, /proc/1/ns/mnt in a hostPID pod), else in its
/// own, which the log says. Read-only again on restore() and, at the latest,
/// on destruction (so also after a failure or SIGTERM), and even after a
/// SIGKILL of this process (RemountHolder's helper).
class WritableMounts {
 public:
  /// Finds the mounts of `host_paths` and makes the read-only ones writable,
  /// logging each. Throws hoist::Failure when a mount cannot be remounted (a
  /// read-only filesystem such as squashfs), or when the host's mount is not
  /// the one this process would write through.
  /// `left_writable` (from left_writable() of an earlier one whose restore()
  /// failed): mounts still writable that this one puts back read-only too.
  WritableMounts(const HostRoot& root, const std::vector<std::string>& host_paths, const std::string& namespace_path,
                 const std::vector<HeldMount>& left_writable = {});
  WritableMounts(const WritableMounts&) = delete;
  WritableMounts& operator=(const WritableMounts&) = delete;
  /// restore(), logging (not throwing) its error.
  ~WritableMounts();

  /// Puts the mounts back read-only, logging each. Throws hoist::Failure when
  /// one cannot be (a file still open for writing on a filesystem-wide remount).
  void restore();

  /// After a restore() that failed: the mounts it had made writable, which
  /// may still be (a later WritableMounts puts them back).
  [[nodiscard]] const std::vector<HeldMount>& left_writable() const noexcept { return m_left_writable; }

 private:
  std::optional<RemountHolder> m_holder;
  std::vector<HeldMount> m_left_writable;
};

}  // namespace hoist
