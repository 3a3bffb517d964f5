#pragma once

#include <string>
#include <string_view>

#include "hoist/util/expected.hpp"

namespace hoist {

/// Reads a whole file (`relpath` relative to `dirfd`, or absolute) into a string.
/// Refuses files larger than `max_bytes`, so a hostile file cannot exhaust memory.
/// `display` is the path named in error messages.
Expected<std::string> read_file_at(int dirfd, const std::string& relpath, std::string_view display,
                                   size_t max_bytes = 16U << 20U);

/// Reads everything from an open file descriptor, with the same size limit.
Expected<std::string> read_fd(int fd, std::string_view display, size_t max_bytes = 16U << 20U);

/// Writes all of `data` to `fd`, retrying short writes and EINTR.
Expected<void> write_all(int fd, std::string_view data, std::string_view display);

/// fsync(2) with the house error shape.
Expected<void> fsync_fd(int fd, std::string_view display);

}  // namespace hoist
