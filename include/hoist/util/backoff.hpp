#pragma once

#include <chrono>
#include <random>

namespace hoist {

/// Exponential backoff with jitter, as a client of a shared server should retry:
/// each delay doubles up to a cap, and is spread by ±20% so that many clients cut
/// off at once (every node's Job after an API server restart) do not come back
/// in lockstep.
class Backoff {
 public:
  Backoff(std::chrono::milliseconds initial, std::chrono::milliseconds cap)
      : m_initial(initial), m_cap(cap), m_next(initial), m_random(std::random_device{}()) {}

  /// The delay to wait now; the one after it is twice as long (up to the cap).
  std::chrono::milliseconds next() {
    const auto base = m_next;
    m_next = std::min(m_cap, m_next * 2);
    std::uniform_real_distribution<double> spread(0.8, 1.2);
    return std::chrono::milliseconds(static_cast<long long>(static_cast<double>(base.count()) * spread(m_random)));
  }

  /// Starts over after a success.
  void reset() { m_next = m_initial; }

 private:
  std::chrono::milliseconds m_initial;
  std::chrono::milliseconds m_cap;
  std::chrono::milliseconds m_next;
  std::minstd_rand m_random;
};

}  // namespace hoist
