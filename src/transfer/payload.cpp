#include "hoist/transfer/payload.hpp"

#include <sys/stat.h>

#include <cerrno>

#include "hoist/sys/archive_reader.hpp"
#include "hoist/util/error.hpp"

namespace hoist {

Payload Payload::open(const std::filesystem::path& source) {
  struct stat st {};
  // The payload path is the container's own: a symlink to the payload is fine to follow.
  if (::stat(source.c_str(), &st) != 0) {
    if (errno == ENOENT) {
      throw UsageError("payload '" + source.string() + "' does not exist");
    }
    throw UsageError(system_message("access payload '" + source.string() + "'", errno));
  }
  if (S_ISDIR(st.st_mode)) {
    return Payload(source, PayloadType::directory);
  }
  if (!S_ISREG(st.st_mode)) {
    throw UsageError("payload '" + source.string() + "' is neither a directory nor a regular file");
  }
  // An archive is whatever libarchive can read a first header of.
  auto reader = ArchiveReader::open(source);
  if (!reader) {
    if (reader.error().errnum == EACCES || reader.error().errnum == EPERM) {
      throw UsageError(reader.error().message);
    }
    return Payload(source, PayloadType::file);
  }
  auto first = reader->next();
  return Payload(source, first ? PayloadType::archive : PayloadType::file);
}

}  // namespace hoist
