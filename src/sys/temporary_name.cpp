#include "hoist/sys/temporary_name.hpp"

#include <sys/random.h>

#include <cerrno>
#include <random>
#include <vector>

namespace hoist {

namespace {

// Room in NAME_MAX (255) for the prefix, a tag, two dots and the random part.
constexpr size_t k_name_keep = 200;
constexpr size_t k_random_length = 12;

}  // namespace

std::string random_token(size_t length) {
  // From the kernel at each call, not from a generator in memory: a forked child would share its state, and
  // make the same tag as its parent.
  std::vector<unsigned char> bytes(length);
  size_t got = 0;
  while (got < length) {
    const ssize_t n = ::getrandom(bytes.data() + got, length - got, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (errno != EINTR) {
      // Before the kernel's pool is ready (early boot, never in a Job): a seeded generator still names apart.
      std::random_device device;
      for (; got < length; ++got) {
        bytes[got] = static_cast<unsigned char>(device());
      }
    }
  }
  constexpr std::string_view k_alphabet = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::string token(length, 'x');
  for (size_t i = 0; i < length; ++i) {
    token[i] = k_alphabet[bytes[i] % k_alphabet.size()];
  }
  return token;
}

std::string temporary_name(std::string_view name, std::string_view tag) {
  std::string result(k_temp_prefix);
  if (!tag.empty()) {
    result += tag;
    result += '.';
  }
  result += name.substr(0, k_name_keep);
  result += '.';
  return result + random_token(k_random_length);
}

bool is_temporary_name(std::string_view entry, std::string_view tag) {
  if (tag.empty() || !entry.starts_with(k_temp_prefix)) {
    return false;
  }
  entry.remove_prefix(k_temp_prefix.size());
  return entry.starts_with(tag) && entry.substr(tag.size()).starts_with('.');
}

}  // namespace hoist
