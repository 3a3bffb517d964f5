#include "hoist/sys/copy_with_metadata.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "hoist/sys/data_copier.hpp"
#include "hoist/sys/metadata.hpp"
#include "hoist/util/fd.hpp"
#include "hoist/util/text.hpp"

namespace hoist {

Expected<uint64_t> copy_with_metadata(int source, int dirfd, const std::string& name, std::string_view display,
                                      const std::function<void(uint64_t)>& on_progress, Sha256Digest* digest) {
  struct stat st {};
  if (::fstat(source, &st) != 0) {
    return sys_error("stat the source of " + in_quotes(display));
  }
  if (::lseek(source, 0, SEEK_SET) != 0) {
    return sys_error("seek the source of " + in_quotes(display));
  }
  // Readable too: a clone is hashed from the copy (DataCopier::copy_hashed).
  Fd target(::openat(dirfd, name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!target) {
    return sys_error("create " + in_quotes(display));
  }
  auto fail = [&](SysError error) -> Expected<uint64_t> {
    ::unlinkat(dirfd, name.c_str(), 0);
    return error;
  };
  struct stat target_st {};
  if (::fstat(target.get(), &target_st) != 0) {
    return fail(sys_error("stat " + in_quotes(display)));
  }
  DataCopier copier;
  const auto size = static_cast<uint64_t>(st.st_size);
  auto written = digest != nullptr ? copier.copy_hashed(source, st.st_dev, target.get(), target_st.st_dev, size,
                                                        *digest, "the source", display, on_progress)
                                   : copier.copy(source, st.st_dev, target.get(), target_st.st_dev, size, "the source",
                                                 display, on_progress);
  if (!written) {
    return fail(written.error());
  }
  // The metadata as the tree kind writes it (owner, xattrs with ACLs and security.capability, mode, mtime, in
  // the order that keeps them all): a file payload is a binary as often as not, and its capabilities are part
  // of what it is. Reconciled, because the new inode may already carry a default ACL or an LSM label.
  auto xattrs = read_xattrs(NodeRef{.fd = source}, "the source of '" + std::string(display) + "'");
  if (!xattrs) {
    return fail(xattrs.error());
  }
  const NodeRef node{.dirfd = dirfd, .name = name.c_str(), .fd = target.get()};
  if (auto applied = apply_metadata(node, NodeMeta::from_stat(st), *xattrs, ExistingXattrs::reconcile, display);
      !applied) {
    return fail(applied.error());
  }
  if (::fsync(target.get()) != 0) {
    return fail(sys_error("fsync " + in_quotes(display)));
  }
  return *written;
}

}  // namespace hoist
