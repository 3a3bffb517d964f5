#include "hoist/sys/base64.hpp"

#include <cctype>
#include <cerrno>

#include <openssl/evp.h>

namespace hoist {

Expected<std::string> base64_decode(std::string_view text, std::string_view what) {
  std::string compact;
  compact.reserve(text.size());
  for (const char c : text) {
    if (std::isspace(static_cast<unsigned char>(c)) == 0) {
      compact += c;
    }
  }
  const SysError invalid{"failed to decode " + std::string(what) + ": not valid base64", EINVAL};
  if (compact.size() % 4 != 0) {
    return invalid;
  }
  std::string out(compact.size() / 4 * 3, '\0');
  const int length =
      EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                      reinterpret_cast<const unsigned char*>(compact.data()), static_cast<int>(compact.size()));
  if (length < 0) {
    return invalid;
  }
  // EVP_DecodeBlock counts the bytes that '=' padding stands for; drop them.
  std::size_t padding = 0;
  for (auto it = compact.rbegin(); it != compact.rend() && *it == '=' && padding < 2; ++it) {
    ++padding;
  }
  out.resize(static_cast<std::size_t>(length) - padding);
  return out;
}

}  // namespace hoist
