#pragma once

#include <string>
#include <string_view>

namespace hoist {

/// The prefix of every temporary name hoist creates beside an entry it replaces.
/// In a directory only hoist writes (its state, a tree component's versions)
/// the prefix alone marks a killed run's leftover; in a directory the host owns
/// too (a sync destination) a host file may carry it, and only a name with the
/// run's recorded tag (temporary_name(name, tag)) is hoist's.
inline constexpr std::string_view k_temp_prefix = ".hoist-tmp.";

/// `length` random lowercase letters and digits (about 5.2 bits each).
std::string random_token(size_t length);

/// A fresh name for a temporary entry beside `name`:
/// `.hoist-tmp.<name>.<random>`, or with a `tag`, `.hoist-tmp.<tag>.<name>.<random>`.
/// `name` is cut to 200 bytes, so that the result fits in NAME_MAX (255 bytes).
std::string temporary_name(std::string_view name, std::string_view tag = {});

/// Whether `entry` is a name that temporary_name(…, `tag`) makes (`tag` not empty).
bool is_temporary_name(std::string_view entry, std::string_view tag);

}  // namespace hoist
