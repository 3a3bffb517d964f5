#pragma once

// Internal to the transfer engine: reading ahead the files a directory walk is
// about to copy.
//
// A thread that copies small files one by one waits on the disk for each one
// (a cold read costs more than the copy). ReadAhead asks the kernel to start
// reading the next files (posix_fadvise WILLNEED returns at once), so that the
// disk has several reads in flight while the thread copies the current file.
// It is advice only: a file it cannot open or stat is left to the copy, which
// reports the error.

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "hoist/sys/directory.hpp"

namespace hoist::transfer {

class ReadAhead {
 public:
  /// At most this many files, and this many bytes, are read ahead of the walk.
  static constexpr size_t k_files = 32;
  static constexpr uint64_t k_bytes = uint64_t{8} << 20U;
  /// Of a big file only the start is read ahead; the copy's own reads stream the rest.
  static constexpr uint64_t k_per_file = uint64_t{1} << 20U;

  /// `entries` are the names of `source_dir` in the order the walk takes them.
  /// A regular file that `skip_dir` (-1: none) holds with the same size and
  /// mtime is not read ahead: the quick check will not read it. Disabled, it
  /// does nothing (dry runs).
  ReadAhead(int source_dir, int skip_dir, const std::vector<DirEntry>& entries, bool enabled);

  /// Call before the walk handles entries[index]: starts the reads of the next files.
  void before(size_t index);

  /// The indexes of the entries whose reads were started, in order (for tests).
  [[nodiscard]] const std::vector<size_t>& started() const { return m_started; }

 private:
  /// The bytes it started reading of entries[index] (0 when it skipped it).
  uint64_t start(size_t index);

  int m_source;
  int m_skip;
  const std::vector<DirEntry>& m_entries;
  bool m_enabled;
  size_t m_next = 0;
  uint64_t m_bytes = 0;                           ///< read ahead of the walk and not handled yet
  std::deque<std::pair<size_t, uint64_t>> m_ahead;  ///< (index, bytes) started and not handled yet
  std::vector<size_t> m_started;
};

/// Sorts directory entries by inode number: on a cold cache, the walk then
/// reads inode tables (and, for files written in order, their data) in disk
/// order instead of in the filesystem's hash order, as GNU fts and tar's
/// --sort=inode do.
void sort_by_inode(std::vector<DirEntry>& entries);

}  // namespace hoist::transfer
