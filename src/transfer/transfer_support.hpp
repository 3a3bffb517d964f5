#pragma once

// Internal to the transfer engine: small helpers its files share.

#include <string>
#include <string_view>
#include <utility>

#include "hoist/util/expected.hpp"
#include "hoist/util/text.hpp"

namespace hoist::transfer {

/// "a/b/c" → {"a/b", "c"}; "c" → {"", "c"}.
inline std::pair<std::string_view, std::string_view> split_parent(std::string_view path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string_view::npos) {
    return {std::string_view(), path};
  }
  return {path.substr(0, slash), path.substr(slash + 1)};
}

}  // namespace hoist::transfer
