#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "hoist/util/expected.hpp"
#include "hoist/util/fd.hpp"

namespace hoist {

/// Opens directory `name` in `dirfd` for reading entries and for the f*() calls
/// on it, never following a symlink (O_NOFOLLOW: a symlink answers ELOOP or ENOTDIR).
Expected<Fd> open_directory(int dirfd, const char* name, std::string_view display);

/// One name in a directory, with its type from the directory itself (a DT_*
/// value, DT_UNKNOWN on filesystems that do not fill it in).
struct DirEntry {
  std::string name;
  unsigned char type = 0;
  uint64_t inode = 0;
};

/// Every name in the open directory `dirfd` but `.` and `..`, in the order the
/// filesystem gives them. Reads from offset 0 whatever the fd's position.
Expected<std::vector<DirEntry>> read_directory(int dirfd, std::string_view display);

/// Sorts directory entries by inode number: on a cold cache, a walk then
/// reads inode tables (and, for files written in order, their data) in disk
/// order instead of in the filesystem's hash order, as GNU fts and tar's
/// --sort=inode do.
void sort_by_inode(std::vector<DirEntry>& entries);

/// Removes `name` from `dirfd`, and everything in it when it is a directory,
/// through directory fds only (no symlink is followed, no path grows past
/// PATH_MAX). A missing name is not an error.
Expected<void> remove_tree(int dirfd, const char* name, std::string_view display);

/// How an open fd is named in messages: its path from /proc/self/fd, else "fd N".
std::string fd_display(int fd);

/// Opens `fd`'s directory again, for reading (it may be an O_PATH fd), close-on-exec.
Expected<Fd> reopen_directory(int fd, std::string_view display);

/// "a/b" + "c" → "a/b/c"; "" + "c" → "c".
std::string join_path(std::string_view parent, std::string_view name);

/// The directories along one relative path under a root, kept open: moving to a
/// neighbouring path opens only the components that differ, so walking a sorted
/// list of paths costs about one openat per directory, and paths longer than
/// PATH_MAX work. Nothing is followed: a symlink as a component fails.
class DirCursor {
 public:
  /// `root` stays owned by the caller; `root_display` names it in errors.
  DirCursor(int root, std::string root_display) : m_root(root), m_root_display(std::move(root_display)) {}

  /// The directory at `relpath` ("" is the root), open for reading and f*() calls.
  /// Valid until the next call.
  Expected<int> open(std::string_view relpath);

  /// Like open(), but an absent or non-directory component gives -1, not an error.
  Expected<int> open_if_present(std::string_view relpath);

 private:
  Expected<int> descend(std::string_view relpath, bool missing_ok);

  int m_root;
  std::string m_root_display;
  std::vector<std::string> m_names;
  std::vector<Fd> m_fds;
};

}  // namespace hoist
