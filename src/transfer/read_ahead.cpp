#include "read_ahead.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>

#include "hoist/util/fd.hpp"

namespace hoist::transfer {

namespace {

/// The files KeptFile holds open, in the whole process.
std::atomic<int> g_kept_files{0};

}  // namespace

KeptFile::KeptFile(Fd fd) noexcept : KeptFile(keep_if_room(fd)) {}

KeptFile KeptFile::keep_if_room(Fd& fd) noexcept {
  KeptFile kept;
  if (fd && g_kept_files.fetch_add(1, std::memory_order_relaxed) < k_kept_files) {
    kept.m_fd = std::move(fd);
  } else if (fd) {
    g_kept_files.fetch_sub(1, std::memory_order_relaxed);
  }
  return kept;
}

KeptFile& KeptFile::operator=(KeptFile&& other) noexcept {
  if (this != &other) {
    reset();
    m_fd = std::move(other.m_fd);
  }
  return *this;
}

Fd KeptFile::take() noexcept {
  if (m_fd) {
    g_kept_files.fetch_sub(1, std::memory_order_relaxed);
  }
  return std::move(m_fd);
}

void KeptFile::reset() noexcept {
  take().reset();
}

const ContentIndex* recorded_sources(const TransferOptions& options) {
  return options.payload_digests == nullptr && options.compare != Compare::checksum ? options.known : nullptr;
}

ReadAhead::ReadAhead(int source_dir, int skip_dir, const std::vector<DirEntry>& entries, Reading reading,
                     RecordedSources recorded, std::function<Reading()> ask_again)
    : m_source(source_dir),
      m_skip(skip_dir),
      m_entries(entries),
      m_reading(reading),
      m_recorded(recorded),
      m_ask_again(std::move(ask_again)),
      m_ring(reading == Reading::none ? nullptr : ReadRing::for_this_thread()) {}

void ReadAhead::before(size_t index) {
  if (m_reading == Reading::none) {
    // Not at the first entry: the walk asked just before it made this read-ahead.
    if (!m_ask_again || index == 0 || index % (k_files / 2) != 0) {
      return;
    }
    m_reading = m_ask_again();
    if (m_reading == Reading::none) {
      return;
    }
    m_ring = ReadRing::for_this_thread();
  }
  while (!m_slots.empty() && m_slots.front().index < index) {
    m_bytes -= m_slots.front().bytes;
    m_slots.pop_front();
  }
  m_next = std::max(m_next, index);
  // The window is filled again once half of it is handled, so that the reads it starts go to the kernel, and to
  // the disk, together.
  if (m_next > index + k_files / 2) {
    return;
  }
  while (m_next < m_entries.size() && m_next < index + k_files && m_bytes < k_bytes) {
    Slot& slot = m_slots.emplace_back();
    slot.index = m_next++;
    look(slot);
    m_bytes += slot.bytes;
  }
  if (m_ring != nullptr) {
    m_ring->submit();
  }
}

ReadAhead::Seen* ReadAhead::seen(size_t index) {
  if (m_slots.empty() || index < m_slots.front().index || index >= m_next) {
    return nullptr;
  }
  Slot& slot = m_slots[index - m_slots.front().index];
  return slot.statted ? &slot.seen : nullptr;
}

std::vector<size_t> ReadAhead::in_flight() const {
  std::vector<size_t> indexes;
  for (const Slot& slot : m_slots) {
    if (slot.bytes > 0) {
      indexes.push_back(slot.index);
    }
  }
  return indexes;
}

void ReadAhead::look(Slot& slot) const {
  const DirEntry& entry = m_entries[slot.index];
  if (entry.type != DT_REG && entry.type != DT_UNKNOWN) {
    return;
  }
  const char* name = entry.name.c_str();
  Seen& seen = slot.seen;
  if (::fstatat(m_source, name, &seen.source, AT_SYMLINK_NOFOLLOW) != 0) {
    return;
  }
  slot.statted = true;
  if (m_skip >= 0) {
    if (::fstatat(m_skip, name, &seen.skip_st, AT_SYMLINK_NOFOLLOW) == 0) {
      seen.skip = Seen::Skip::present;
    } else if (errno == ENOENT) {
      seen.skip = Seen::Skip::absent;
    }
  }
  const struct stat& st = seen.source;
  if (!S_ISREG(st.st_mode) || st.st_size <= 0) {
    return;
  }
  const struct stat& old = seen.skip_st;
  if (m_reading == Reading::not_same && seen.skip == Seen::Skip::present && S_ISREG(old.st_mode) &&
      old.st_size == st.st_size && old.st_mtim.tv_sec == st.st_mtim.tv_sec &&
      old.st_mtim.tv_nsec == st.st_mtim.tv_nsec) {
    return;
  }
  if (m_recorded.index != nullptr && m_recorded.index->vouch_source(m_recorded.dir, entry.name, st)) {
    return;
  }
  // O_NONBLOCK: should the entry turn into a fifo after the stat, the open does not wait for a writer.
  constexpr int flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
  Fd fd(::openat(m_source, name, flags | O_NOATIME));
  if (!fd && errno == EPERM) {
    fd.reset(::openat(m_source, name, flags));  // O_NOATIME needs the file's owner or CAP_FOWNER
  }
  if (!fd) {
    return;
  }
  const uint64_t bytes = std::min(static_cast<uint64_t>(st.st_size), k_per_file);
  const bool queued = m_ring != nullptr && m_ring->queue(fd.get(), bytes);
  if (queued || ::posix_fadvise(fd.get(), 0, static_cast<off_t>(bytes), POSIX_FADV_WILLNEED) == 0) {
    slot.bytes = bytes;
  }
  seen.source_fd = KeptFile::keep_if_room(fd);
  if (fd && queued) {
    // Not kept: the descriptor is closed below, and its number may be another file's by the time the ring is
    // submitted (a pipe, whose read would never end). The kernel takes the file now.
    m_ring->submit();
  }
}

Reading payload_reading(bool dry_run, DataCopier& copier, dev_t source, dev_t dest, const TransferOptions& options) {
  if (dry_run || copier.method_for(source, dest) == CopyMethod::clone) {
    return Reading::none;
  }
  const bool compared_unread =
      options.payload_digests != nullptr && options.known != nullptr && options.compare != Compare::checksum;
  return compared_unread ? Reading::not_same : Reading::every_file;
}

}  // namespace hoist::transfer
