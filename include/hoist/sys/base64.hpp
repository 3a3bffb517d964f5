#pragma once

#include <string>
#include <string_view>

#include "hoist/util/expected.hpp"

namespace hoist {

/// Decodes standard base64 (RFC 4648 section 4), as kubeconfig `*-data` fields
/// carry PEM and a signature file may carry a signature. Spaces, tabs and line
/// breaks (LF or CRLF) are ignored; anything else outside the alphabet, a last
/// group of fewer than 4 characters, or '=' padding anywhere but at the end (at
/// most two) is an error that names `what`. Empty text decodes to nothing.
Expected<std::string> base64_decode(std::string_view text, std::string_view what);

}  // namespace hoist
