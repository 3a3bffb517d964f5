#include "hoist/util/error.hpp"

#include <cstring>

#include "hoist/util/expected.hpp"

namespace hoist {

std::string errno_text(int errnum) {
  char buffer[256];
  // GNU strerror_r returns the message, which may or may not be in buffer.
  return ::strerror_r(errnum, buffer, sizeof buffer);
}

std::string system_message(std::string_view what, int errnum) {
  std::string message = "failed to ";
  message += what;
  message += ": ";
  message += errno_text(errnum);
  return message;
}

SysError sys_error(std::string_view what, int errnum) {
  return SysError{system_message(what, errnum), errnum};
}

}  // namespace hoist
