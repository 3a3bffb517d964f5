#pragma once

#include <string>
#include <string_view>

#include "hoist/sys/temporary_name.hpp"
#include "hoist/util/expected.hpp"

namespace hoist {

/// Points the symlink `name` in directory `dirfd` at `target`, atomically and
/// durably, whatever `name` was before (a link, a file, nothing): a new link
/// under a temporary name (k_temp_prefix) in the same directory, renamed over
/// `name`, then the directory fsynced. A crash at any instant leaves `name` as
/// it was or pointing at `target`. `dirfd` must be readable (not O_PATH), for
/// the fsync. A directory at `name` is refused (rename gives EISDIR) and left.
Expected<void> replace_symlink(int dirfd, const std::string& name, const std::string& target, std::string_view display);

/// The target of the symlink `name` in `dirfd`. ENOENT when it does not exist,
/// EINVAL when it is not a symlink.
Expected<std::string> read_symlink(int dirfd, const std::string& name, std::string_view display);

}  // namespace hoist
