#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace hoist {

/// SipHash-2-4 (Aumasson and Bernstein, 2012) of `data` under the 128-bit key
/// {k0, k1}: a keyed hash for tables whose keys come from input, so that
/// nobody who does not know the key can choose keys that collide.
uint64_t siphash24(uint64_t k0, uint64_t k1, std::string_view data) noexcept;

/// A key for siphash24 from the kernel's random pool (getrandom), made once per
/// process; where that fails (no getrandom), from the clock and addresses.
std::array<uint64_t, 2> process_hash_key() noexcept;

}  // namespace hoist
