#include "hoist/model/input_file.hpp"

#include <fcntl.h>

#include <utility>

#include "hoist/util/error.hpp"
#include "hoist/util/file_io.hpp"

namespace hoist {

std::string read_input_file(const std::filesystem::path& path, std::size_t max_bytes) {
  auto data = read_file_at(AT_FDCWD, path.string(), path.string(), max_bytes);
  if (!data) {
    throw UsageError(data.error().message);
  }
  return std::move(*data);
}

}  // namespace hoist
