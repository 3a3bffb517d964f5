#include "hoist/model/input_file.hpp"

#include <fcntl.h>

#include <utility>

#include "hoist/util/error.hpp"
#include "hoist/util/file_io.hpp"

namespace hoist {

std::string read_input_file(const std::filesystem::path& path, std::size_t max_bytes, std::string_view option) {
  auto data = read_file_at(AT_FDCWD, path.string(), path.string(), max_bytes);
  if (!data) {
    throw UsageError(option.empty() ? data.error().message : data.error().message + " (" + std::string(option) + ")");
  }
  return std::move(*data);
}

}  // namespace hoist
