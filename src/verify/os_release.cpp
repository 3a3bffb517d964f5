#include "hoist/verify/os_release.hpp"

#include <fcntl.h>

#include <cerrno>
#include <optional>

#include "hoist/util/error.hpp"
#include "hoist/util/file_io.hpp"

namespace hoist {

namespace {

bool is_key(std::string_view key) {
  if (key.empty() || (key[0] >= '0' && key[0] <= '9')) {
    return false;
  }
  for (const char c : key) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) {
      return false;
    }
  }
  return true;
}

bool is_blank(char c) {
  return c == ' ' || c == '\t';
}

// The value after `=`, to the end of the line. An unterminated quote takes the
// rest of the line, as systemd's parser does at end of file.
std::string parse_value(std::string_view raw) {
  enum class Quote { none, single, double_ };
  std::string value;
  Quote quote = Quote::none;
  // The length of `value` without the blanks that ended the unquoted part:
  // trailing blanks are dropped, blanks inside quotes are kept.
  size_t kept = 0;
  size_t i = 0;
  while (i < raw.size() && is_blank(raw[i])) {
    ++i;
  }
  for (; i < raw.size(); ++i) {
    const char c = raw[i];
    switch (quote) {
      case Quote::none:
        if (c == '\'') {
          quote = Quote::single;
        } else if (c == '"') {
          quote = Quote::double_;
        } else if (c == '\\' && i + 1 < raw.size()) {
          value += raw[++i];
          kept = value.size();
        } else {
          value += c;
          if (!is_blank(c)) {
            kept = value.size();
          }
        }
        break;
      case Quote::single:
        if (c == '\'') {
          quote = Quote::none;
          kept = value.size();
        } else {
          value += c;
        }
        break;
      case Quote::double_:
        if (c == '"') {
          quote = Quote::none;
          kept = value.size();
        } else if (c == '\\' && i + 1 < raw.size() &&
                   std::string_view("\"\\`$").find(raw[i + 1]) != std::string_view::npos) {
          value += raw[++i];
        } else {
          value += c;
        }
        break;
    }
  }
  if (quote != Quote::none) {
    kept = value.size();
  }
  value.resize(kept);
  return value;
}

std::optional<std::string> read_inside(const HostRoot& root, const char* path, int& errnum) {
  auto fd = root.open(path, O_RDONLY);
  if (!fd) {
    errnum = fd.error().errnum;
    return std::nullopt;
  }
  auto text = read_fd(fd->get(), root.display(path), 1U << 20U);
  if (!text) {
    errnum = text.error().errnum;
    return std::nullopt;
  }
  return std::move(*text);
}

}  // namespace

OsRelease parse_os_release(std::string_view text) {
  OsRelease release;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) {
      end = text.size();
    }
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    if (!line.empty() && line.back() == '\r') {
      line.remove_suffix(1);
    }
    size_t first = 0;
    while (first < line.size() && is_blank(line[first])) {
      ++first;
    }
    line.remove_prefix(first);
    if (line.empty() || line[0] == '#' || line[0] == ';') {
      continue;
    }
    const size_t equals = line.find('=');
    if (equals == std::string_view::npos) {
      continue;
    }
    std::string_view key = line.substr(0, equals);
    while (!key.empty() && is_blank(key.back())) {
      key.remove_suffix(1);
    }
    if (!is_key(key)) {
      continue;
    }
    release[std::string(key)] = parse_value(line.substr(equals + 1));
  }
  return release;
}

std::string_view release_value(const OsRelease& release, std::string_view key) {
  const auto it = release.find(key);
  return it == release.end() ? std::string_view() : std::string_view(it->second);
}

OsRelease read_host_os_release(const HostRoot& root) {
  // os-release(5): /etc/os-release takes precedence; /usr/lib/os-release is
  // the fallback (and the file an image-based OS ships).
  constexpr const char* k_etc = "/etc/os-release";
  constexpr const char* k_usr = "/usr/lib/os-release";
  int etc_errno = 0;
  int usr_errno = 0;
  if (auto text = read_inside(root, k_etc, etc_errno)) {
    return parse_os_release(*text);
  }
  if (auto text = read_inside(root, k_usr, usr_errno)) {
    return parse_os_release(*text);
  }
  throw Failure("failed to read the host's os-release: '" + root.display(k_etc) + "': " + errno_text(etc_errno) +
                ", '" + root.display(k_usr) + "': " + errno_text(usr_errno));
}

}  // namespace hoist
