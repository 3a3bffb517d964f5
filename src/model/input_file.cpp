#include "hoist/model/input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <system_error>
#include <utility>

#include "hoist/util/error.hpp"
#include "hoist/util/file_io.hpp"
#include "hoist/util/text.hpp"

namespace hoist {

std::string read_input_file(const std::filesystem::path& path, std::size_t max_bytes, std::string_view option) {
  auto data = read_file_at(AT_FDCWD, path.string(), path.string(), max_bytes);
  if (!data) {
    throw UsageError(option.empty() ? data.error().message : data.error().message + " (" + std::string(option) + ")");
  }
  return std::move(*data);
}

namespace {

bool under(const std::filesystem::path& path, const std::filesystem::path& dir) {
  const auto [end, _] = std::mismatch(dir.begin(), dir.end(), path.begin(), path.end());
  return end == dir.end();
}

// Whether a directory on the way to `path` is one the kubelet's atomic writer made: it holds the `..data` link
// that the kubelet renames to publish a new version of a Secret, ConfigMap, projected or downward API volume.
bool in_kubelet_volume(const std::filesystem::path& path) {
  for (auto dir = path.parent_path(); !dir.empty(); dir = dir.parent_path()) {
    struct stat st {};
    if (::lstat((dir / "..data").c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
      return true;
    }
    if (dir == dir.root_path()) {
      break;
    }
  }
  return false;
}

bool may_hold_secret(const std::filesystem::path& path) {
  return under(path, k_plan_secrets_dir) || under(path, "/var/run/secrets") || under(path, "/run/secrets") ||
         in_kubelet_volume(path);
}

}  // namespace

InputQuoting quoting_for(const std::filesystem::path& path) {
  std::error_code error;
  const std::filesystem::path named = std::filesystem::absolute(path, error).lexically_normal();
  if (error || may_hold_secret(named)) {
    return InputQuoting::none;
  }
  // Resolved too: a link that leads into a secret volume reads the secret.
  const std::filesystem::path resolved = std::filesystem::weakly_canonical(named, error);
  return error || may_hold_secret(resolved) ? InputQuoting::none : InputQuoting::values;
}

std::string value_not_shown(const std::filesystem::path& file) {
  return "(the value is not shown: " + in_quotes(file.string()) + " may hold a secret)";
}

}  // namespace hoist
