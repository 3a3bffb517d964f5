#pragma once

// Internal to the transfer engine: small helpers its files share.

#include <algorithm>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "hoist/util/expected.hpp"
#include "hoist/util/text.hpp"

namespace hoist::transfer {

/// The threads of a transfer: `asked`, or twice the cores (at most 16) when 0.
/// A walk of small files waits on the disk about as long as it computes, so a
/// second thread per core keeps both the disk and the core busy.
inline unsigned transfer_threads(unsigned asked) {
  if (asked != 0) {
    return asked;
  }
  return std::clamp(2 * std::thread::hardware_concurrency(), 2U, 16U);
}

/// "a/b/c" → {"a/b", "c"}; "c" → {"", "c"}.
inline std::pair<std::string_view, std::string_view> split_parent(std::string_view path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string_view::npos) {
    return {std::string_view(), path};
  }
  return {path.substr(0, slash), path.substr(slash + 1)};
}

}  // namespace hoist::transfer
