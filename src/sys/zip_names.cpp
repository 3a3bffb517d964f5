#include "hoist/sys/zip_names.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string_view>
#include <utility>

namespace hoist {

namespace {

constexpr uint32_t k_local_signature = 0x04034b50;
constexpr uint32_t k_central_signature = 0x02014b50;
constexpr uint32_t k_end_signature = 0x06054b50;
constexpr uint32_t k_zip64_locator_signature = 0x07064b50;
constexpr uint32_t k_zip64_end_signature = 0x06064b50;
constexpr size_t k_end_size = 22;
constexpr size_t k_max_comment = 65535;

uint64_t le(std::string_view bytes, size_t at, size_t width) {
  uint64_t value = 0;
  for (size_t i = 0; i < width; ++i) {
    value |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  }
  return value;
}

SysError malformed(std::string_view why) {
  return SysError{"failed to read the zip's names: " + std::string(why), EILSEQ};
}

Expected<std::string> read_at(int fd, uint64_t offset, size_t size, uint64_t file_size) {
  if (offset > file_size || size > file_size - offset) {
    return malformed("a record lies past the end of the file");
  }
  std::string bytes(size, '\0');
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, bytes.data() + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      return sys_error("read the zip's central directory");
    }
    if (n == 0) {
      return malformed("the file ends inside a record");
    }
    done += static_cast<size_t>(n);
  }
  return bytes;
}

/// Where the central directory starts and how many records it has.
Expected<std::pair<uint64_t, uint64_t>> find_central_directory(int fd, uint64_t file_size) {
  const uint64_t tail_size = std::min<uint64_t>(file_size, k_end_size + k_max_comment);
  auto tail = read_at(fd, file_size - tail_size, static_cast<size_t>(tail_size), file_size);
  if (!tail) {
    return tail.error();
  }
  const std::string_view bytes = *tail;
  for (size_t at = bytes.size() >= k_end_size ? bytes.size() - k_end_size + 1 : 0; at-- > 0;) {
    if (le(bytes, at, 4) != k_end_signature) {
      continue;
    }
    uint64_t count = le(bytes, at + 10, 2);
    uint64_t offset = le(bytes, at + 16, 4);
    const uint64_t end_offset = file_size - tail_size + at;
    if ((count == 0xffff || offset == 0xffffffff) && end_offset >= 20) {
      auto locator = read_at(fd, end_offset - 20, 20, file_size);
      if (!locator) {
        return locator.error();
      }
      if (le(*locator, 0, 4) == k_zip64_locator_signature) {
        auto end64 = read_at(fd, le(*locator, 8, 8), 56, file_size);
        if (!end64) {
          return end64.error();
        }
        if (le(*end64, 0, 4) != k_zip64_end_signature) {
          return malformed("its zip64 end record is not where the locator says");
        }
        count = le(*end64, 32, 8);
        offset = le(*end64, 48, 8);
      }
    }
    return std::pair{offset, count};
  }
  return malformed("it has no end of central directory record");
}

}  // namespace

Expected<std::vector<std::string>> zip_local_names(int fd, uint64_t file_size) {
  auto directory = find_central_directory(fd, file_size);
  if (!directory) {
    return directory.error();
  }
  auto [at, count] = *directory;
  std::vector<uint64_t> offsets;
  for (uint64_t i = 0; i < count; ++i) {
    auto record = read_at(fd, at, 46, file_size);
    if (!record) {
      return record.error();
    }
    if (le(*record, 0, 4) != k_central_signature) {
      return malformed("a central directory record has no signature");
    }
    const size_t name_size = le(*record, 28, 2);
    const size_t extra_size = le(*record, 30, 2);
    const size_t comment_size = le(*record, 32, 2);
    uint64_t local = le(*record, 42, 4);
    if (local == 0xffffffff) {
      // zip64: the offset is in the extended information field, after the sizes that are 0xffffffff too.
      auto extra = read_at(fd, at + 46 + name_size, extra_size, file_size);
      if (!extra) {
        return extra.error();
      }
      size_t skip = (le(*record, 24, 4) == 0xffffffff ? 8 : 0) + (le(*record, 20, 4) == 0xffffffff ? 8 : 0);
      for (size_t field = 0; field + 4 <= extra->size();) {
        const uint64_t id = le(*extra, field, 2);
        const size_t size = le(*extra, field + 2, 2);
        if (id == 0x0001 && field + 4 + skip + 8 <= extra->size() && skip + 8 <= size) {
          local = le(*extra, field + 4 + skip, 8);
          break;
        }
        field += 4 + size;
      }
    }
    offsets.push_back(local);
    at += 46 + name_size + extra_size + comment_size;
  }
  // libarchive keeps one entry an offset and returns them in the order of their offsets.
  std::sort(offsets.begin(), offsets.end());
  offsets.erase(std::unique(offsets.begin(), offsets.end()), offsets.end());
  std::vector<std::string> names;
  names.reserve(offsets.size());
  for (const uint64_t local : offsets) {
    auto header = read_at(fd, local, 30, file_size);
    if (!header) {
      return header.error();
    }
    if (le(*header, 0, 4) != k_local_signature) {
      return malformed("a local header is not where the central directory says");
    }
    auto name = read_at(fd, local + 30, le(*header, 26, 2), file_size);
    if (!name) {
      return name.error();
    }
    names.push_back(std::move(*name));
  }
  return names;
}

}  // namespace hoist
