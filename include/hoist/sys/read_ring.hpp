#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "hoist/util/fd.hpp"

namespace hoist {

/// Starts the reads of many files with one system call, through an io_uring of the calling thread.
///
/// Reading ahead file by file (posix_fadvise WILLNEED) makes each file a disk request of its own, handed to the
/// device on its own: on a virtual disk, each is a notification the hypervisor traps. The reads queued here are
/// handed to the kernel together (one io_uring_enter), which starts them under one block plug, so the device gets
/// them as one batch. Measured on this project's virtual machine, reading 100,000 small files from a cold cache in
/// batches of 32: 3.0-3.3 s file by file, 1.6-1.9 s through the ring.
///
/// What is read lands in a scratch buffer that nothing reads (one for the process): what counts is that the
/// file's pages are then in the page cache, where the walk's own reads find them. Advice only, like posix_fadvise:
/// a read that fails is dropped. A file's descriptor may be closed once submit() returned, not before (the kernel
/// then holds the file until the read completes).
class ReadRing {
 public:
  /// Reads queued and in flight at once, at most.
  static constexpr unsigned k_entries = 64;
  /// Of each file, at most this many bytes are read (the size of the scratch buffer).
  static constexpr uint32_t k_max_read = uint32_t{1} << 20U;

  /// The calling thread's ring, made on first use; nullptr where io_uring cannot be used: a kernel before 5.12,
  /// a seccomp filter that refuses io_uring_setup (container runtimes' default profiles do), or the sysctl
  /// kernel.io_uring_disabled. The ring lives as long as the thread; in a child of fork() the thread gets a new one.
  static ReadRing* for_this_thread() noexcept;

  ReadRing(const ReadRing&) = delete;
  ReadRing& operator=(const ReadRing&) = delete;
  /// Waits for the reads in flight.
  ~ReadRing();

  /// Queues the read of the first `bytes` of `fd` (at most k_max_read). `fd` stays open until submit() returns:
  /// the kernel takes the file by its number then (another file opened under a closed one's number would be read
  /// instead, and a pipe's read never ends). False when it could not be queued (the ring is broken): the caller
  /// then advises the kernel otherwise.
  bool queue(int fd, uint64_t bytes) noexcept;

  /// Hands the queued reads to the kernel, in one call. Returns once they are started, not read.
  void submit() noexcept;

  /// Waits until no read is in flight (for tests: the pages are in the cache then).
  void drain() noexcept;

  struct Rings;

 private:
  ReadRing(Fd ring, std::unique_ptr<Rings> rings) noexcept;
  /// Takes the completions the kernel has posted; with `wait`, waits for at least that many first.
  void reap(unsigned wait) noexcept;

  Fd m_ring;
  std::unique_ptr<Rings> m_rings;
  unsigned m_queued = 0;     ///< in the submission queue, not yet handed to the kernel
  unsigned m_in_flight = 0;  ///< handed to the kernel, completion not yet taken
  bool m_broken = false;     ///< io_uring_enter failed: nothing more is queued
  pid_t m_owner;             ///< the process that made the ring (a child of fork() shares it, and makes its own)
};

}  // namespace hoist
