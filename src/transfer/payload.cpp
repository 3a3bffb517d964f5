#include "hoist/transfer/payload.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <string_view>

#include "hoist/sys/archive_reader.hpp"
#include "hoist/sys/compressed_stream.hpp"
#include "hoist/util/error.hpp"
#include "hoist/util/fd.hpp"
#include "hoist/util/text.hpp"

namespace hoist {

namespace {

/// The compression the file `fd` starts with; nullopt, with its name in `unsupported`, for one hoist does not read.
std::optional<Compression> compression_of(int fd, std::string& unsupported) {
  char head[16] = {};
  const ssize_t n = ::pread(fd, head, sizeof head, 0);
  return detect_compression(std::string_view(head, n > 0 ? static_cast<size_t>(n) : 0), unsupported);
}

bool same_time(const timespec& a, const timespec& b) {
  return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

}  // namespace

Payload Payload::open(const std::filesystem::path& source) {
  const std::string shown = in_quotes(source.string());
  struct stat st {};
  // The payload path is the container's own: a symlink to the payload is fine to follow.
  if (::stat(source.c_str(), &st) != 0) {
    if (errno == ENOENT) {
      throw UsageError("payload " + shown + " does not exist");
    }
    throw UsageError(system_message("access payload " + shown, errno));
  }
  if (S_ISDIR(st.st_mode)) {
    return Payload(source, PayloadType::directory);
  }
  if (!S_ISREG(st.st_mode)) {
    throw UsageError("payload " + shown + " is neither a directory nor a regular file");
  }
  // O_NONBLOCK: a FIFO put there since stat() must not hang the open; fstat() refuses it.
  Fd file(::open(source.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!file) {
    throw UsageError(system_message("open payload " + shown, errno));
  }
  if (::fstat(file.get(), &st) != 0) {
    throw Failure(system_message("stat payload " + shown, errno));
  }
  if (!S_ISREG(st.st_mode)) {
    throw UsageError("payload " + shown + " is neither a directory nor a regular file");
  }
  Payload payload(source, PayloadType::file);
  payload.m_file = std::make_shared<const Fd>(std::move(file));
  payload.m_written = Written{st.st_size, st.st_mtim, st.st_ctim};
  // An archive is whatever libarchive can read a first header of.
  auto reader = ArchiveReader::open(payload.reopen(), source.string());
  if (!reader) {
    return file_payload(std::move(payload));
  }
  // A first entry whose name cannot be decoded was still read: an archive, which the stager refuses.
  if (auto first = reader->next(); first || first.error().errnum == EILSEQ) {
    payload.m_type = PayloadType::archive;
    return payload;
  }
  return file_payload(std::move(payload));
}

Payload Payload::file_payload(Payload payload) {
  payload.m_compression = compression_of(payload.m_file->get(), payload.m_unsupported_compression);
  return payload;
}

std::optional<std::string> Payload::compression_problem() const {
  if (m_compression.value_or(Compression::none) == Compression::none) {
    return std::nullopt;
  }
  const Fd fd = reopen();
  return check_compressed_stream(fd.get(), *m_compression).value();
}

Fd Payload::reopen() const {
  if (!m_file) {
    throw Failure("cannot reopen payload " + in_quotes(m_path.string()) + ": it is a directory");
  }
  // /proc/self/fd/N names the open file itself, not the path it was opened by: this is a new open file
  // (with its own offset, so that readers on several threads never share one) of the same inode.
  const std::string link = "/proc/self/fd/" + std::to_string(m_file->get());
  Fd fd(::open(link.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (!fd) {
    throw Failure(
        system_message("reopen payload " + in_quotes(m_path.string()) + " through " + in_quotes(link), errno));
  }
  return fd;
}

void Payload::check_unchanged() const {
  if (!m_file) {
    return;
  }
  struct stat st {};
  if (::fstat(m_file->get(), &st) != 0) {
    throw Failure(system_message("stat payload " + in_quotes(m_path.string()), errno));
  }
  if (st.st_size != m_written.size || !same_time(st.st_mtim, m_written.modified) ||
      !same_time(st.st_ctim, m_written.changed)) {
    throw Error(ExitCode::verification, "payload " + in_quotes(m_path.string()) +
                                            " changed while hoist read it (written to, replaced or its metadata "
                                            "changed): the bytes staged may not be the bytes verified");
  }
}

}  // namespace hoist
