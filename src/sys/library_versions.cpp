#include "hoist/sys/library_versions.hpp"

#include <archive.h>
#include <fmt/format.h>
#include <libmount.h>
#include <openssl/crypto.h>
#include <spdlog/version.h>

#include <CLI/Version.hpp>
#include <nlohmann/json.hpp>

#ifndef HOIST_VERSION
#error "HOIST_VERSION must be defined by the build"
#endif
#ifndef HOIST_LIBSYSTEMD_VERSION
#define HOIST_LIBSYSTEMD_VERSION "unknown"
#endif
#ifndef HOIST_SDBUSCPP_VERSION
#define HOIST_SDBUSCPP_VERSION "unknown"
#endif

namespace hoist {

std::string hoist_version() { return HOIST_VERSION; }

std::vector<LibraryVersion> linked_library_versions() {
  const char* mount_version = nullptr;
  mnt_get_library_version(&mount_version);
  // archive_version_details() also names the compression libraries inside it.
  std::string archive = archive_version_details();
  if (archive.starts_with("libarchive ")) {
    archive.erase(0, 11);
  }
  std::string openssl = OpenSSL_version(OPENSSL_VERSION);
  if (openssl.starts_with("OpenSSL ")) {
    openssl.erase(0, 8);
  }
  return {
      {"libarchive", archive},
      {"openssl", openssl},
      {"libmount", mount_version != nullptr ? mount_version : "unknown"},
      {"libsystemd (sd-bus)", HOIST_LIBSYSTEMD_VERSION},
      {"sdbus-c++", HOIST_SDBUSCPP_VERSION},
      {"CLI11", CLI11_VERSION},
      {"spdlog", fmt::format("{}.{}.{}", SPDLOG_VER_MAJOR, SPDLOG_VER_MINOR, SPDLOG_VER_PATCH)},
      {"fmt", fmt::format("{}.{}.{}", FMT_VERSION / 10000, FMT_VERSION / 100 % 100, FMT_VERSION % 100)},
      {"nlohmann-json", fmt::format("{}.{}.{}", NLOHMANN_JSON_VERSION_MAJOR, NLOHMANN_JSON_VERSION_MINOR,
                                    NLOHMANN_JSON_VERSION_PATCH)},
  };
}

}  // namespace hoist
