#pragma once

// Internal to the transfer engine: reading ahead the files a directory walk is
// about to copy.
//
// A thread that copies small files one by one waits on the disk for each one
// (a cold read costs more than the copy). ReadAhead asks the kernel to start
// reading the next files, so that the disk has several reads in flight while
// the thread copies the current file: through the thread's ReadRing, which
// hands the reads of half a window to the kernel in one call and so to the disk
// as one batch, or, where io_uring cannot be used, with posix_fadvise WILLNEED
// file by file. Both return at once. It is advice only: a file it cannot open
// or stat is left to the copy, which reports the error. The lstats it takes to
// choose are handed to the walk, which then does not take them again.

#include <sys/stat.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <string_view>
#include <vector>

#include "hoist/sys/data_copier.hpp"
#include "hoist/sys/directory.hpp"
#include "hoist/sys/read_ring.hpp"
#include "hoist/transfer/content_index.hpp"
#include "hoist/transfer/transfer.hpp"
#include "hoist/util/fd.hpp"

namespace hoist::transfer {

/// Which files a walk reads the data of, and so which are worth reading ahead.
enum class Reading {
  none,        ///< nothing: a dry run, or copies that clone instead of reading
  every_file,  ///< every regular file: to copy it, or to hash it for its comparison
  /// every regular file but those the compared tree holds with the same size and mtime: their comparison takes
  /// the payload's digest from SHA256SUMS and the old file's from its content index, and reads neither
  not_same,
};

/// The payload files of one directory (`dir`, relative to the payload) that `index` recorded as read before and
/// that are unchanged since (ContentIndex::vouch_source()): the walk does not read them again. No index: none.
struct RecordedSources {
  const ContentIndex* index = nullptr;
  std::string_view dir;
};

/// The index whose recorded payload files a transfer with `options` takes as read (compare_node() asks it when
/// the payload's digest is not listed): `options.known`, unless SHA256SUMS list the digests or Compare::checksum
/// reads everything.
[[nodiscard]] const ContentIndex* recorded_sources(const TransferOptions& options);

/// A file the read-ahead keeps open for the walk. At most k_kept_files are, in the whole process: every walking
/// thread has a read-ahead of up to ReadAhead::k_files files, and with --threads 64 they would hold 2,048
/// descriptors, past a shell's default limit of 1,024; a file past the budget is closed and opened again by the
/// walk, as before.
class KeptFile {
 public:
  static constexpr int k_kept_files = 256;

  KeptFile() = default;
  /// Keeps `fd` while the budget allows; else closes it and holds none.
  explicit KeptFile(Fd fd) noexcept;
  /// Takes `fd` (leaving it closed) while the budget allows; else holds none and leaves `fd` open.
  [[nodiscard]] static KeptFile keep_if_room(Fd& fd) noexcept;
  KeptFile(KeptFile&& other) noexcept : m_fd(std::move(other.m_fd)) {}
  KeptFile& operator=(KeptFile&& other) noexcept;
  KeptFile(const KeptFile&) = delete;
  KeptFile& operator=(const KeptFile&) = delete;
  ~KeptFile() { reset(); }

  explicit operator bool() const noexcept { return m_fd.valid(); }
  /// The descriptor, no longer counted against the budget (the walk's use of it is bounded by its threads).
  Fd take() noexcept;

 private:
  void reset() noexcept;
  Fd m_fd;
};

class ReadAhead {
 public:
  /// At most this many files, and this many bytes, are read ahead of the walk.
  static constexpr size_t k_files = 32;
  static constexpr uint64_t k_bytes = uint64_t{8} << 20U;
  /// Of a big file only the start is read ahead; the copy's own reads stream the rest.
  static constexpr uint64_t k_per_file = uint64_t{1} << 20U;

  /// What ReadAhead found of an entry: its lstat in the source directory and,
  /// when there is a skip directory, whether that has the name and its lstat.
  struct Seen {
    enum class Skip { unknown, absent, present };
    struct stat source {};
    Skip skip = Skip::unknown;  ///< unknown: no skip directory, or its lstat failed otherwise than ENOENT
    struct stat skip_st {};
    /// The source file, opened to start its read: the walk reads it through this (take_source()) instead of
    /// opening it again. Not open when it is not read ahead, or when k_kept_files were kept open already.
    KeptFile source_fd;
  };

  /// `entries` are the names of `source_dir` in the order the walk takes them;
  /// `skip_dir` (-1: none) is the tree the walk compares with, whose lstats it
  /// hands on too. Which files are read ahead is `reading`'s.
  /// Files `recorded` holds are not read ahead. While `reading` is none, `ask_again` (if any) is asked again
  /// every half window: a walk that starts before any copy has found out whether the filesystem clones is told
  /// none, and reads ahead from where the first copies found that it does not.
  ReadAhead(int source_dir, int skip_dir, const std::vector<DirEntry>& entries, Reading reading,
            RecordedSources recorded = {}, std::function<Reading()> ask_again = {});

  /// Call before the walk handles entries[index]: starts the reads of the next files, once at most half of
  /// k_files are ahead of it (then up to k_files ahead, within k_bytes).
  void before(size_t index);

  /// The lstats taken of entries[index], valid until the next before(); nullptr
  /// when none were (not a regular file by its d_type, or disabled).
  [[nodiscard]] Seen* seen(size_t index);

  /// The indexes whose reads are started and not yet handled by the walk, in order.
  [[nodiscard]] std::vector<size_t> in_flight() const;

 private:
  struct Slot {
    size_t index = 0;
    uint64_t bytes = 0;  ///< started reading (0: skipped)
    bool statted = false;
    Seen seen;
  };

  /// Looks at entries[slot.index]: takes its lstats and starts its read when the copy will read it.
  void look(Slot& slot) const;

  int m_source;
  int m_skip;
  const std::vector<DirEntry>& m_entries;
  Reading m_reading;
  RecordedSources m_recorded;
  std::function<Reading()> m_ask_again;
  ReadRing* m_ring;  ///< this thread's, or nullptr: posix_fadvise
  size_t m_next = 0;
  uint64_t m_bytes = 0;      ///< read ahead of the walk and not handled yet
  std::deque<Slot> m_slots;  ///< entries [m_slots.front().index, m_next), each looked at
};

/// What a walk that copies from filesystem `source` to `dest` reads of the payload's
/// data, which is when reading ahead pays: not in a dry run, and not when the copies
/// are clones; not the files that `options` lets it compare without reading.
[[nodiscard]] Reading payload_reading(bool dry_run, DataCopier& copier, dev_t source, dev_t dest,
                                      const TransferOptions& options);

/// The source file `seen` holds open (moved out of it), or a closed Fd.
[[nodiscard]] inline Fd take_source(ReadAhead::Seen* seen) {
  return seen != nullptr ? seen->source_fd.take() : Fd();
}

}  // namespace hoist::transfer
