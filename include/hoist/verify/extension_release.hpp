#pragma once

#include <string>
#include <string_view>

#include "hoist/verify/os_release.hpp"

namespace hoist {

/// The architecture name systemd gives a uname(2) machine (`x86_64` →
/// `x86-64`, `aarch64` → `arm64`, `i686` → `x86`, `ppc64le` → `ppc64-le`…);
/// a machine systemd has no other name for is returned as it is.
std::string systemd_architecture(std::string_view machine);

/// The host's architecture as systemd-sysext compares it: the running
/// kernel's machine (uname(2) is the host's: a container shares its kernel).
std::string native_architecture();

/// The path of a system extension's release file inside the image.
std::string extension_release_path(std::string_view image_name);

/// Checks an extension's release file against the host's os-release the way
/// systemd 252's systemd-sysext does (extension_release_validate() in its
/// src/shared/extension-release.c, and the host checks of src/sysext/sysext.c),
/// for the host scope `system`:
///
/// 0. the host's `ID` must be set: without one systemd-sysext merges nothing;
/// 1. `SYSEXT_SCOPE`, when assigned (even `SYSEXT_SCOPE=`), must list `system`;
/// 2. `ARCHITECTURE`, when set and not `_any`, must be `architecture`;
/// 3. `ID` must be set: `_any` matches every host and ends the check; else it
///    must be the host's `ID` or one of the words of its `ID_LIKE` (systemd 252
///    compares `ID` only; newer systemd also `ID_LIKE`);
/// 4. a host with neither `VERSION_ID` nor `SYSEXT_LEVEL` (a rolling release)
///    matches; else when both sides set `SYSEXT_LEVEL`, they must be equal;
///    else when the host sets `VERSION_ID`, the extension's `VERSION_ID` must
///    be set and equal.
///
/// Throws hoist::Error with ExitCode::verification (exit 5) whose message names
/// the field, both values and `source` (where the release file was read).
void check_extension_release(const OsRelease& host, const OsRelease& extension, std::string_view image_name,
                             std::string_view architecture, std::string_view source);

}  // namespace hoist
