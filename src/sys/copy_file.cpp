#include "hoist/sys/copy_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>

#include "hoist/sys/file_copy.hpp"
#include "hoist/util/fd.hpp"

namespace hoist {

Expected<uint64_t> copy_file_to(int source, int dirfd, const std::string& name, std::string_view display,
                                const std::function<void(uint64_t)>& on_progress) {
  struct stat st {};
  if (::fstat(source, &st) != 0) {
    return sys_error("stat the source of '" + std::string(display) + "'");
  }
  if (::lseek(source, 0, SEEK_SET) != 0) {
    return sys_error("seek the source of '" + std::string(display) + "'");
  }
  Fd target(::openat(dirfd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!target) {
    return sys_error("create '" + std::string(display) + "'");
  }
  auto fail = [&](SysError error) -> Expected<uint64_t> {
    ::unlinkat(dirfd, name.c_str(), 0);
    return error;
  };
  struct stat target_st {};
  if (::fstat(target.get(), &target_st) != 0) {
    return fail(sys_error("stat '" + std::string(display) + "'"));
  }
  FileCopier copier;
  auto written = copier.copy(source, st.st_dev, target.get(), target_st.st_dev, static_cast<uint64_t>(st.st_size),
                             "the source", display, on_progress);
  if (!written) {
    return fail(written.error());
  }
  // chown before chmod: chown clears setuid and setgid bits.
  if (::fchown(target.get(), st.st_uid, st.st_gid) != 0 && errno != EPERM) {
    return fail(sys_error("set the owner of '" + std::string(display) + "'"));
  }
  if (::fchmod(target.get(), st.st_mode & 07777) != 0) {
    return fail(sys_error("set the mode of '" + std::string(display) + "'"));
  }
  const std::array<timespec, 2> times{st.st_atim, st.st_mtim};
  if (::futimens(target.get(), times.data()) != 0) {
    return fail(sys_error("set the times of '" + std::string(display) + "'"));
  }
  if (::fsync(target.get()) != 0) {
    return fail(sys_error("fsync '" + std::string(display) + "'"));
  }
  return *written;
}

}  // namespace hoist
