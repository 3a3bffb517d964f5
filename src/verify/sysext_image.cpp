#include "hoist/verify/sysext_image.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>

#include "hoist/sys/detached_mount.hpp"
#include "hoist/sys/loop_device.hpp"
#include "hoist/sys/metadata.hpp"
#include "hoist/util/error.hpp"
#include "hoist/util/file_io.hpp"
#include "hoist/util/text.hpp"
#include "hoist/verify/extension_release.hpp"

namespace hoist {

namespace {

constexpr std::string_view k_raw_suffix = ".raw";

bool read_at(int fd, off_t offset, void* buffer, size_t size) {
  return ::pread(fd, buffer, size, offset) == static_cast<ssize_t>(size);
}

// systemd's image_name_is_valid(): a file name of at most 255 bytes, no
// leading dot. hoist adds what a name in an extension-release file name needs.
bool valid_image_name(std::string_view name) {
  if (name.empty() || name.size() > 255 || name.front() == '.') {
    return false;
  }
  return name.find_first_of("/\n") == std::string_view::npos;
}

// systemd's parse_boolean(): false for 0, no, n, false, f, off in any case; the value ends at a NUL, as C reads it.
bool is_false_boolean(std::string_view value) {
  value = value.substr(0, value.find('\0'));
  for (std::string_view word : {"0", "no", "n", "false", "f", "off"}) {
    if (value.size() == word.size() && std::equal(value.begin(), value.end(), word.begin(), [](char a, char b) {
          return std::tolower(static_cast<unsigned char>(a)) == b;
        })) {
      return true;
    }
  }
  return false;
}

constexpr std::string_view k_release_dir = "usr/lib/extension-release.d";
constexpr std::string_view k_release_prefix = "extension-release.";
constexpr std::string_view k_strict_xattr = "user.extension-release.strict";

/// A release file that an image carries under another name, and the name.
struct RenamedRelease {
  Fd fd;
  std::string path;
};

// systemd-sysext's fallback when an image has no release file of its own name (the image was renamed when it was
// deployed): the one regular file extension-release.<valid name> whose author allowed that with the xattr
// user.extension-release.strict set to a false boolean. Two such files are ambiguous, which systemd refuses.
std::optional<RenamedRelease> find_renamed_release(const HostRoot& root, const std::string& shown) {
  auto dir = root.open(k_release_dir, O_RDONLY | O_DIRECTORY);
  if (!dir) {
    return std::nullopt;
  }
  const int dirfd = dir->get();
  Fd listing(::dup(dirfd));
  DIR* stream = listing ? ::fdopendir(listing.get()) : nullptr;
  if (stream == nullptr) {
    throw Failure(system_message("list '" + shown + ":" + std::string(k_release_dir) + "'", errno));
  }
  listing.release();
  std::unique_ptr<DIR, int (*)(DIR*)> closer(stream, ::closedir);
  std::optional<RenamedRelease> found;
  while (const dirent* entry = ::readdir(stream)) {
    const std::string_view name = entry->d_name;
    if ((entry->d_type != DT_REG && entry->d_type != DT_UNKNOWN) || !name.starts_with(k_release_prefix) ||
        !valid_image_name(name.substr(k_release_prefix.size()))) {
      continue;
    }
    const std::string path = std::string(k_release_dir) + "/" + std::string(name);
    Fd fd(::openat(dirfd, entry->d_name, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK));
    struct stat st {};
    if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
      continue;
    }
    auto xattrs = read_xattrs(NodeRef{dirfd, entry->d_name, fd.get()}, shown + ":" + path);
    if (!xattrs) {
      throw Failure(xattrs.error().message);
    }
    const auto strict =
        std::find_if(xattrs->begin(), xattrs->end(), [](const Xattr& xattr) { return xattr.name == k_strict_xattr; });
    if (strict == xattrs->end() || !is_false_boolean(strict->value)) {
      continue;
    }
    if (found) {
      throw Error(ExitCode::verification, "sysext image '" + shown + "' has both '" + escaped(found->path) + "' and '" +
                                              escaped(path) + "' marked " + std::string(k_strict_xattr) +
                                              "=false: systemd-sysext refuses the ambiguity");
    }
    found = RenamedRelease{std::move(fd), path};
  }
  return found;
}

// Reads the release file inside an image whose root `root` resolves in.
ExtensionRelease read_release_in(const HostRoot& root, std::string_view image_name, const std::string& shown) {
  std::string release_path = extension_release_path(image_name);
  auto fd = root.open(release_path, O_RDONLY | O_NOCTTY | O_NONBLOCK);
  if (!fd && fd.error().errnum == ENOENT) {
    if (auto renamed = find_renamed_release(root, shown)) {
      spdlog::info("sysext image '{}' has no '{}'; using '{}', which allows another name", shown, release_path,
                   escaped(renamed->path));
      fd = std::move(renamed->fd);
      release_path = renamed->path;
    } else {
      throw Error(ExitCode::verification,
                  "sysext image '" + shown + "' has no '" + release_path +
                      "', nor another extension-release file marked " + std::string(k_strict_xattr) +
                      "=false: systemd-sysext would refuse it as extension '" + std::string(image_name) + "'");
    }
  }
  if (!fd) {
    throw Failure(fd.error().message);
  }
  struct stat st {};
  if (::fstat(fd->get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    throw Error(ExitCode::verification, "'" + release_path + "' in sysext image '" + shown + "' is not a regular file");
  }
  const std::string text = read_fd(fd->get(), shown + ":" + release_path, 1U << 20U).value();
  // systemd-sysext refuses an extension that carries the OS's own identity.
  if (auto os_release = root.open("usr/lib/os-release", O_PATH)) {
    throw Error(ExitCode::verification,
                "sysext image '" + shown + "' contains 'usr/lib/os-release', which systemd-sysext refuses");
  }
  return {parse_os_release(text, shown + ":" + release_path), release_path, text};
}

// The filesystem of an image file by its superblock magic; nullopt when it is neither.
std::optional<SysextImageType> image_file_type(int fd) {
  std::array<unsigned char, 4> magic{};
  if (read_at(fd, 0, magic.data(), magic.size()) && std::memcmp(magic.data(), "hsqs", 4) == 0) {
    return SysextImageType::squashfs;
  }
  // EROFS_SUPER_MAGIC_V1, little-endian, at EROFS_SUPER_OFFSET.
  constexpr std::array<unsigned char, 4> k_erofs{0xE2, 0xE1, 0xF5, 0xE0};
  if (read_at(fd, 1024, magic.data(), magic.size()) && magic == k_erofs) {
    return SysextImageType::erofs;
  }
  return std::nullopt;
}

// Reads the release file of the image file `image` (of filesystem `type`), mounted read-only on a loop device,
// detached from every mount table, for as long as the read takes.
ExtensionRelease read_image_file_release(int image, SysextImageType type, std::string_view image_name,
                                         const std::string& shown) {
  auto loop = LoopDevice::attach_read_only(image, shown);
  if (!loop) {
    throw Failure(loop.error().message);
  }
  auto mounted = DetachedMount::mount_read_only(std::string(to_string(type)), loop->source(), shown);
  if (!mounted) {
    throw Failure(mounted.error().message);
  }
  // The detached mount has no path of its own: the image root is reached
  // through its descriptor, and resolved inside it like a host root.
  auto root = HostRoot::open("/proc/self/fd/" + std::to_string(mounted->fd()));
  if (!root) {
    throw Failure(root.error().message);
  }
  return read_release_in(*root, image_name, shown);
}

}  // namespace

SysextImageType detect_sysext_image(const Payload& payload) {
  const std::string shown = payload.path().string();
  if (payload.type() == PayloadType::directory) {
    return SysextImageType::directory;
  }
  const Fd fd = payload.reopen();
  if (const auto type = image_file_type(fd.get())) {
    return *type;
  }
  throw UsageError("sysext payload '" + shown + "' is neither a directory nor a squashfs or erofs image");
}

std::string_view to_string(SysextImageType type) {
  switch (type) {
    case SysextImageType::directory: return "directory";
    case SysextImageType::squashfs: return "squashfs";
    case SysextImageType::erofs: return "erofs";
  }
  return "?";
}

std::string sysext_image_name(std::string_view destination, SysextImageType type) {
  const size_t slash = destination.rfind('/');
  const std::string_view file = slash == std::string_view::npos ? destination : destination.substr(slash + 1);
  const bool raw = file.ends_with(k_raw_suffix);
  std::string name;
  if (type == SysextImageType::directory) {
    if (raw) {
      throw UsageError("destination '" + std::string(destination) +
                       "' ends in .raw, but the sysext payload is a directory: systemd-sysext ignores a directory "
                       "named *.raw; name the link without .raw");
    }
    name = std::string(file);
  } else {
    if (!raw) {
      throw UsageError("destination '" + std::string(destination) + "' must end in .raw for a " +
                       std::string(to_string(type)) + " image: systemd-sysext merges image files named <name>.raw");
    }
    name = std::string(file.substr(0, file.size() - k_raw_suffix.size()));
  }
  if (!valid_image_name(name)) {
    throw UsageError("destination '" + std::string(destination) + "' does not give a valid extension name");
  }
  return name;
}

ExtensionRelease read_extension_release(const Payload& payload, SysextImageType type, std::string_view image_name) {
  const std::string shown = payload.path().string();
  if (type == SysextImageType::directory) {
    auto root = HostRoot::open(payload.path());
    if (!root) {
      throw Failure(root.error().message);
    }
    return read_release_in(*root, image_name, shown);
  }
  // The image that staging copies (Payload::reopen), not whatever is at the path by then.
  const Fd image = payload.reopen();
  return read_image_file_release(image.get(), type, image_name, shown);
}

ExtensionRelease read_installed_extension_release(const HostRoot& root, const std::string& image_path,
                                                  std::string_view image_name) {
  const std::string shown = root.display(image_path);
  auto fd = root.open(image_path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (!fd) {
    throw Failure(fd.error().message);
  }
  struct stat st {};
  if (::fstat(fd->get(), &st) != 0) {
    throw Failure(system_message("stat " + in_quotes(shown), errno));
  }
  if (S_ISDIR(st.st_mode)) {
    auto image = HostRoot::open("/proc/self/fd/" + std::to_string(fd->get()));
    if (!image) {
      throw Failure(image.error().message);
    }
    return read_release_in(*image, image_name, shown);
  }
  const auto type = S_ISREG(st.st_mode) ? image_file_type(fd->get()) : std::nullopt;
  if (!type) {
    throw Failure("sysext image " + in_quotes(shown) + " is neither a directory nor a squashfs or erofs image");
  }
  return read_image_file_release(fd->get(), *type, image_name, shown);
}

void verify_sysext_payload(const HostRoot& root, const Payload& payload, std::string_view destination) {
  const SysextImageType type = detect_sysext_image(payload);
  const std::string name = sysext_image_name(destination, type);
  const ExtensionRelease extension = read_extension_release(payload, type, name);
  const OsRelease host = read_host_os_release(root);
  check_extension_release(host, extension.fields, name, native_architecture(),
                          payload.path().string() + ":" + extension.path);
  spdlog::debug("extension '{}' ({}) matches the host's os-release", name, to_string(type));
}

}  // namespace hoist
