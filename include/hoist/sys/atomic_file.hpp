#pragma once

#include <sys/types.h>

#include <functional>
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

/// Gives the file `from` of directory `dirfd` the name `name` too, atomically and durably: a hard link under a
/// temporary name, renamed over `name`, then the directory fsynced. `from` must itself be durable already (written by
/// write_file_atomic()). An error with ENOENT when there is no `from`; `display` is the path named in errors.
Expected<void> link_file_atomic(int dirfd, const std::string& from, const std::string& name, std::string_view display);

/// What replace_symlink() and link_file_atomic() share: `make(temp)` makes a new entry under a temporary name in
/// `dirfd` (returning 0, or -1 with errno; another name is tried on EEXIST), which is renamed over `name`, then the
/// directory fsynced. `what` names the new entry in errors ("a symlink to 'x'").
Expected<void> rename_new_entry(int dirfd, const std::string& name, std::string_view what, std::string_view display,
                                const std::function<int(const std::string& temp)>& make);

/// Removes the temporary files (k_temp_prefix) that killed runs left in `dirfd`, a directory only hoist writes.
void remove_stale_temporaries(int dirfd);

}  // namespace hoist
