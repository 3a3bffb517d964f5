#include "hoist/host/writable_mounts.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>

#include "hoist/sys/mount_namespace.hpp"
#include "hoist/util/error.hpp"

namespace hoist {

namespace {

std::string parent_of(const std::string& path) {
  const std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? std::string("/") : parent;
}

const char* view_name(MountView view) {
  return view == MountView::host ? "in the host's mount namespace" : "in this process's mount namespace";
}

// The host's mount namespace, or nullopt (logged) when this process works in
// its own: not a hostPID pod, no CAP_SYS_PTRACE over PID 1, or on the host itself.
std::optional<MountNamespace> host_namespace(const std::string& path) {
  auto own = MountNamespace::own();
  auto host = MountNamespace::open(path);
  if (!host) {
    spdlog::warn(
        "remount: cannot open the host's mount namespace ({}); remounting in this process's own mount "
        "namespace, whose changes the host sees only when it is the host's",
        host.error().message);
    return std::nullopt;
  }
  if (own && host->same_as(*own)) {
    spdlog::info("remount: '{}' is this process's own mount namespace ({}): remounting here", path, own->name());
    return std::nullopt;
  }
  spdlog::info("remount: entering the host's mount namespace '{}' ({}) in a helper process", path, host->name());
  return std::move(*host);
}

}  // namespace

std::vector<std::string> paths_written(ComponentKind kind, const std::string& destination,
                                       const std::string& component_dir) {
  std::vector<std::string> paths;
  switch (kind) {
    case ComponentKind::tree: paths = {destination}; break;
    // The destination's backup directory is its sibling.
    case ComponentKind::sync: paths = {destination, parent_of(destination)}; break;
    // The link is in the destination's directory, the copies in the state directory.
    default: paths = {parent_of(destination)}; break;
  }
  paths.push_back(component_dir);
  paths.erase(std::unique(paths.begin(), paths.end()), paths.end());
  return paths;
}

WritableMounts::WritableMounts(const HostRoot& root, const std::vector<std::string>& host_paths,
                               const std::string& namespace_path, const std::vector<HeldMount>& left_writable) {
  const std::optional<MountNamespace> host = host_namespace(namespace_path);
  auto holder = RemountHolder::engage(root, host ? &*host : nullptr, host_paths, left_writable);
  if (!holder) {
    throw Failure(holder.error().message);
  }
  m_holder.emplace(std::move(*holder));
  bool any = false;
  for (const HeldMount& mount : m_holder->mounts()) {
    if (!mount.changed) {
      spdlog::debug("remount: {} holds '{}' and is writable {}", mount.entry.describe(), mount.host_path,
                    view_name(mount.view));
      continue;
    }
    any = true;
    if (find_held_mount(left_writable, mount.view, mount.entry.id) != nullptr) {
      spdlog::warn(
          "remount: {} is still writable {} since it could not be put back; it is put back read-only with "
          "this run's other mounts",
          mount.entry.describe(), view_name(mount.view));
    } else if (mount.scope == RemountScope::filesystem) {
      spdlog::warn(
          "remount: made {} writable {} for '{}': the filesystem itself was read-only and is remounted "
          "read-write; every mount of it whose own flag is rw can be written until it is put back",
          mount.entry.describe(), view_name(mount.view), mount.host_path);
    } else {
      spdlog::info("remount: made {} writable {} for '{}' (this mount point only)", mount.entry.describe(),
                   view_name(mount.view), mount.host_path);
    }
  }
  if (!any) {
    spdlog::info("remount: every mount hoist writes to is writable already");
  }
}

WritableMounts::~WritableMounts() {
  try {
    restore();
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
  }
}

void WritableMounts::restore() {
  if (!m_holder) {
    return;
  }
  std::vector<HeldMount> changed;
  for (const HeldMount& mount : m_holder->mounts()) {
    if (mount.changed) {
      changed.push_back(mount);
    }
  }
  auto restored = m_holder->restore();
  m_holder.reset();
  if (!restored) {
    m_left_writable = std::move(changed);
    throw Failure("failed to put a mount back read-only: " + restored.error().message);
  }
  for (const HeldMount& mount : changed) {
    spdlog::info("remount: {} is read-only again {}", mount.entry.describe(), view_name(mount.view));
  }
}

}  // namespace hoist
