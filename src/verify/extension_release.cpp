#include "hoist/verify/extension_release.hpp"

#include <sys/utsname.h>

#include <algorithm>
#include <array>
#include <sstream>
#include <utility>
#include <vector>

#include "hoist/util/error.hpp"

namespace hoist {

namespace {

std::vector<std::string> words(std::string_view text) {
  std::vector<std::string> result;
  std::istringstream in{std::string(text)};
  for (std::string word; in >> word;) {
    result.push_back(word);
  }
  return result;
}

[[noreturn]] void mismatch(std::string_view image_name, std::string_view source, const std::string& why) {
  throw Error(ExitCode::verification, "extension '" + std::string(image_name) + "' does not match the host (" +
                                          std::string(source) + "): " + why);
}

std::string quoted(std::string_view value) {
  return "'" + std::string(value) + "'";
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
  const std::string_view scope = release_value(extension, "SYSEXT_SCOPE");
  if (!scope.empty()) {
    const auto scopes = words(scope);
    if (std::find(scopes.begin(), scopes.end(), "system") == scopes.end()) {
      mismatch(image_name, source, "SYSEXT_SCOPE is " + quoted(scope) + ", which does not include 'system'");
    }
  }

  const std::string_view arch = release_value(extension, "ARCHITECTURE");
  if (!arch.empty() && arch != "_any" && arch != architecture) {
    mismatch(image_name, source,
             "ARCHITECTURE is " + quoted(arch) + ", the host's architecture is " + quoted(architecture));
  }

  const std::string_view id = release_value(extension, "ID");
  const std::string_view host_id = release_value(host, "ID");
  if (id.empty()) {
    mismatch(image_name, source, "ID is not set; it must be the host's ID " + quoted(host_id) + " or '_any'");
  }
  if (id == "_any") {
    return;
  }
  const std::string_view host_id_like = release_value(host, "ID_LIKE");
  const auto like = words(host_id_like);
  if (id != host_id && std::find(like.begin(), like.end(), id) == like.end()) {
    mismatch(image_name, source,
             "ID is " + quoted(id) + ", the host's ID is " + quoted(host_id) +
                 (host_id_like.empty() ? std::string() : " (ID_LIKE " + quoted(host_id_like) + ")"));
  }

  const std::string_view host_version = release_value(host, "VERSION_ID");
  const std::string_view host_level = release_value(host, "SYSEXT_LEVEL");
  if (host_version.empty() && host_level.empty()) {
    return;  // a rolling release: the ID is all there is to match
  }
  const std::string_view level = release_value(extension, "SYSEXT_LEVEL");
  if (!host_level.empty() && !level.empty()) {
    if (level != host_level) {
      mismatch(image_name, source,
               "SYSEXT_LEVEL is " + quoted(level) + ", the host's SYSEXT_LEVEL is " + quoted(host_level));
    }
    return;
  }
  if (!host_version.empty()) {
    const std::string_view version = release_value(extension, "VERSION_ID");
    if (version.empty()) {
      mismatch(
          image_name, source,
          "VERSION_ID is not set (nor a SYSEXT_LEVEL the host has); the host's VERSION_ID is " + quoted(host_version));
    }
    if (version != host_version) {
      mismatch(image_name, source,
               "VERSION_ID is " + quoted(version) + ", the host's VERSION_ID is " + quoted(host_version));
    }
  }
}

}  // namespace hoist
