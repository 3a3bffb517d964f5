#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string_view>
#include <utility>
#include <vector>

#include "hoist/sys/sha256.hpp"
#include "hoist/util/expected.hpp"

namespace hoist {

/// How file data goes from one file to another, fastest first.
enum class CopyMethod : int {
  clone = 0,       ///< FICLONE: shares the extents, writes nothing (btrfs, xfs, bcachefs)
  copy_range = 1,  ///< copy_file_range(2): in the kernel, without a trip through user space
  send_file = 2,   ///< sendfile(2): in the kernel across any two filesystems (overlayfs to ext4)
  read_write = 3,  ///< read(2) and write(2) through a buffer: works everywhere
};

/// What DataCopier::copy() copies.
enum class CopyExtent {
  whole_file,  ///< the whole source into an empty file: may be cloned
  part,        ///< a part: copied, never cloned
};

/// Called with the bytes copied so far of the current file, every few MiB.
using CopyProgress = std::function<void(uint64_t)>;

/// Copies file data with the fastest method the two filesystems accept, and
/// remembers per pair of filesystems (by st_dev) which method failed, so that a
/// refused ioctl or syscall is not retried for every one of 100,000 files.
/// Thread-safe: workers share one DataCopier.
class DataCopier {
 public:
  /// Copies the first `size` bytes of `in` (from its file offset; fewer at EOF)
  /// to `out` (at its file offset). With CopyExtent::whole_file, `in` is at
  /// offset 0, `size` is its size and `out` is empty, so the data may be cloned.
  /// `in_dev` and `out_dev` are the st_dev of the two files. Returns the bytes
  /// written: 0 when the data was cloned.
  Expected<uint64_t> copy(int in, dev_t in_dev, int out, dev_t out_dev, uint64_t size, std::string_view in_display,
                          std::string_view out_display, const CopyProgress& progress = {},
                          CopyExtent extent = CopyExtent::whole_file);

  /// copy() of a whole file that also takes the SHA-256 of the bytes the copy holds, into `digest`, so
  /// that what is hashed is what was written even when the source changes meanwhile. A small file goes
  /// through one buffer that read(2) fills, the hash reads and write(2) writes (a kernel copy would have
  /// to be read again to be hashed). From 32 MiB on, copy() copies (or clones) it and a thread of its own
  /// hashes what the copy holds as the copy reports it written: the two take the longer of their times
  /// (where no thread can be started, as under a pod's pids limit, it goes through the buffer too).
  /// A clone is hashed from the copy, which shares its extents.
  /// `out` is open for reading and writing (O_RDWR), since a clone is read back to be hashed.
  Expected<uint64_t> copy_hashed(int in, dev_t in_dev, int out, dev_t out_dev, uint64_t size, Sha256Digest& digest,
                                 std::string_view in_display, std::string_view out_display,
                                 const CopyProgress& progress = {});

  /// The method that copy() starts with for this pair (for tests and logs).
  [[nodiscard]] CopyMethod method_for(dev_t in_dev, dev_t out_dev);

  /// Forces a method (tests: exercises the fallbacks on any filesystem).
  void force_method(CopyMethod method) { m_forced.store(static_cast<int>(method)); }

 private:
  void downgrade(dev_t in_dev, dev_t out_dev, CopyMethod to);

  std::mutex m_mutex;
  std::vector<std::pair<std::pair<dev_t, dev_t>, CopyMethod>> m_methods;
  std::atomic<int> m_forced{-1};
};

/// Whether two open files have the same content (read from offset 0 to their ends).
Expected<bool> same_content(int a, int b, std::string_view a_display, std::string_view b_display);

}  // namespace hoist
