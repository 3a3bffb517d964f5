#include "hoist/sys/library_versions.hpp"

#include <archive.h>
#include <blkid.h>
#include <fmt/format.h>
#include <gnu/libc-version.h>
#include <libmount.h>
#include <openssl/crypto.h>
#include <spdlog/version.h>
#include <yaml.h>

#include <sstream>

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
#ifndef HOIST_LIBACL_VERSION
#define HOIST_LIBACL_VERSION "unknown"
#endif
#ifndef HOIST_LIBCAP_VERSION
#define HOIST_LIBCAP_VERSION "unknown"
#endif

// HOIST_GIT_COMMIT and HOIST_BUILD_DATE, written at every build (cmake/build_info.cmake).
#include <hoist_build_info.h>  // generated in the build tree, hence not a room's header

namespace hoist {

std::string hoist_version() {
  return HOIST_VERSION;
}

namespace {

// libstdc++ is GCC's: compiled by that GCC, its release is GCC's own version; compiled by clang (the sanitizer
// builds), __GNUC__ is clang's pretence (4.2.1) and only the headers' major release is known.
std::string libstdcxx_version() {
#if defined(__clang__) || !defined(__GNUC__) || __GNUC__ != _GLIBCXX_RELEASE
  return std::to_string(_GLIBCXX_RELEASE);
#else
  return fmt::format("{}.{}.{}", __GNUC__, __GNUC_MINOR__, __GNUC_PATCHLEVEL__);
#endif
}

}  // namespace

BuildInfo build_info() {
#if defined(__x86_64__)
  const char* architecture = "x86_64";
#elif defined(__aarch64__)
  const char* architecture = "aarch64";
#elif defined(__arm__)
  const char* architecture = "arm";
#elif defined(__riscv) && __riscv_xlen == 64
  const char* architecture = "riscv64";
#else
  const char* architecture = "unknown";
#endif
  return {HOIST_GIT_COMMIT, HOIST_BUILD_DATE, architecture};
}

std::vector<LibraryVersion> linked_library_versions() {
  const char* mount_version = nullptr;
  mnt_get_library_version(&mount_version);
  const char* blkid_version = nullptr;
  blkid_get_library_version(&blkid_version, nullptr);
  std::vector<LibraryVersion> libraries{
      {"glibc", gnu_get_libc_version()},
      {"libstdc++", libstdcxx_version()},
  };
  // archive_version_details() reads "libarchive 3.6.2 zlib/1.2.13 liblzma/5.4.1 bz2lib/1.0.8 …": libarchive, then
  // each compression library linked into it, each its own entry (bz2lib is libarchive's name for libbz2).
  std::istringstream details(archive_version_details());
  std::string word;
  while (details >> word) {
    if (word == "libarchive" && details >> word) {
      libraries.push_back({"libarchive", word});
    } else if (const auto slash = word.find('/'); slash != std::string::npos) {
      const std::string name = word.substr(0, slash);
      libraries.push_back({name == "bz2lib" ? "libbz2" : name, word.substr(slash + 1)});
    }
  }
  libraries.insert(
      libraries.end(),
      {
          {"openssl", OpenSSL_version(OPENSSL_VERSION_STRING)},
          {"libmount", mount_version != nullptr ? mount_version : "unknown"},
          {"libblkid", blkid_version != nullptr ? blkid_version : "unknown"},
          {"libyaml", yaml_get_version_string()},
          {"libacl", HOIST_LIBACL_VERSION},
          {"libcap", HOIST_LIBCAP_VERSION},
          {"libsystemd (sd-bus)", HOIST_LIBSYSTEMD_VERSION},
          {"sdbus-c++", HOIST_SDBUSCPP_VERSION},
          {"spdlog", fmt::format("{}.{}.{}", SPDLOG_VER_MAJOR, SPDLOG_VER_MINOR, SPDLOG_VER_PATCH)},
          {"fmt", fmt::format("{}.{}.{}", FMT_VERSION / 10000, FMT_VERSION / 100 % 100, FMT_VERSION % 100)},
          {"CLI11", CLI11_VERSION},
          {"nlohmann-json", fmt::format("{}.{}.{}", NLOHMANN_JSON_VERSION_MAJOR, NLOHMANN_JSON_VERSION_MINOR,
                                        NLOHMANN_JSON_VERSION_PATCH)},
      });
  return libraries;
}

}  // namespace hoist
