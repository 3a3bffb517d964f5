#include "sysext_merge.hpp"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <optional>

#include "hoist/sys/atomic_symlink.hpp"
#include "hoist/sys/mount_namespace.hpp"
#include "hoist/util/error.hpp"
#include "hoist/util/file_io.hpp"
#include "hoist/util/text.hpp"
#include "hoist/verify/os_release.hpp"
#include "hoist/verify/sysext_image.hpp"

namespace hoist {

namespace {

constexpr size_t k_release_cap = 1U << 20U;

// The merged release file and where it was read.
struct MergedRelease {
  std::optional<std::string> text;
  std::string where;
};

MergedRelease read_merged(const HostRoot& root, const std::string& namespace_path, const std::string& path) {
  auto host = MountNamespace::open(namespace_path);
  auto own = MountNamespace::own();
  if (host && !(own && host->same_as(*own))) {
    auto text = host->read_file(path, k_release_cap);
    if (!text) {
      throw Failure(text.error().message);
    }
    return {std::move(*text), "in the host's mount namespace"};
  }
  if (!host) {
    spdlog::warn(
        "sysext: cannot open the host's mount namespace ({}); looking for the merged extension under the host root, "
        "which shows the host's /usr overlay only when this process shares the host's mounts",
        host.error().message);
  }
  const std::string where = "under " + in_quotes(root.path().string());
  auto fd = root.open(path, k_read_flags);
  if (!fd) {
    if (fd.error().errnum == ENOENT) {
      return {std::nullopt, where};
    }
    throw Failure(fd.error().message);
  }
  auto text = read_fd(fd->get(), root.display(path), k_release_cap);
  if (!text) {
    throw Failure(text.error().message);
  }
  return {std::move(*text), where};
}

// What a release says of its version, for messages: SYSEXT_VERSION_ID, else VERSION_ID.
std::string version_of(std::string_view text, const std::string& source) {
  try {
    const OsRelease release = parse_os_release(text, source);
    for (const char* key : {"SYSEXT_VERSION_ID", "VERSION_ID"}) {
      if (auto value = release_field(release, key)) {
        return std::string(key) + "=" + escaped(*value);
      }
    }
    return "no version";
  } catch (const Error&) {
    return "unreadable";
  }
}

}  // namespace

HealthLook look_at_sysext_merge(const HostRoot& root, const std::string& namespace_path,
                                const std::string& destination) {
  HealthLook look;
  look.final = true;
  try {
    const bool raw = destination.ends_with(".raw");
    const std::string name =
        sysext_image_name(destination, raw ? SysextImageType::squashfs : SysextImageType::directory);
    auto parent = root.open_parent(destination);
    if (!parent) {
      throw Failure(parent.error().message);
    }
    auto link = read_symlink(parent->first.get(), parent->second, root.display(destination));
    if (!link) {
      look.detail = "no extension is linked at " + in_quotes(root.display(destination)) + ": " + link.error().message;
      return look;
    }
    const std::string image =
        link->starts_with('/') ? *link : destination.substr(0, destination.rfind('/') + 1) + *link;
    const ExtensionRelease expected = read_installed_extension_release(root, image, name);
    const std::string merged_path = "/" + expected.path;
    const MergedRelease merged = read_merged(root, namespace_path, merged_path);
    const std::string wanted = version_of(expected.text, root.display(image) + ":" + expected.path);
    if (!merged.text) {
      look.detail = "extension '" + escaped(name) + "' (" + wanted + ") is not merged: " + in_quotes(merged_path) +
                    " does not exist " + merged.where + " after the refresh (systemd-sysext skipped the image)";
    } else if (*merged.text != expected.text) {
      look.detail = "extension '" + escaped(name) + "' is not merged: " + in_quotes(merged_path) + " " + merged.where +
                    " is another release (" + version_of(*merged.text, merged_path) + ") than that of " +
                    in_quotes(root.display(image)) + " (" + wanted + ")";
    } else {
      look.passed = true;
      look.final = false;
      look.detail = "extension '" + escaped(name) + "' (" + wanted + ") is merged: " + in_quotes(merged_path) + " " +
                    merged.where + " is its release file";
    }
  } catch (const Error& e) {
    look.detail = "cannot tell whether the extension linked at " + in_quotes(destination) + " is merged: " + e.what();
  }
  return look;
}

}  // namespace hoist
