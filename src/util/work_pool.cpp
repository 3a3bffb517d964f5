#include "hoist/util/work_pool.hpp"

#include <algorithm>
#include <system_error>
#include <utility>

namespace hoist {

WorkPool::WorkPool(unsigned threads) : m_threads(threads) {
  if (m_threads == 0) {
    m_threads = std::max(1U, std::thread::hardware_concurrency());
  }
}

void WorkPool::submit(std::function<void()> task) {
  {
    std::lock_guard lock(m_mutex);
    if (m_cancelled.load(std::memory_order_relaxed)) {
      return;
    }
    m_tasks.push_back(std::move(task));
  }
  m_changed.notify_one();
}

void WorkPool::work(const std::function<void()>* on_idle, std::chrono::milliseconds interval) {
  std::unique_lock lock(m_mutex);
  for (;;) {
    if (m_tasks.empty()) {
      if (m_active == 0) {
        // Nothing queued and nothing running that could queue more: done.
        m_changed.notify_all();
        return;
      }
      if (on_idle != nullptr) {
        m_changed.wait_for(lock, interval);
        lock.unlock();
        (*on_idle)();
        lock.lock();
      } else {
        m_changed.wait(lock);
      }
      continue;
    }
    std::function<void()> task = std::move(m_tasks.back());
    m_tasks.pop_back();
    ++m_active;
    lock.unlock();
    try {
      task();
    } catch (...) {
      lock.lock();
      if (!m_error) {
        m_error = std::current_exception();
      }
      m_cancelled.store(true, std::memory_order_relaxed);
      m_tasks.clear();
      lock.unlock();
    }
    // Destroy the task (and what it holds, such as open directories) outside the lock.
    task = nullptr;
    lock.lock();
    --m_active;
    if (m_tasks.empty() && m_active == 0) {
      m_changed.notify_all();
    }
  }
}

void WorkPool::run(const std::function<void()>& on_idle, std::chrono::milliseconds interval) {
  std::vector<std::thread> helpers;
  for (unsigned i = 1; i < m_threads; ++i) {
    try {
      helpers.emplace_back([this, interval]() { work(nullptr, interval); });
    } catch (const std::system_error&) {
      // Fewer threads than asked (a pids limit): the caller's thread still runs everything.
      break;
    }
  }
  work(on_idle ? &on_idle : nullptr, interval);
  for (std::thread& helper : helpers) {
    helper.join();
  }
  std::exception_ptr error;
  {
    std::lock_guard lock(m_mutex);
    error = std::exchange(m_error, nullptr);
  }
  if (error) {
    std::rethrow_exception(error);
  }
}

}  // namespace hoist
