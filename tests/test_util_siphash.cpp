#include <catch2/catch.hpp>

#include <cstdint>
#include <set>
#include <string>

#include "hoist/util/siphash.hpp"

namespace {

// The reference key and messages of the SipHash paper's test vectors: key
// 00 01 .. 0f, message 00 01 .. (n-1) for the n-th vector.
constexpr uint64_t k_k0 = 0x0706050403020100ULL;
constexpr uint64_t k_k1 = 0x0f0e0d0c0b0a0908ULL;

std::string message(size_t size) {
  std::string bytes;
  for (size_t i = 0; i < size; ++i) {
    bytes.push_back(static_cast<char>(i));
  }
  return bytes;
}

}  // namespace

TEST_CASE("siphash24 gives the reference implementation's test vectors", "[siphash]") {
  CHECK(hoist::siphash24(k_k0, k_k1, message(0)) == 0x726fdb47dd0e0e31ULL);
  CHECK(hoist::siphash24(k_k0, k_k1, message(1)) == 0x74f839c593dc67fdULL);
  CHECK(hoist::siphash24(k_k0, k_k1, message(8)) == 0x93f5f5799a932462ULL);
  CHECK(hoist::siphash24(k_k0, k_k1, message(15)) == 0xa129ca6149be45e5ULL);
}

TEST_CASE("the process's hash key is random, made once, and changes the hash", "[siphash]") {
  const auto key = hoist::process_hash_key();
  CHECK(key == hoist::process_hash_key());
  CHECK((key[0] != 0 || key[1] != 0));
  CHECK(hoist::siphash24(key[0], key[1], "name") != hoist::siphash24(key[0] ^ 1U, key[1], "name"));
  std::set<uint64_t> hashes;
  for (int i = 0; i < 1000; ++i) {
    hashes.insert(hoist::siphash24(key[0], key[1], "f" + std::to_string(i)));
  }
  CHECK(hashes.size() == 1000);
}
