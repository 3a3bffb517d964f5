#include "hoist/install/installer.hpp"

#include <stdexcept>

#include "hoist/sys/atomic_file.hpp"
#include "hoist/util/error.hpp"

namespace hoist {

std::string partial_name(std::string_view entry) {
  return "." + std::string(entry) + ".partial";
}

bool is_staging_leftover(std::string_view name) {
  return name.starts_with(k_temp_prefix) || (name.starts_with('.') && name.ends_with(".partial"));
}

std::string join_host_path(const std::string& dir, std::string_view name) {
  return dir.ends_with('/') ? dir + std::string(name) : dir + "/" + std::string(name);
}

void Installer::withdraw() {
  throw Failure("cannot withdraw the current version: this kind has no link of its own to remove");
}

std::unique_ptr<Installer> make_installer(const HostRoot& root, InstallTarget target, Durability durability) {
  switch (target.kind) {
    case ComponentKind::tree: return make_tree_installer(root, std::move(target), durability);
    case ComponentKind::file: return make_file_installer(root, std::move(target), durability);
    case ComponentKind::sync: return make_sync_installer(root, std::move(target), durability);
    case ComponentKind::sysext: return make_sysext_installer(root, std::move(target), durability);
  }
  throw std::logic_error("unknown component kind");
}

}  // namespace hoist
