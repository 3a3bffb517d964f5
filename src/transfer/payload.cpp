#include "hoist/transfer/payload.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <fstream>
#include <string_view>

#include "hoist/sys/archive_reader.hpp"
#include "hoist/sys/compressed_stream.hpp"
#include "hoist/util/error.hpp"
#include "hoist/util/fd.hpp"
#include "hoist/util/text.hpp"

namespace hoist {

namespace {

/// The compression `path` starts with; nullopt, with its name in `unsupported`, for one hoist does not read.
std::optional<Compression> compression_of(const std::filesystem::path& path, std::string& unsupported) {
  std::ifstream in(path, std::ios::binary);
  char head[16] = {};
  in.read(head, sizeof head);
  return detect_compression(std::string_view(head, static_cast<size_t>(in.gcount())), unsupported);
}

}  // namespace

Payload Payload::open(const std::filesystem::path& source) {
  struct stat st {};
  // The payload path is the container's own: a symlink to the payload is fine to follow.
  if (::stat(source.c_str(), &st) != 0) {
    if (errno == ENOENT) {
      throw UsageError("payload " + in_quotes(source.string()) + " does not exist");
    }
    throw UsageError(system_message("access payload " + in_quotes(source.string()), errno));
  }
  if (S_ISDIR(st.st_mode)) {
    return Payload(source, PayloadType::directory);
  }
  if (!S_ISREG(st.st_mode)) {
    throw UsageError("payload " + in_quotes(source.string()) + " is neither a directory nor a regular file");
  }
  // An archive is whatever libarchive can read a first header of.
  auto reader = ArchiveReader::open(source);
  if (!reader) {
    if (reader.error().errnum == EACCES || reader.error().errnum == EPERM) {
      throw UsageError(reader.error().message);
    }
    return file_payload(source);
  }
  auto first = reader->next();
  return first ? Payload(source, PayloadType::archive) : file_payload(source);
}

Payload Payload::file_payload(const std::filesystem::path& source) {
  Payload payload(source, PayloadType::file);
  payload.m_compression = compression_of(source, payload.m_unsupported_compression);
  return payload;
}

std::optional<std::string> Payload::compression_problem() const {
  if (m_compression.value_or(Compression::none) == Compression::none) {
    return std::nullopt;
  }
  const Fd fd(::open(m_path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (!fd) {
    throw Failure(system_message("open " + in_quotes(m_path.string()), errno));
  }
  return check_compressed_stream(fd.get(), *m_compression).value();
}

}  // namespace hoist
