#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hoist {

/// One entry of a POSIX ACL, with the kernel's tag values.
struct PosixAclEntry {
  enum Tag : uint16_t { user_obj = 0x01, user = 0x02, group_obj = 0x04, group = 0x08, mask = 0x10, other = 0x20 };
  uint16_t tag = 0;
  uint16_t perm = 0;  ///< 4 read, 2 write, 1 execute
  uint32_t id = 0;    ///< uid or gid for user and group entries
};

/// The value of a `system.posix_acl_access` or `system.posix_acl_default`
/// xattr for `entries`, as the kernel stores and returns it: version 2, then
/// each entry as little-endian {u16 tag, u16 perm, u32 id}, sorted by tag and id
/// (the kernel refuses unsorted ACLs), id -1 for the entries without one.
std::string encode_posix_acl(std::vector<PosixAclEntry> entries);

}  // namespace hoist
