#include "hoist/sys/read_ring.hpp"

#include <linux/io_uring.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <utility>

namespace hoist {

// The three mappings an io_uring shares with the kernel: the submission ring (the indexes of the entries to
// submit), the completion ring (which shares the first mapping: IORING_FEAT_SINGLE_MMAP) and the array of
// submission entries.
struct ReadRing::Rings {
  void* rings = MAP_FAILED;
  size_t rings_size = 0;
  void* entries = MAP_FAILED;
  size_t entries_size = 0;

  uint32_t* sq_tail = nullptr;
  uint32_t sq_mask = 0;
  uint32_t* sq_array = nullptr;
  io_uring_sqe* sqes = nullptr;
  uint32_t* cq_head = nullptr;
  const uint32_t* cq_tail = nullptr;

  Rings() = default;
  Rings(const Rings&) = delete;
  Rings& operator=(const Rings&) = delete;
  ~Rings() {
    if (entries != MAP_FAILED) {
      ::munmap(entries, entries_size);
    }
    if (rings != MAP_FAILED) {
      ::munmap(rings, rings_size);
    }
  }
};

namespace {

/// Where every ring's reads land, which nothing reads: one for the process (the kernel's copies into it from
/// several threads at once change nothing anyone looks at), and as long-lived as the process, so that a read the
/// kernel completes late never writes into freed memory.
alignas(4096) std::array<char, ReadRing::k_max_read> g_scratch;  // NOLINT(*-non-const-global-variables)

int io_uring_setup(unsigned entries, io_uring_params* params) {
  return static_cast<int>(::syscall(__NR_io_uring_setup, entries, params));
}

int io_uring_enter(int ring, unsigned to_submit, unsigned min_complete, unsigned flags) {
  return static_cast<int>(::syscall(__NR_io_uring_enter, ring, to_submit, min_complete, flags, nullptr, 0));
}

template <typename T>
T* at(void* base, uint32_t offset) {
  return reinterpret_cast<T*>(static_cast<char*>(base) + offset);  // NOLINT(*-reinterpret-cast): the kernel's layout
}

/// The ring of a new io_uring, or nullptr. Asks for what this file relies on: one mapping for both rings (Linux
/// 5.4) and io_uring's own workers (5.12), whose kernels start a buffered read in the submitting call.
std::unique_ptr<ReadRing::Rings> map_rings(int ring, const io_uring_params& params) {
  if ((params.features & IORING_FEAT_SINGLE_MMAP) == 0U || (params.features & IORING_FEAT_NATIVE_WORKERS) == 0U) {
    return nullptr;
  }
  auto rings = std::make_unique<ReadRing::Rings>();
  rings->rings_size = std::max<size_t>(params.sq_off.array + params.sq_entries * sizeof(uint32_t),
                                       params.cq_off.cqes + params.cq_entries * sizeof(io_uring_cqe));
  rings->rings =
      ::mmap(nullptr, rings->rings_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_SQ_RING);
  if (rings->rings == MAP_FAILED) {
    return nullptr;
  }
  rings->entries_size = params.sq_entries * sizeof(io_uring_sqe);
  rings->entries =
      ::mmap(nullptr, rings->entries_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_SQES);
  if (rings->entries == MAP_FAILED) {
    return nullptr;
  }
  rings->sq_tail = at<uint32_t>(rings->rings, params.sq_off.tail);
  rings->sq_mask = *at<uint32_t>(rings->rings, params.sq_off.ring_mask);
  rings->sq_array = at<uint32_t>(rings->rings, params.sq_off.array);
  rings->sqes = static_cast<io_uring_sqe*>(rings->entries);
  rings->cq_head = at<uint32_t>(rings->rings, params.cq_off.head);
  rings->cq_tail = at<const uint32_t>(rings->rings, params.cq_off.tail);
  return rings;
}

}  // namespace

ReadRing* ReadRing::for_this_thread() noexcept {
  thread_local std::unique_ptr<ReadRing> t_ring;
  thread_local bool t_tried = false;
  if (t_ring && t_ring->m_owner != ::getpid()) {
    // A child of fork(2), which shares the ring's mappings and descriptor with its parent: using them would take
    // the parent's completions (and leave it waiting for them), and closing them would wait for the parent's reads.
    // The child leaves them alone and makes its own.
    static_cast<void>(t_ring.release());
    t_tried = false;
  }
  if (t_tried) {
    return t_ring.get();
  }
  // Asked once a thread (a seccomp filter may differ between threads), not again after a refusal.
  t_tried = true;
  io_uring_params params{};
  Fd ring(io_uring_setup(k_entries, &params));
  if (!ring) {
    return nullptr;
  }
  try {
    std::unique_ptr<Rings> rings = map_rings(ring.get(), params);
    if (!rings) {
      return nullptr;
    }
    t_ring.reset(new ReadRing(std::move(ring), std::move(rings)));
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
  return t_ring.get();
}

ReadRing::ReadRing(Fd ring, std::unique_ptr<Rings> rings) noexcept
    : m_ring(std::move(ring)), m_rings(std::move(rings)), m_owner(::getpid()) {}

ReadRing::~ReadRing() {
  drain();
}

bool ReadRing::queue(int fd, uint64_t bytes) noexcept {
  while (!m_broken && m_queued + m_in_flight >= k_entries) {
    if (m_queued > 0) {
      submit();
    } else {
      reap(1);
    }
  }
  if (m_broken) {
    return false;
  }
  Rings& rings = *m_rings;
  const uint32_t tail = *rings.sq_tail;  // written by this thread only
  const uint32_t index = tail & rings.sq_mask;
  io_uring_sqe& entry = rings.sqes[index];
  std::memset(&entry, 0, sizeof entry);
  entry.opcode = IORING_OP_READ;
  entry.fd = fd;
  entry.addr = reinterpret_cast<uintptr_t>(g_scratch.data());  // NOLINT(*-reinterpret-cast): the kernel's ABI
  entry.len = static_cast<uint32_t>(std::min<uint64_t>(bytes, k_max_read));
  entry.off = 0;
  rings.sq_array[index] = index;
  __atomic_store_n(rings.sq_tail, tail + 1, __ATOMIC_RELEASE);
  ++m_queued;
  return true;
}

void ReadRing::submit() noexcept {
  if (m_queued > 0 && !m_broken) {
    int submitted = 0;
    do {
      submitted = io_uring_enter(m_ring.get(), m_queued, 0, 0);
    } while (submitted < 0 && errno == EINTR);
    // None taken of what is queued (an error, or entries the kernel dropped): no later call would take them
    // either, and queue() would wait for room forever.
    if (submitted <= 0) {
      m_broken = true;
      return;
    }
    const auto started = static_cast<unsigned>(submitted);
    m_queued -= std::min(started, m_queued);
    m_in_flight += started;
  }
  reap(0);
}

void ReadRing::drain() noexcept {
  submit();
  while (m_in_flight > 0 && !m_broken) {
    reap(m_in_flight);
  }
}

void ReadRing::reap(unsigned wait) noexcept {
  if (m_broken) {
    return;
  }
  if (wait > 0) {
    int waited = 0;
    do {
      waited = io_uring_enter(m_ring.get(), 0, wait, IORING_ENTER_GETEVENTS);
    } while (waited < 0 && errno == EINTR);
    if (waited < 0) {
      m_broken = true;
      return;
    }
  }
  // Only the count matters: a read that failed was advice not taken.
  Rings& rings = *m_rings;
  const uint32_t head = *rings.cq_head;  // written by this thread only
  const uint32_t tail = __atomic_load_n(rings.cq_tail, __ATOMIC_ACQUIRE);
  m_in_flight -= std::min(tail - head, m_in_flight);
  __atomic_store_n(rings.cq_head, tail, __ATOMIC_RELEASE);
}

}  // namespace hoist
