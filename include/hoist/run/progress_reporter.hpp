#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "hoist/transfer/transfer.hpp"

namespace hoist {

/// How progress is shown.
enum class ProgressStyle {
  bar,    ///< a live bar on a terminal, redrawn in place
  lines,  ///< one log line every few seconds (a Job's log)
  none,
};

/// "1.5 MiB", "312 B": bytes for people.
std::string format_bytes(uint64_t bytes);

/// One progress line: files, bytes (of the total when known), rate, time left:
/// "1200 files, 120.0 MiB of 300.0 MiB (40%), 60.0 MiB/s, 3 s left".
std::string format_progress(const TransferStats& stats, double elapsed_seconds);

/// The bar, `width` columns at most: "[#######.............]  40% 1200 files 120.0 MiB/300.0 MiB 60.0 MiB/s 0:03 left".
std::string format_progress_bar(const TransferStats& stats, double elapsed_seconds, int width);

/// Drives the progress display from TransferOptions::on_progress. Runs on the
/// caller's thread and never starts one (hoist stays single-threaded until it
/// has entered the host's mount namespace): it redraws, or logs, only when an
/// update arrives and enough time has passed since the last.
class ProgressReporter {
 public:
  using Clock = std::chrono::steady_clock;

  ProgressReporter(std::string label, ProgressStyle style, std::FILE* out = stderr,
                   std::chrono::milliseconds log_interval = std::chrono::seconds(5));
  ProgressReporter(const ProgressReporter&) = delete;
  ProgressReporter& operator=(const ProgressReporter&) = delete;
  /// Clears the bar, so that the next log line starts on a clean line.
  ~ProgressReporter();

  /// Takes the running totals; draws or logs when it is time.
  void update(const TransferStats& stats);
  /// Clears the bar (idempotent).
  void finish();

 private:
  std::string m_label;
  ProgressStyle m_style;
  std::FILE* m_out;
  std::chrono::milliseconds m_interval;
  Clock::time_point m_start;
  Clock::time_point m_last;
  bool m_drawn = false;
};

}  // namespace hoist
