#include "read_ahead.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "hoist/util/fd.hpp"

namespace hoist::transfer {

ReadAhead::ReadAhead(int source_dir, int skip_dir, const std::vector<DirEntry>& entries, bool enabled)
    : m_source(source_dir), m_skip(skip_dir), m_entries(entries), m_enabled(enabled) {}

void ReadAhead::before(size_t index) {
  if (!m_enabled) {
    return;
  }
  while (!m_ahead.empty() && m_ahead.front().first < index) {
    m_bytes -= m_ahead.front().second;
    m_ahead.pop_front();
  }
  m_next = std::max(m_next, index);
  while (m_next < m_entries.size() && m_next < index + k_files && m_bytes < k_bytes) {
    const uint64_t bytes = start(m_next);
    if (bytes > 0) {
      m_ahead.emplace_back(m_next, bytes);
      m_bytes += bytes;
      m_started.push_back(m_next);
    }
    ++m_next;
  }
}

uint64_t ReadAhead::start(size_t index) {
  const DirEntry& entry = m_entries[index];
  if (entry.type != DT_REG && entry.type != DT_UNKNOWN) {
    return 0;
  }
  const char* name = entry.name.c_str();
  struct stat st {};
  if (::fstatat(m_source, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) {
    return 0;
  }
  if (m_skip >= 0) {
    struct stat old {};
    if (::fstatat(m_skip, name, &old, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(old.st_mode) &&
        old.st_size == st.st_size && old.st_mtim.tv_sec == st.st_mtim.tv_sec &&
        old.st_mtim.tv_nsec == st.st_mtim.tv_nsec) {
      return 0;
    }
  }
  // O_NONBLOCK: should the entry turn into a fifo after the stat, the open does not wait for a writer.
  constexpr int flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
  Fd fd(::openat(m_source, name, flags | O_NOATIME));
  if (!fd && errno == EPERM) {
    fd.reset(::openat(m_source, name, flags));  // O_NOATIME needs the file's owner or CAP_FOWNER
  }
  if (!fd) {
    return 0;
  }
  const uint64_t bytes = std::min(static_cast<uint64_t>(st.st_size), k_per_file);
  if (::posix_fadvise(fd.get(), 0, static_cast<off_t>(bytes), POSIX_FADV_WILLNEED) != 0) {
    return 0;
  }
  return bytes;
}

void sort_by_inode(std::vector<DirEntry>& entries) {
  std::sort(entries.begin(), entries.end(),
            [](const DirEntry& a, const DirEntry& b) { return a.inode < b.inode; });
}

}  // namespace hoist::transfer
