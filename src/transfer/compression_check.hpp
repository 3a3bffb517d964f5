#pragma once

// Internal to the transfer engine: the archive stager's check of the
// compression's own integrity, beside the staging.

#include <atomic>
#include <optional>
#include <string>
#include <thread>

#include "hoist/sys/archive_reader.hpp"
#include "hoist/util/expected.hpp"

namespace hoist::transfer {

/// ArchiveReader::check_compression() on a thread of its own, from construction until wait().
class CompressionCheck {
 public:
  /// Starts the check of `reader`, which must outlive this object.
  explicit CompressionCheck(const ArchiveReader& reader);
  CompressionCheck(const CompressionCheck&) = delete;
  CompressionCheck& operator=(const CompressionCheck&) = delete;
  /// Stops a check still running and waits for its thread.
  ~CompressionCheck();

  /// Waits for the verdict: throws Error(verification) naming `archive` when it is damaged, Failure when it could
  /// not be read. A second call returns at once.
  void wait(const std::string& archive);

 private:
  std::atomic<bool> m_stop{false};
  std::optional<Expected<std::optional<std::string>>> m_verdict;
  std::thread m_thread;  ///< last: it starts once the others exist
};

}  // namespace hoist::transfer
