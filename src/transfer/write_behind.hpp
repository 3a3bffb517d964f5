#pragma once

// Internal to the transfer engine: small files whose data is in memory,
// written, given their metadata and closed by another thread, so that the
// thread reading an archive only reads and creates.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hoist/sys/metadata.hpp"
#include "hoist/transfer/content_index.hpp"
#include "hoist/util/fd.hpp"
#include "hoist/util/work_pool.hpp"
#include "transfer_counters.hpp"

namespace hoist::transfer {

/// Hands small new files to the other threads of a WorkPool, in batches (one
/// task per file costs more in wake-ups than it saves). Used from one thread.
class WriteBehind {
 public:
  /// `display` names a staged relative path in errors. Each file written goes into `produced` (its digest, taken
  /// of the bytes written, and its stamp once its metadata is set).
  WriteBehind(WorkPool& pool, Counters& counters, std::function<std::string(std::string_view)> display,
              ContentIndex& produced)
      : m_pool(pool), m_counters(counters), m_display(std::move(display)), m_produced(produced) {}

  /// Whether a file of `size` bytes may be handed over now: another thread
  /// runs, the file is small, and not too much is in flight.
  [[nodiscard]] bool accepts(uint64_t size) const;

  /// Fills a file's data: gets the buffer to grow, and the offset where the file starts in it.
  using DataReader = std::function<void(std::string& buffer, size_t start)>;

  /// Takes `fd` (a new, empty file at `path` of the staging tree), reads its
  /// data into memory with `read`, and leaves the rest (write, metadata as
  /// apply_metadata() with `initial`, close) to another thread.
  void add(Fd fd, const NodeMeta& meta, const Xattrs& xattrs, const InitialMode& initial, std::string path,
           const DataReader& read);

  /// Hands over the files gathered so far.
  void flush();

  /// Returns once every file handed over is written and closed.
  void wait();

 private:
  struct File {
    Fd fd;
    size_t offset = 0;  ///< of its data in Batch::data
    size_t size = 0;
    NodeMeta meta;
    Xattrs xattrs;
    InitialMode initial;
    std::string path;
  };
  struct Batch {
    std::vector<File> files;
    std::string data;
  };

  void finish(File& file, std::string_view data);

  WorkPool& m_pool;
  Counters& m_counters;
  std::function<std::string(std::string_view)> m_display;
  ContentIndex& m_produced;
  std::shared_ptr<Batch> m_batch;              ///< gathered and not handed over yet
  std::atomic<uint64_t> m_in_flight_bytes{0};  ///< read for files that other threads still write
  std::atomic<uint64_t> m_in_flight_files{0};
};

}  // namespace hoist::transfer
