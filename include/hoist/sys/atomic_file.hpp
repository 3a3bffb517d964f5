#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

#include "hoist/sys/temporary_name.hpp"
#include "hoist/util/expected.hpp"

namespace hoist {

/// Replaces `name` in directory `dirfd` with `data`, atomically and durably:
/// a temporary file in the same directory, written and fsynced, renamed over
/// `name`, then the directory fsynced. A crash at any instant leaves either the
/// old or the new content under `name`, never a mix. `display` is the path
/// named in errors.
Expected<void> write_file_atomic(int dirfd, const std::string& name, std::string_view data, mode_t mode,
                                 std::string_view display);

/// Removes the temporary files (k_temp_prefix) that killed runs left in `dirfd`, a directory only hoist writes.
void remove_stale_temporaries(int dirfd);

}  // namespace hoist
