#pragma once

#include <fcntl.h>
#include <sys/types.h>

#include <string>
#include <string_view>

#include "hoist/util/expected.hpp"

namespace hoist {

/// Open flags for a file that hoist reads whole: O_NONBLOCK so that opening a FIFO
/// or a device named by mistake cannot hang (read_fd then refuses it), O_NOCTTY so
/// that a terminal never becomes the controlling one.
inline constexpr int k_read_flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;

/// What a file of mode `mode` is, for messages: "a directory", "a FIFO", "a socket",
/// "a character device", "a block device", "a symbolic link", "a regular file".
[[nodiscard]] std::string_view file_type_name(mode_t mode) noexcept;

/// Reads a whole file (`relpath` relative to `dirfd`, or absolute) into a string,
/// opened with k_read_flags (symlinks followed). Refuses what is not a regular file
/// ("failed to read 'x': it is a FIFO, not a regular file", EINVAL) and files larger
/// than `max_bytes`, so a hostile file can neither hang hoist nor exhaust memory.
/// `display` is the path named in error messages.
Expected<std::string> read_file_at(int dirfd, const std::string& relpath, std::string_view display,
                                   size_t max_bytes = 16U << 20U);

/// Reads everything from an open file descriptor (opened with k_read_flags), with the
/// same checks: a descriptor that is not a regular file is refused before any read.
Expected<std::string> read_fd(int fd, std::string_view display, size_t max_bytes = 16U << 20U);

/// Writes all of `data` to `fd`, retrying short writes and EINTR.
Expected<void> write_all(int fd, std::string_view data, std::string_view display);

/// fsync(2) with the house error shape.
Expected<void> fsync_fd(int fd, std::string_view display);

}  // namespace hoist
