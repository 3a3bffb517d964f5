#pragma once

#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "hoist/util/expected.hpp"

namespace hoist {

/// Parses the first document of a YAML text (libyaml) into JSON, for files
/// people write in YAML, such as a kubeconfig. Mappings become objects,
/// sequences arrays; a plain `null`, `~` or empty scalar becomes null and every
/// other scalar a string (callers that need numbers or booleans convert
/// themselves: YAML 1.1 typing is a trap, `no` is a boolean; see yaml_true()).
/// Refuses anchors and aliases (an alias bomb would otherwise grow without bound),
/// duplicate keys and non-scalar keys. `source` names the file in errors, with the
/// line and column; messages never quote the text.
Expected<nlohmann::json> parse_yaml(std::string_view text, std::string_view source);

/// Whether a scalar is true in YAML 1.1, as kubectl (go-yaml v2) reads a plain
/// scalar: `y`, `yes`, `true`, `on` and their capitalised and upper-case forms.
[[nodiscard]] bool yaml_true(std::string_view text) noexcept;

/// Whether a scalar is false in YAML 1.1: `n`, `no`, `false`, `off` and their
/// capitalised and upper-case forms.
[[nodiscard]] bool yaml_false(std::string_view text) noexcept;

}  // namespace hoist
