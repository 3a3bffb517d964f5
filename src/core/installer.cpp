#include "hoist/core/installer.hpp"

#include <stdexcept>

namespace hoist {

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
