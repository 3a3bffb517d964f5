#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "hoist/util/expected.hpp"

namespace hoist {

/// Copies the regular file open at `source` (from offset 0) to a new file
/// `name` in directory `dirfd`, with the source's mode, numeric owner, mtime
/// and xattrs (ACLs and security.capability too; apply_metadata()), and fsyncs it; the data goes through DataCopier
/// (FICLONE, else copy_file_range, else sendfile, else read/write). `on_progress` (optional) gets the bytes copied so
/// far. On error the new file is removed. `display` names the new file in errors. Returns the bytes written (0 when the
/// data was cloned).
Expected<uint64_t> copy_with_metadata(int source, int dirfd, const std::string& name, std::string_view display,
                                      const std::function<void(uint64_t)>& on_progress = {});

}  // namespace hoist
