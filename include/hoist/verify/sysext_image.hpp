#pragma once

#include <string>
#include <string_view>

#include "hoist/sys/host_root.hpp"
#include "hoist/transfer/payload.hpp"
#include "hoist/verify/os_release.hpp"

namespace hoist {

/// What a system extension payload is: systemd-sysext merges a directory or a
/// `.raw` disk image holding one of these filesystems.
enum class SysextImageType { directory, squashfs, erofs };

/// The type of a sysext payload: a directory, or a file with the squashfs
/// (`hsqs` at 0) or erofs (0xE0F5E1E2 at 1024) superblock magic. Throws
/// UsageError (exit 2) naming the file when it is neither.
SysextImageType detect_sysext_image(const Payload& payload);

std::string_view to_string(SysextImageType type);

/// The name systemd-sysext gives the image linked at `destination`: the file
/// name without `.raw` for an image, the file name itself for a directory
/// (systemd ignores a directory whose name ends in `.raw`, and a `.raw` that
/// is not a regular file). Throws UsageError when the destination's name does
/// not fit the payload's type, or is not a valid image name.
std::string sysext_image_name(std::string_view destination, SysextImageType type);

/// An extension's release file: its fields, and the path it was read from inside the image.
struct ExtensionRelease {
  OsRelease fields;
  std::string path;  ///< `usr/lib/extension-release.d/extension-release.<name>`, or the file used in its place
  std::string text;  ///< the file's bytes, as a merged `/usr` shows them
};

/// The extension-release of a sysext payload, read from inside it:
/// `usr/lib/extension-release.d/extension-release.<image_name>`, resolved
/// inside the image (its symlinks cannot leave it); when there is none, the one
/// regular `extension-release.<other name>` there whose xattr
/// `user.extension-release.strict` is a false boolean, as systemd-sysext does
/// for a renamed image. An image file is mounted read-only on a loop device,
/// detached from every mount table, for as long as the read takes. Throws
/// hoist::Error(verification) when the image has no such file (or two of the
/// other kind), carries `usr/lib/os-release` (which systemd-sysext refuses: an
/// extension must not replace the host's identity), or a release file systemd
/// would refuse to parse; hoist::Failure when the image cannot be mounted.
ExtensionRelease read_extension_release(const Payload& payload, SysextImageType type, std::string_view image_name);

/// The extension-release of the image installed at `image_path` (a host path under `root`: a directory, or a
/// squashfs or erofs image file), read as read_extension_release() reads a payload's. Throws as it does, and
/// hoist::Failure naming the path when it cannot be opened or is neither.
ExtensionRelease read_installed_extension_release(const HostRoot& root, const std::string& image_path,
                                                  std::string_view image_name);

/// The verification of a sysext payload before anything on the host changes:
/// its extension-release against the host's os-release, as systemd-sysext
/// would check it when merging (check_extension_release). Throws
/// hoist::Error(verification) naming the field that does not match.
void verify_sysext_payload(const HostRoot& root, const Payload& payload, std::string_view destination);

}  // namespace hoist
