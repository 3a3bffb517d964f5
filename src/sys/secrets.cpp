#include "hoist/sys/secrets.hpp"

#include <sys/prctl.h>

#include <openssl/crypto.h>

namespace hoist {

void secure_erase(std::string& text) noexcept {
  OPENSSL_cleanse(text.data(), text.size());
}

Expected<void> forbid_core_dumps() {
  if (::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
    return sys_error("make the process non-dumpable");
  }
  return {};
}

}  // namespace hoist
