#include "hoist/sys/base64.hpp"

#include <cerrno>

#include <openssl/evp.h>

namespace hoist {

namespace {

bool is_base64_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/';
}

}  // namespace

Expected<std::string> base64_decode(std::string_view text, std::string_view what) {
  const SysError invalid{"failed to decode " + std::string(what) + ": not valid base64", EINVAL};
  std::string compact;
  compact.reserve(text.size());
  for (const char c : text) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      continue;
    }
    // EVP_DecodeBlock reads '=' anywhere as zero bits: only the checks here keep it to the end.
    if (!is_base64_char(c) && c != '=') {
      return invalid;
    }
    compact += c;
  }
  if (compact.size() % 4 != 0) {
    return invalid;
  }
  std::size_t padding = 0;
  if (const std::size_t first_pad = compact.find('='); first_pad != std::string::npos) {
    padding = compact.size() - first_pad;
    if (padding > 2 || compact.find_first_not_of('=', first_pad) != std::string::npos) {
      return invalid;
    }
  }
  std::string out(compact.size() / 4 * 3, '\0');
  const int length =
      EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                      reinterpret_cast<const unsigned char*>(compact.data()), static_cast<int>(compact.size()));
  if (length < 0) {
    return invalid;
  }
  // EVP_DecodeBlock counts the zero bytes that '=' padding stands for; drop them.
  out.resize(static_cast<std::size_t>(length) - padding);
  return out;
}

}  // namespace hoist
