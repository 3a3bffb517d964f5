#pragma once

#include <string>
#include <string_view>

#include "hoist/util/expected.hpp"

namespace hoist {

/// Decodes standard base64 (OpenSSL's decoder), as kubeconfig `*-data` fields
/// carry PEM. Whitespace and line breaks are ignored; anything else invalid is
/// an error that names `what`.
Expected<std::string> base64_decode(std::string_view text, std::string_view what);

}  // namespace hoist
