#include "openssl_ptr.hpp"

#include <openssl/err.h>

namespace hoist {

std::string openssl_error_text(OpenSslError which, std::string_view none) {
  const unsigned long code = which == OpenSslError::oldest ? ERR_get_error() : ERR_peek_last_error();
  ERR_clear_error();
  if (code == 0) {
    return std::string(none);
  }
  if (const char* reason = ERR_reason_error_string(code); reason != nullptr) {
    return reason;
  }
  char buffer[256];
  ERR_error_string_n(code, buffer, sizeof buffer);
  return buffer;
}

}  // namespace hoist
