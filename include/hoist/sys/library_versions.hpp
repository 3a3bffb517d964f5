#pragma once

#include <string>
#include <vector>

namespace hoist {

struct LibraryVersion {
  std::string name;
  std::string version;
};

/// The versions of every library linked into this binary (the C library and the C++ runtime first, then the
/// static archives, then the header-only ones), asked of the libraries themselves where they can tell at run
/// time (glibc, libarchive with its compression libraries, OpenSSL, libmount, libblkid, libyaml), else as
/// recorded at build time.
std::vector<LibraryVersion> linked_library_versions();

/// hoist's own version.
std::string hoist_version();

/// Where this binary comes from.
struct BuildInfo {
  std::string commit;        ///< git commit (12 hex digits, "-dirty" when the tree differed), or "unknown"
  std::string date;          ///< the build's date, UTC (SOURCE_DATE_EPOCH's when set), YYYY-MM-DD
  std::string architecture;  ///< the CPU it runs on: x86_64, aarch64, ...
};
BuildInfo build_info();

}  // namespace hoist
