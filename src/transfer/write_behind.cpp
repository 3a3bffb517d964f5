#include "write_behind.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <span>
#include <thread>

#include "hoist/sys/sha256.hpp"

#include "hoist/util/error.hpp"
#include "transfer_support.hpp"

namespace hoist::transfer {

namespace {

// Files up to this size are handed over, up to this many bytes and open files
// at a time (memory and the fd limit), in batches of this many files or bytes.
// 8 MiB in flight measured as fast as 64 MiB did, on 100,000 small files and on
// 2,000 files of 200 KiB; when the disk is slower than the archive, it is what
// the stager's peak memory grows by.
constexpr uint64_t k_file_bytes = uint64_t{256} << 10U;
constexpr uint64_t k_in_flight_bytes = uint64_t{8} << 20U;
constexpr uint64_t k_in_flight_files = 256;
constexpr size_t k_batch_files = 64;
constexpr size_t k_batch_bytes = size_t{1} << 20U;

}  // namespace

bool WriteBehind::accepts(uint64_t size) const {
  return m_pool.threads() > 1 && size <= k_file_bytes &&
         m_in_flight_bytes.load(std::memory_order_relaxed) + size <= k_in_flight_bytes &&
         m_in_flight_files.load(std::memory_order_relaxed) < k_in_flight_files;
}

void WriteBehind::add(Fd fd, const NodeMeta& meta, const Xattrs& xattrs, const InitialMode& initial, std::string path,
                      const DataReader& read) {
  if (!m_batch) {
    m_batch = std::make_shared<Batch>();
  }
  Batch& batch = *m_batch;
  const size_t start = batch.data.size();
  read(batch.data, start);
  const size_t size = batch.data.size() - start;
  batch.files.push_back(File{std::move(fd), start, size, meta, xattrs, initial, std::move(path)});
  m_in_flight_bytes.fetch_add(size, std::memory_order_relaxed);
  m_in_flight_files.fetch_add(1, std::memory_order_relaxed);
  if (batch.files.size() >= k_batch_files || batch.data.size() >= k_batch_bytes) {
    flush();
  }
}

void WriteBehind::flush() {
  if (!m_batch) {
    return;
  }
  m_pool.submit([this, batch = std::move(m_batch)]() {
    for (File& file : batch->files) {
      finish(file, std::string_view(batch->data).substr(file.offset, file.size));
      m_in_flight_bytes.fetch_sub(file.size, std::memory_order_relaxed);
      m_in_flight_files.fetch_sub(1, std::memory_order_release);
    }
    m_counters.poll();
  });
  m_batch.reset();
}

void WriteBehind::wait() {
  flush();
  while (m_in_flight_files.load(std::memory_order_acquire) > 0) {
    if (m_pool.cancelled()) {
      // A batch failed and the rest were dropped: the pool reports that error.
      throw Failure("failed to finish the files in flight: a transfer task failed");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

void WriteBehind::finish(File& file, std::string_view data) {
  for (size_t done = 0; done < data.size();) {
    const ssize_t n = ::pwrite(file.fd.get(), data.data() + done, data.size() - done, static_cast<off_t>(done));
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      throw Failure(system_message("write " + in_quotes(m_display(file.path)), errno));
    }
    done += static_cast<size_t>(n);
  }
  m_counters.count_written(data.size());
  apply_metadata(NodeRef{-1, nullptr, file.fd.get()}, file.meta, file.xattrs, ExistingXattrs::none,
                 m_display(file.path), &file.initial)
      .value();
  thread_local Sha256 sha;
  sha.update(std::as_bytes(std::span(data.data(), data.size())));
  ContentIndex::Entry entry{sha.final_digest(), {}, {}};
  struct stat st {};
  if (::fstat(file.fd.get(), &st) != 0) {
    throw Failure(system_message("stat " + in_quotes(m_display(file.path)), errno));
  }
  entry.stamp = FileStamp::of(st);
  const auto [dir, name] = split_parent(file.path);
  m_produced.add(dir, name, entry);
  file.fd.reset();
}

}  // namespace hoist::transfer
