#include "hoist/verify/extension_release.hpp"

#include <sys/utsname.h>

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "hoist/util/error.hpp"
#include "hoist/util/text.hpp"

namespace hoist {

namespace {

// The words of a list value, split at the blanks systemd splits at (space, tab, LF, CR).
std::vector<std::string_view> words(std::string_view text) {
  std::vector<std::string_view> result;
  constexpr std::string_view k_blanks = " \t\n\r";
  for (size_t start = text.find_first_not_of(k_blanks); start != std::string_view::npos;
       start = text.find_first_not_of(k_blanks, start)) {
    size_t end = std::min(text.find_first_of(k_blanks, start), text.size());
    result.push_back(text.substr(start, end - start));
    start = end;
  }
  return result;
}

[[noreturn]] void refuse_extension(std::string_view image_name, std::string_view source, const std::string& why) {
  throw Error(ExitCode::verification,
              "extension " + in_quotes(image_name) + " does not match the host (" + std::string(source) + "): " + why);
}

}  // namespace

std::string systemd_architecture(std::string_view machine) {
  // The names of systemd's src/basic/architecture.c for the machines Kubernetes
  // nodes run on; uname's spelling is the key.
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 16> k_names{{
      {"x86_64", "x86-64"},
      {"i386", "x86"},
      {"i486", "x86"},
      {"i586", "x86"},
      {"i686", "x86"},
      {"aarch64", "arm64"},
      {"aarch64_be", "arm64-be"},
      {"armv7l", "arm"},
      {"armv8l", "arm"},
      {"armv6l", "arm"},
      {"ppc64le", "ppc64-le"},
      {"ppc64", "ppc64"},
      {"s390x", "s390x"},
      {"riscv64", "riscv64"},
      {"loongarch64", "loongarch64"},
      {"mips64", "mips64"},
  }};
  for (const auto& [uname_name, systemd_name] : k_names) {
    if (machine == uname_name) {
      return std::string(systemd_name);
    }
  }
  return std::string(machine);
}

std::string native_architecture() {
  utsname name{};
  if (::uname(&name) != 0) {
    return {};
  }
  return systemd_architecture(name.machine);
}

std::string extension_release_path(std::string_view image_name) {
  return "usr/lib/extension-release.d/extension-release." + std::string(image_name);
}

void check_extension_release(const OsRelease& host, const OsRelease& extension, std::string_view image_name,
                             std::string_view architecture, std::string_view source) {
  // A host without an ID takes no extension at all: systemd-sysext stops before it looks at one.
  const std::string_view host_id = release_value(host, "ID");
  if (host_id.empty()) {
    refuse_extension(image_name, source,
                     "the host's os-release sets no ID, and systemd-sysext merges no extension then");
  }

  // Set, even to nothing, SYSEXT_SCOPE replaces the default scopes (system and portable).
  if (const auto scope = release_field(extension, "SYSEXT_SCOPE")) {
    const auto scopes = words(*scope);
    if (std::find(scopes.begin(), scopes.end(), "system") == scopes.end()) {
      refuse_extension(image_name, source,
                       "SYSEXT_SCOPE is " + in_quotes(*scope) + ", which does not include 'system'");
    }
  }

  const std::string_view arch = release_value(extension, "ARCHITECTURE");
  if (!arch.empty() && arch != "_any" && arch != architecture) {
    refuse_extension(image_name, source,
                     "ARCHITECTURE is " + in_quotes(arch) + ", the host's architecture is " + in_quotes(architecture));
  }

  const std::string_view id = release_value(extension, "ID");
  if (id.empty()) {
    refuse_extension(image_name, source,
                     "ID is not set; it must be the host's ID " + in_quotes(host_id) + " or '_any'");
  }
  if (id == "_any") {
    return;
  }
  const std::string_view host_id_like = release_value(host, "ID_LIKE");
  const auto like = words(host_id_like);
  if (id != host_id && std::find(like.begin(), like.end(), id) == like.end()) {
    refuse_extension(image_name, source,
                     "ID is " + in_quotes(id) + ", the host's ID is " + in_quotes(host_id) +
                         (host_id_like.empty() ? std::string() : " (ID_LIKE " + in_quotes(host_id_like) + ")"));
  }

  const std::string_view host_version = release_value(host, "VERSION_ID");
  const std::string_view host_level = release_value(host, "SYSEXT_LEVEL");
  if (host_version.empty() && host_level.empty()) {
    return;  // a rolling release: the ID is all there is to match
  }
  const std::string_view level = release_value(extension, "SYSEXT_LEVEL");
  if (!host_level.empty() && !level.empty()) {
    if (level != host_level) {
      refuse_extension(image_name, source,
                       "SYSEXT_LEVEL is " + in_quotes(level) + ", the host's SYSEXT_LEVEL is " + in_quotes(host_level));
    }
    return;
  }
  if (!host_version.empty()) {
    const std::string_view version = release_value(extension, "VERSION_ID");
    if (version.empty()) {
      refuse_extension(image_name, source,
                       "VERSION_ID is not set (nor a SYSEXT_LEVEL the host has); the host's VERSION_ID is " +
                           in_quotes(host_version));
    }
    if (version != host_version) {
      refuse_extension(image_name, source,
                       "VERSION_ID is " + in_quotes(version) + ", the host's VERSION_ID is " + in_quotes(host_version));
    }
  }
}

}  // namespace hoist
