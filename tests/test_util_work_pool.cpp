// WorkPool: tasks that submit tasks, first error wins, no thread outlives run().

#include "hoist/util/work_pool.hpp"

#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string>

#include "scoped_temp_dir.hpp"

using hoist::test::thread_count;
using hoist::test::thread_count_settled;

TEST_CASE("run() runs every task and every task they submit, on the threads asked for", "[work-pool]") {
  const int before = thread_count();
  for (const unsigned threads : {1U, 2U, 4U}) {
    hoist::WorkPool pool(threads);
    std::atomic<int> done{0};
    std::mutex mutex;
    std::set<std::thread::id> ids;
    std::function<void(int)> task = [&](int depth) {
      {
        std::lock_guard lock(mutex);
        ids.insert(std::this_thread::get_id());
      }
      ++done;
      if (depth < 10) {
        pool.submit([&task, depth]() { task(depth + 1); });
        pool.submit([&task, depth]() { task(depth + 1); });
      }
    };
    pool.submit([&task]() { task(0); });
    int idle_calls = 0;
    pool.run([&]() { ++idle_calls; }, std::chrono::milliseconds(1));
    CHECK(done == (1 << 11) - 1);
    CHECK(ids.size() <= threads);
    if (threads == 1) {
      CHECK(*ids.begin() == std::this_thread::get_id());
    }
    CHECK(thread_count_settled(before) == before);
  }
}

TEST_CASE("the first exception of a task ends run(), after its threads are joined", "[work-pool]") {
  const int before = thread_count();
  for (const unsigned threads : {1U, 2U}) {
    hoist::WorkPool pool(threads);
    std::atomic<int> ran{0};
    for (int i = 0; i < 1000; ++i) {
      pool.submit([&ran, i]() {
        ++ran;
        if (i == 990) {
          throw std::runtime_error("task 990 failed");
        }
      });
    }
    CHECK_THROWS_WITH(pool.run({}, std::chrono::milliseconds(10)), "task 990 failed");
    CHECK(pool.cancelled());
    if (threads == 1) {
      // LIFO on one thread: 999 down to 990 ran, and the queued rest were dropped.
      CHECK(ran == 10);
    }
    // With two threads the other one may run every task while the first throw
    // unwinds (slow in a large static binary): only the join is certain.
    CHECK(thread_count_settled(before) == before);
  }
}
