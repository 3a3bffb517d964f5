#pragma once

#include <string>

#include "hoist/host/health_check.hpp"
#include "hoist/sys/host_root.hpp"

namespace hoist {

/// One look for the `sysext:DEST` check (docs/sysext.md, "System extensions (sysext)"): whether the extension linked at
/// the host path `destination` is the one merged. The release file of the image the link names
/// (read_installed_extension_release()) must be what the merged `/usr/lib/extension-release.d/` shows, byte for
/// byte, in the host's mount namespace (`namespace_path`, entered by a helper process, since the overlay on the
/// host's `/usr` is the host's mount and is not seen under `/host`); when that namespace cannot be opened or is this
/// process's own, the file is read under `root`, and a warning says so. A failure is `final`: the refresh is over
/// when the checks run, and waiting merges nothing.
HealthLook look_at_sysext_merge(const HostRoot& root, const std::string& namespace_path,
                                const std::string& destination);

}  // namespace hoist
