#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "hoist/sys/sha256.hpp"
#include "hoist/util/expected.hpp"

namespace hoist {

/// Copies the regular file open at `source` (from offset 0) to a new file
/// `name` in directory `dirfd`, with the source's mode, numeric owner, mtime
/// and xattrs (ACLs and security.capability too; apply_metadata()), and fsyncs it; the data goes through DataCopier
/// (FICLONE, else copy_file_range, else sendfile, else read/write). `on_progress` (optional) gets the bytes copied so
/// far. On error the new file is removed. `display` names the new file in errors. Returns the bytes written (0 when the
/// data was cloned). With `digest`, it also gets the SHA-256 of the bytes the copy holds, hashed as they are written
/// (DataCopier::copy_hashed(): no kernel copy then, whose bytes would never pass through here).
Expected<uint64_t> copy_with_metadata(int source, int dirfd, const std::string& name, std::string_view display,
                                      const std::function<void(uint64_t)>& on_progress = {},
                                      Sha256Digest* digest = nullptr);

}  // namespace hoist
