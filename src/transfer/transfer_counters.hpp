#pragma once

// Internal to the transfer engine (stage_tree, sync_tree): running totals that
// worker threads add to, and the progress calls made from them.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include "hoist/transfer/transfer.hpp"

namespace hoist::transfer {

/// How an entry compares with the same path in the tree compared against.
enum class Outcome { added, changed, unchanged };

/// TransferStats with atomic fields, and the throttled on_progress calls.
class Counters {
 public:
  explicit Counters(const TransferOptions& options)
      : m_options(options), m_owner(std::this_thread::get_id()), m_next(std::chrono::steady_clock::now()) {}

  /// One payload entry of `bytes` regular-file bytes (0 for other types), of
  /// which `reported` went to add_done() already while it was copied.
  void count(Outcome outcome, uint64_t bytes, uint64_t reported = 0) {
    switch (outcome) {
      case Outcome::added:
        add(m_files_added, 1);
        add(m_bytes_added, bytes);
        break;
      case Outcome::changed:
        add(m_files_changed, 1);
        add(m_bytes_changed, bytes);
        break;
      case Outcome::unchanged: add(m_files_unchanged, 1); break;
    }
    add(m_bytes_done, bytes > reported ? bytes - reported : 0);
  }
  /// Progress inside one big file.
  void add_done(uint64_t bytes) { add(m_bytes_done, bytes); }
  void count_removed(uint64_t files, uint64_t bytes) {
    add(m_files_removed, files);
    add(m_bytes_removed, bytes);
  }
  void count_written(uint64_t bytes) { add(m_bytes_written, bytes); }
  /// Set once, from any thread: before the walk, or by the count beside it (PayloadWalk::walk).
  void set_total(uint64_t bytes, bool estimated) {
    m_total_estimated.store(estimated, std::memory_order_relaxed);
    m_bytes_total.store(bytes, std::memory_order_release);
  }

  [[nodiscard]] TransferStats snapshot() const {
    TransferStats stats;
    stats.files_added = load(m_files_added);
    stats.files_changed = load(m_files_changed);
    stats.files_removed = load(m_files_removed);
    stats.files_unchanged = load(m_files_unchanged);
    stats.bytes_added = load(m_bytes_added);
    stats.bytes_changed = load(m_bytes_changed);
    stats.bytes_removed = load(m_bytes_removed);
    stats.bytes_written = load(m_bytes_written);
    stats.bytes_total = m_bytes_total.load(std::memory_order_acquire);
    stats.bytes_done = load(m_bytes_done);
    stats.bytes_total_estimated = m_total_estimated.load(std::memory_order_relaxed);
    return stats;
  }

  /// Calls on_progress when its interval has passed, only on the thread that
  /// called stage_tree/sync_tree (the callback need not be thread-safe). Cheap
  /// enough to call per entry: a vDSO clock read.
  void poll() {
    if (!m_options.on_progress || std::this_thread::get_id() != m_owner) {
      return;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now < m_next) {
      return;
    }
    m_next = now + k_interval;
    m_options.on_progress(snapshot());
  }

  static constexpr std::chrono::milliseconds k_interval{100};

 private:
  static void add(std::atomic<uint64_t>& field, uint64_t n) { field.fetch_add(n, std::memory_order_relaxed); }
  static uint64_t load(const std::atomic<uint64_t>& field) { return field.load(std::memory_order_relaxed); }

  const TransferOptions& m_options;
  std::thread::id m_owner;
  std::chrono::steady_clock::time_point m_next;
  std::atomic<uint64_t> m_files_added{0}, m_files_changed{0}, m_files_removed{0}, m_files_unchanged{0};
  std::atomic<uint64_t> m_bytes_added{0}, m_bytes_changed{0}, m_bytes_removed{0}, m_bytes_written{0};
  std::atomic<uint64_t> m_bytes_total{0}, m_bytes_done{0};
  std::atomic<bool> m_total_estimated{false};
};

}  // namespace hoist::transfer
