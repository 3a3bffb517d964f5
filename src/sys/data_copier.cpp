#include "hoist/sys/data_copier.hpp"
#include "hoist/util/text.hpp"

#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <system_error>
#include <thread>

namespace hoist {

namespace {

// Large enough that a big file costs few syscalls, small enough for many threads.
constexpr size_t k_buffer_size = size_t{256} * 1024;
// copy_file_range is asked for this much at a time, so progress moves on big files.
constexpr size_t k_range_chunk = size_t{8} << 20U;
// From this size on, a hashed copy is made in the kernel and hashed beside it (CopyHasher).
constexpr uint64_t k_hash_beside_from = uint64_t{4} * k_range_chunk;

char* thread_buffer(int which) {
  thread_local std::unique_ptr<char[]> buffers[2];
  auto& buffer = buffers[which];
  if (!buffer) {
    buffer = std::make_unique<char[]>(k_buffer_size);
  }
  return buffer.get();
}

/// Errors that mean "this method does not work between these filesystems", as
/// opposed to errors of the copy itself (ENOSPC, EIO, EDQUOT).
bool method_refused(int errnum) {
  return errnum == EOPNOTSUPP || errnum == ENOTTY || errnum == EXDEV || errnum == EINVAL || errnum == ENOSYS ||
         errnum == EBADF || errnum == EPERM || errnum == ETXTBSY;
}

/// Reads up to `size` bytes at the file offset, retrying EINTR and short reads until EOF.
ssize_t read_full(int fd, char* buffer, size_t size) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(fd, buffer + done, size - done);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return -1;
    }
    if (n == 0) {
      break;
    }
    done += static_cast<size_t>(n);
  }
  return static_cast<ssize_t>(done);
}

Expected<void> write_full(int fd, const char* data, size_t size, std::string_view display) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return sys_error("write " + in_quotes(display));
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return {};
}

/// Hashes the copy a kernel copy is writing, on a thread of its own, up to the bytes the copy has
/// reported written: the copy and the hash of a big file take the longer of their two times, not
/// their sum. What is hashed is read back from the copy, so it is what was written even when the
/// source changes meanwhile. The destructor stops and joins the thread. Where no thread can be started (a
/// pod's pids limit), started() is false and the caller hashes as it copies.
class CopyHasher {
 public:
  CopyHasher(int copy, std::string_view display) : m_copy(copy), m_display(display) {
    try {
      m_thread = std::thread([this] { run(); });
    } catch (const std::system_error&) {
      // EAGAIN: no thread to spare; started() says so.
    }
  }
  CopyHasher(const CopyHasher&) = delete;
  CopyHasher& operator=(const CopyHasher&) = delete;
  CopyHasher(CopyHasher&&) = delete;
  CopyHasher& operator=(CopyHasher&&) = delete;
  ~CopyHasher() {
    {
      std::lock_guard lock(m_mutex);
      m_ended = true;
      m_stop = true;
    }
    m_wake.notify_one();
    if (m_thread.joinable()) {
      m_thread.join();
    }
  }

  [[nodiscard]] bool started() const noexcept { return m_thread.joinable(); }

  /// The copy holds its first `written` bytes.
  void written(uint64_t written) {
    {
      std::lock_guard lock(m_mutex);
      m_written = std::max(m_written, written);
    }
    m_wake.notify_one();
  }

  /// The copy is complete with its first `size` bytes (or fewer, if the file ended before): the digest of
  /// what it holds.
  Expected<Sha256Digest> finish(uint64_t size) {
    {
      std::lock_guard lock(m_mutex);
      m_written = std::max(m_written, size);
      m_ended = true;
    }
    m_wake.notify_one();
    m_thread.join();
    if (m_errnum != 0) {
      return sys_error("read " + in_quotes(m_display), m_errnum);
    }
    return m_digest;
  }

 private:
  void run() {
    Sha256 sha;
    auto buffer = std::make_unique<char[]>(k_buffer_size);
    uint64_t hashed = 0;
    for (;;) {
      uint64_t until = 0;
      bool ended = false;
      {
        std::unique_lock lock(m_mutex);
        m_wake.wait(lock, [&] { return m_stop || m_ended || m_written > hashed; });
        if (m_stop) {
          return;
        }
        until = m_written;
        ended = m_ended;
      }
      while (hashed < until) {
        const size_t want = static_cast<size_t>(std::min<uint64_t>(k_buffer_size, until - hashed));
        const ssize_t n = ::pread(m_copy, buffer.get(), want, static_cast<off_t>(hashed));
        if (n < 0 && errno == EINTR) {
          continue;
        }
        if (n < 0) {
          m_errnum = errno;
          return;
        }
        if (n == 0) {
          // The copy ends here (the source shrank while it was copied): what it holds is what is hashed,
          // once the copy is over.
          std::unique_lock lock(m_mutex);
          m_wake.wait(lock, [&] { return m_stop || m_ended; });
          if (m_stop) {
            return;
          }
          ended = true;
          break;
        }
        sha.update(std::as_bytes(std::span(buffer.get(), static_cast<size_t>(n))));
        hashed += static_cast<uint64_t>(n);
      }
      if (ended) {
        m_digest = sha.final_digest();
        return;
      }
    }
  }

  int m_copy;
  std::string m_display;
  std::mutex m_mutex;
  std::condition_variable m_wake;
  uint64_t m_written = 0;
  bool m_ended = false;
  bool m_stop = false;
  int m_errnum = 0;  // written by the thread, read after join()
  Sha256Digest m_digest{};
  std::thread m_thread;  // last: it starts once the members above exist (in the constructor's body)
};

}  // namespace

CopyMethod DataCopier::method_for(dev_t in_dev, dev_t out_dev) {
  if (const int forced = m_forced.load(); forced >= 0) {
    return static_cast<CopyMethod>(forced);
  }
  std::lock_guard lock(m_mutex);
  for (const auto& [pair, method] : m_methods) {
    if (pair.first == in_dev && pair.second == out_dev) {
      return method;
    }
  }
  return CopyMethod::clone;
}

void DataCopier::downgrade(dev_t in_dev, dev_t out_dev, CopyMethod to) {
  std::lock_guard lock(m_mutex);
  for (auto& [pair, method] : m_methods) {
    if (pair.first == in_dev && pair.second == out_dev) {
      method = std::max(method, to);
      return;
    }
  }
  m_methods.push_back({{in_dev, out_dev}, to});
}

Expected<uint64_t> DataCopier::copy(int in, dev_t in_dev, int out, dev_t out_dev, uint64_t size,
                                    std::string_view in_display, std::string_view out_display,
                                    const CopyProgress& progress, CopyExtent extent) {
  if (size == 0) {
    return uint64_t{0};
  }
  CopyMethod method = method_for(in_dev, out_dev);
  if (method == CopyMethod::clone) {
    if (extent == CopyExtent::whole_file) {
      if (::ioctl(out, FICLONE, in) == 0) {
        if (progress) {
          progress(size);
        }
        return uint64_t{0};
      }
      if (!method_refused(errno)) {
        return sys_error("clone " + in_quotes(in_display) + " to " + in_quotes(out_display));
      }
      downgrade(in_dev, out_dev, CopyMethod::copy_range);
    }
    method = CopyMethod::copy_range;
  }
  // Each method continues where the one before stopped, at the two file offsets.
  // The loops stop at `size` without probing for EOF: one syscall per small file.
  uint64_t done = 0;
  auto kernel_copy = [&](CopyMethod current, CopyMethod next) -> Expected<void> {
    while (done < size) {
      const size_t want = static_cast<size_t>(std::min<uint64_t>(k_range_chunk, size - done));
      const ssize_t n = current == CopyMethod::copy_range ? ::copy_file_range(in, nullptr, out, nullptr, want, 0)
                                                          : ::sendfile(out, in, nullptr, want);
      if (n < 0) {
        if (errno == EINTR) {
          continue;
        }
        if (done == 0 && method_refused(errno)) {
          downgrade(in_dev, out_dev, next);
          method = next;
          return {};
        }
        return sys_error("copy " + in_quotes(in_display) + " to " + in_quotes(out_display));
      }
      if (n == 0) {
        // EOF before `size`: the file shrank, or it lies about its size (procfs).
        size = done;
        break;
      }
      done += static_cast<uint64_t>(n);
      if (progress) {
        progress(done);
      }
    }
    return {};
  };
  if (method == CopyMethod::copy_range) {
    if (auto copied = kernel_copy(CopyMethod::copy_range, CopyMethod::send_file); !copied) {
      return copied.error();
    }
  }
  // sendfile copies in the kernel between any two filesystems, where copy_file_range
  // answers EXDEV (since 5.19, e.g. from a container's overlayfs to the host's ext4).
  if (method == CopyMethod::send_file) {
    if (auto copied = kernel_copy(CopyMethod::send_file, CopyMethod::read_write); !copied) {
      return copied.error();
    }
  }
  char* buffer = thread_buffer(0);
  while (done < size) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(k_buffer_size, size - done));
    const ssize_t n = read_full(in, buffer, want);
    if (n < 0) {
      return sys_error("read " + in_quotes(in_display));
    }
    if (n == 0) {
      break;
    }
    if (auto written = write_full(out, buffer, static_cast<size_t>(n), out_display); !written) {
      return written.error();
    }
    done += static_cast<uint64_t>(n);
    if (progress && (done % k_range_chunk < static_cast<uint64_t>(n) || done == size)) {
      progress(done);
    }
  }
  return done;
}

Expected<uint64_t> DataCopier::copy_hashed(int in, dev_t in_dev, int out, dev_t out_dev, uint64_t size,
                                           Sha256Digest& digest, std::string_view in_display,
                                           std::string_view out_display, const CopyProgress& progress) {
  if (size >= k_hash_beside_from) {
    if (CopyHasher hasher(out, out_display); hasher.started()) {
      auto copied = copy(
          in, in_dev, out, out_dev, size, in_display, out_display,
          [&](uint64_t done) {
            hasher.written(done);
            if (progress) {
              progress(done);
            }
          },
          CopyExtent::whole_file);
      if (!copied) {
        return copied.error();
      }
      // 0 bytes written is a clone, of the whole file.
      auto hashed = hasher.finish(*copied == 0 ? size : *copied);
      if (!hashed) {
        return hashed.error();
      }
      digest = *hashed;
      return *copied;
    }
  }
  if (size > 0 && method_for(in_dev, out_dev) == CopyMethod::clone) {
    if (::ioctl(out, FICLONE, in) == 0) {
      auto hashed = sha256_of_file(out, out_display);
      if (!hashed) {
        return hashed.error();
      }
      digest = *hashed;
      if (progress) {
        progress(size);
      }
      return uint64_t{0};
    }
    if (!method_refused(errno)) {
      return sys_error("clone " + in_quotes(in_display) + " to " + in_quotes(out_display));
    }
    downgrade(in_dev, out_dev, CopyMethod::copy_range);
  }
  thread_local std::optional<Sha256> sha;
  if (!sha) {
    sha.emplace();
  }
  char* buffer = thread_buffer(0);
  uint64_t done = 0;
  while (done < size) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(k_buffer_size, size - done));
    const ssize_t n = read_full(in, buffer, want);
    if (n < 0) {
      const int error = errno;
      (void)sha->final_digest();  // starts over for the next file
      return sys_error("read " + in_quotes(in_display), error);
    }
    if (n == 0) {
      break;  // the file shrank: what was written is what is hashed
    }
    sha->update(std::as_bytes(std::span(buffer, static_cast<size_t>(n))));
    if (auto written = write_full(out, buffer, static_cast<size_t>(n), out_display); !written) {
      (void)sha->final_digest();
      return sys_error("copy " + in_quotes(in_display) + " to " + in_quotes(out_display), written.error().errnum);
    }
    done += static_cast<uint64_t>(n);
    if (progress && (done % k_range_chunk < static_cast<uint64_t>(n) || done == size)) {
      progress(done);
    }
  }
  digest = sha->final_digest();
  return done;
}

Expected<bool> same_content(int a, int b, std::string_view a_display, std::string_view b_display) {
  char* buffer_a = thread_buffer(0);
  char* buffer_b = thread_buffer(1);
  off_t offset = 0;
  for (;;) {
    const ssize_t n = ::pread(a, buffer_a, k_buffer_size, offset);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return sys_error("read " + in_quotes(a_display));
    }
    ssize_t m = 0;
    while (m < n || n == 0) {
      const ssize_t got = ::pread(b, buffer_b + m, static_cast<size_t>((n == 0 ? 1 : n) - m), offset + m);
      if (got < 0) {
        if (errno == EINTR) {
          continue;
        }
        return sys_error("read " + in_quotes(b_display));
      }
      if (got == 0) {
        break;
      }
      m += got;
      if (n == 0) {
        break;
      }
    }
    if (n == 0) {
      return m == 0;
    }
    if (m != n || std::memcmp(buffer_a, buffer_b, static_cast<size_t>(n)) != 0) {
      return false;
    }
    offset += n;
  }
}

}  // namespace hoist
