#include "hoist/util/siphash.hpp"

#include <sys/random.h>

#include <chrono>

namespace hoist {

namespace {

constexpr uint64_t rotl(uint64_t x, unsigned bits) {
  return (x << bits) | (x >> (64U - bits));
}

struct SipState {
  uint64_t v0, v1, v2, v3;

  void round() {
    v0 += v1;
    v1 = rotl(v1, 13);
    v1 ^= v0;
    v0 = rotl(v0, 32);
    v2 += v3;
    v3 = rotl(v3, 16);
    v3 ^= v2;
    v0 += v3;
    v3 = rotl(v3, 21);
    v3 ^= v0;
    v2 += v1;
    v1 = rotl(v1, 17);
    v1 ^= v2;
    v2 = rotl(v2, 32);
  }

  void compress(uint64_t m) {
    v3 ^= m;
    round();
    round();
    v0 ^= m;
  }
};

uint64_t load_le(const unsigned char* p, size_t n) {
  uint64_t m = 0;
  for (size_t i = 0; i < n; ++i) {
    m |= uint64_t{p[i]} << (8U * i);
  }
  return m;
}

}  // namespace

uint64_t siphash24(uint64_t k0, uint64_t k1, std::string_view data) noexcept {
  SipState s{k0 ^ 0x736f6d6570736575ULL, k1 ^ 0x646f72616e646f6dULL, k0 ^ 0x6c7967656e657261ULL,
             k1 ^ 0x7465646279746573ULL};
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  const size_t blocks = data.size() / 8;
  for (size_t i = 0; i < blocks; ++i, p += 8) {
    s.compress(load_le(p, 8));
  }
  s.compress((uint64_t{data.size()} << 56U) | load_le(p, data.size() % 8));
  s.v2 ^= 0xff;
  for (int i = 0; i < 4; ++i) {
    s.round();
  }
  return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

std::array<uint64_t, 2> process_hash_key() noexcept {
  static const std::array<uint64_t, 2> key = [] {
    std::array<uint64_t, 2> made{};
    if (::getrandom(made.data(), sizeof(made), GRND_NONBLOCK) != static_cast<ssize_t>(sizeof(made))) {
      // No random pool to ask: still unknown to whoever wrote the input beforehand.
      const auto now = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
      made = {now ^ reinterpret_cast<uintptr_t>(&made), siphash24(now, reinterpret_cast<uintptr_t>(&rotl), "hoist")};
    }
    return made;
  }();
  return key;
}

}  // namespace hoist
