#pragma once

#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "hoist/util/expected.hpp"

namespace hoist {

/// Parses the first document of a YAML text (libyaml) into JSON, for files
/// people write in YAML, such as a kubeconfig. Mappings become objects,
/// sequences arrays; a plain `null`, `~` or empty scalar becomes null and every
/// other scalar a string (callers that need numbers or booleans convert
/// themselves: YAML 1.1 typing is a trap, `no` is a boolean). `source` names the
/// file in errors, with the line and column libyaml reports.
Expected<nlohmann::json> parse_yaml(std::string_view text, std::string_view source);

}  // namespace hoist
