#pragma once

// Internal to the transfer engine: the order in which directory metadata is
// applied and deletions are made.

#include <algorithm>
#include <string_view>
#include <vector>

namespace hoist::transfer {

/// Whether relative path `a` sorts after `b` when paths are compared component
/// by component ('/' below every other byte), so that sorting with it puts
/// every directory after everything under it and keeps each subtree together.
inline bool deeper_first(std::string_view a, std::string_view b) {
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    if (a[i] != b[i]) {
      const auto rank = [](char c) { return c == '/' ? 0 : static_cast<unsigned char>(c) + 1; };
      return rank(a[i]) > rank(b[i]);
    }
  }
  return a.size() > b.size();
}

/// Sorts records so that each directory comes after everything under it.
template <typename T, typename Key>
void sort_deepest_first(std::vector<T>& records, Key key) {
  std::sort(records.begin(), records.end(), [&](const T& a, const T& b) { return deeper_first(key(a), key(b)); });
}

}  // namespace hoist::transfer
