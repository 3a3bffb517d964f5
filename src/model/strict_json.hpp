#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "hoist/util/expected.hpp"

namespace hoist {

/// Parses `text` as one JSON document, refusing what nlohmann would accept
/// silently: a key that appears twice in an object (nlohmann keeps the last).
/// On failure the message names the kind of error and where it is ("parse error
/// at line 3, column 5: syntax error while parsing value - invalid literal",
/// "$.components[0].name: duplicate key", "a number is out of range"), never a
/// value from the text: the file may be a secret named by mistake, and a token
/// must not reach a log. The message has no prefix; callers add the file.
Expected<nlohmann::json> parse_strict_json(std::string_view text);

}  // namespace hoist
