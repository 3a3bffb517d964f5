#pragma once

#include <string>
#include <vector>

namespace hoist {

struct LibraryVersion {
  std::string name;
  std::string version;
};

/// The versions of the libraries linked into this binary, asked of the
/// libraries themselves where they can tell at run time (libarchive, OpenSSL,
/// libmount), else as recorded at build time.
std::vector<LibraryVersion> linked_library_versions();

/// hoist's own version.
std::string hoist_version();

}  // namespace hoist
