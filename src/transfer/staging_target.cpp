#include "staging_target.hpp"

#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>

#include "hoist/sys/directory.hpp"
#include "hoist/util/error.hpp"
#include "transfer_support.hpp"

namespace hoist::transfer {

bool LinkDestClaims::claim(const struct stat& st) {
  if (st.st_nlink <= 1) {
    return true;
  }
  const std::lock_guard lock(m_mutex);
  return m_taken.insert(st.st_ino).second;
}

StagingTarget::StagingTarget(int staging_dir, int link_dest)
    : m_staging_display(fd_display(staging_dir)),
      m_compare_display(link_dest >= 0 ? fd_display(link_dest) : std::string()),
      m_staging(reopen_directory(staging_dir, m_staging_display).value()),
      m_compare(link_dest >= 0 ? reopen_directory(link_dest, m_compare_display).value() : Fd()) {
  struct stat st {};
  if (::fstat(m_staging.get(), &st) != 0) {
    throw Failure(system_message("stat " + in_quotes(m_staging_display), errno));
  }
  m_staging_dev = st.st_dev;
}

std::string StagingTarget::staging_display(std::string_view relpath) const {
  return relpath.empty() ? m_staging_display : m_staging_display + "/" + std::string(relpath);
}

std::string StagingTarget::compare_display(std::string_view relpath) const {
  return relpath.empty() ? m_compare_display : m_compare_display + "/" + std::string(relpath);
}

void StagingTarget::remove_default_acl() const {
  if (::fremovexattr(m_staging.get(), "system.posix_acl_default") != 0 && errno != ENODATA && errno != ENOTSUP) {
    throw Failure(system_message("remove the default ACL of " + in_quotes(m_staging_display), errno));
  }
}

WriteTarget StagingTarget::write_target(int dirfd, const char* name) const {
  return WriteTarget{dirfd, name, m_staging_dev, ExistingXattrs::none, NewOwner::creator, m_creator};
}

InitialMode StagingTarget::new_file_mode(mode_t mode) const {
  return initial_mode(write_target(-1, nullptr), mode);
}

bool StagingTarget::link_unchanged(int compare_dir, int target_dir, const std::string& name, std::string_view relpath,
                                   const struct stat& existing) {
  if (!m_link_works.load(std::memory_order_relaxed) || !m_claims.claim(existing)) {
    return false;
  }
  if (::linkat(compare_dir, name.c_str(), target_dir, name.c_str(), 0) == 0) {
    return true;
  }
  // EXDEV: link_dest is elsewhere; EMLINK: that inode has all the links it can have.
  if (errno == EXDEV) {
    m_link_works.store(false, std::memory_order_relaxed);
    return false;
  }
  if (errno == EMLINK) {
    return false;
  }
  throw Failure(system_message(
      "link " + in_quotes(compare_display(relpath)) + " to " + in_quotes(staging_display(relpath)), errno));
}

}  // namespace hoist::transfer
