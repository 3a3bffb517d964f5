#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace hoist {

/// Runs tasks, and the tasks they submit, on a few threads that exist only
/// inside run(): the process is single-threaded before and after it (setns()
/// into a mount namespace refuses a multi-threaded process). Tasks run last in,
/// first out, so that a tree walk goes depth first and keeps few directories open.
class WorkPool {
 public:
  /// `threads` is the number of threads that run tasks, the caller of run()
  /// included; 0 picks one per core. With 1, run() starts no thread at all.
  explicit WorkPool(unsigned threads);
  WorkPool(const WorkPool&) = delete;
  WorkPool& operator=(const WorkPool&) = delete;

  /// Queues a task. Callable from any thread, inside tasks too.
  void submit(std::function<void()> task);

  /// Runs every queued task, and what they submit, to the end; joins its threads
  /// before it returns. While the caller has no task to run it calls `on_idle`
  /// every `interval`. When a task throws, the queued tasks are dropped, the
  /// running ones finish, and run() rethrows the first exception.
  void run(const std::function<void()>& on_idle, std::chrono::milliseconds interval);

  /// True once a task has thrown: long tasks may stop early.
  [[nodiscard]] bool cancelled() const noexcept { return m_cancelled.load(std::memory_order_relaxed); }

  /// The number of threads run() uses, the caller included.
  [[nodiscard]] unsigned threads() const noexcept { return m_threads; }

 private:
  void work(const std::function<void()>* on_idle, std::chrono::milliseconds interval);

  unsigned m_threads;
  std::mutex m_mutex;
  std::condition_variable m_changed;
  std::vector<std::function<void()>> m_tasks;
  unsigned m_active = 0;
  std::exception_ptr m_error;
  std::atomic<bool> m_cancelled{false};
};

}  // namespace hoist
