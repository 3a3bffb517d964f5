#include "hoist/sys/posix_acl.hpp"

#include <algorithm>
#include <tuple>

namespace hoist {

namespace {

constexpr uint32_t k_xattr_version = 2;
constexpr uint32_t k_undefined_id = 0xffffffffU;

void put_le(std::string& out, uint32_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) {
    out.push_back(static_cast<char>((value >> (8 * i)) & 0xffU));
  }
}

}  // namespace

std::string encode_posix_acl(std::vector<PosixAclEntry> entries) {
  for (PosixAclEntry& entry : entries) {
    if (entry.tag != PosixAclEntry::user && entry.tag != PosixAclEntry::group) {
      entry.id = k_undefined_id;
    }
  }
  std::sort(entries.begin(), entries.end(), [](const PosixAclEntry& a, const PosixAclEntry& b) {
    return std::tie(a.tag, a.id) < std::tie(b.tag, b.id);
  });
  std::string value;
  value.reserve(4 + 8 * entries.size());
  put_le(value, k_xattr_version, 4);
  for (const PosixAclEntry& entry : entries) {
    put_le(value, entry.tag, 2);
    put_le(value, entry.perm, 2);
    put_le(value, entry.id, 4);
  }
  return value;
}

}  // namespace hoist
