#pragma once

#include <string>

#include "hoist/sys/host_root.hpp"

namespace hoist {

/// The boot id of the host: its /proc/sys/kernel/random/boot_id read inside the
/// host root, or this kernel's own when the root has none (a container shares
/// the host's kernel, so both are the host's); "" when neither can be read.
/// Recorded in the state, so that a run after a reboot can tell it came after.
std::string read_boot_id(const HostRoot& root);

}  // namespace hoist
