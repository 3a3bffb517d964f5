// libFuzzer target: version parsing and the total order of all three schemes.
// The input is a scheme byte, then up to three version texts separated by NUL.
// Every text either parses or is refused with hoist::UsageError (nothing else
// may escape), and the versions that parse must be totally ordered:
// reflexive, antisymmetric, transitive, == agreeing with <=>, and canonical()
// a spelling of the same version.

#include <array>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string_view>
#include <vector>

#include "hoist/model/version.hpp"
#include "hoist/util/error.hpp"

namespace {

void require(bool condition) {
  if (!condition) {
    std::abort();
  }
}

std::strong_ordering reversed(std::strong_ordering order) {
  return 0 <=> order;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) {
    return 0;
  }
  constexpr std::array<hoist::VersionScheme, 3> k_schemes = {hoist::VersionScheme::semver, hoist::VersionScheme::k3s,
                                                             hoist::VersionScheme::systemd};
  const hoist::VersionScheme scheme = k_schemes[data[0] % k_schemes.size()];
  std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  std::vector<hoist::Version> versions;
  for (int i = 0; i < 3; ++i) {
    const std::size_t nul = rest.find('\0');
    const std::string_view text = rest.substr(0, nul);
    try {
      versions.push_back(hoist::Version::parse(scheme, text));
    } catch (const hoist::UsageError&) {
      // refused: fine
    }
    if (nul == std::string_view::npos) {
      break;
    }
    rest.remove_prefix(nul + 1);
  }
  for (const hoist::Version& a : versions) {
    // Comparing a with itself is the point: the order and the equality must be reflexive.
    // NOLINTNEXTLINE(misc-redundant-expression)
    require((a <=> a) == std::strong_ordering::equal && a == a);
    require(a.text().size() <= hoist::Version::k_max_length);
    const hoist::Version again = hoist::Version::parse(scheme, a.canonical());
    require((again <=> a) == std::strong_ordering::equal);
    for (const hoist::Version& b : versions) {
      const std::strong_ordering ab = a <=> b;
      require((b <=> a) == reversed(ab));
      require((a == b) == (ab == std::strong_ordering::equal));
      for (const hoist::Version& c : versions) {
        if (ab <= 0 && (b <=> c) <= 0) {
          require((a <=> c) <= 0);
        }
      }
    }
  }
  return 0;
}
