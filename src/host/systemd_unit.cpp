#include "hoist/host/systemd_unit.hpp"

#include <dirent.h>
#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <map>

#include "hoist/util/error.hpp"
#include "hoist/util/fd.hpp"
#include "hoist/util/file_io.hpp"

namespace hoist {

namespace {

// systemd's system unit search path, highest precedence first (systemd.unit(5), "Unit File Load Path"; the
// distribution's /lib/systemd/system last, for hosts without the merged /usr).
constexpr const char* k_unit_dirs[] = {"/etc/systemd/system", "/run/systemd/system", "/usr/local/lib/systemd/system",
                                       "/usr/lib/systemd/system", "/lib/systemd/system"};

constexpr size_t k_max_unit_file = 1U << 20U;

bool is_blank(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

std::string trim(const std::string& text) {
  size_t begin = 0;
  size_t end = text.size();
  while (begin < end && is_blank(text[begin])) {
    ++begin;
  }
  while (end > begin && is_blank(text[end - 1])) {
    --end;
  }
  return text.substr(begin, end - begin);
}

// A file's text, or nullopt when it does not exist (a missing optional file is not an error).
std::optional<std::string> read_host_file(const HostRoot& root, const std::string& path) {
  auto fd = root.open(path, k_read_flags);
  if (!fd) {
    if (fd.error().errnum == ENOENT || fd.error().errnum == ENOTDIR) {
      return std::nullopt;
    }
    throw Failure(fd.error().message);
  }
  auto text = read_fd(fd->get(), root.display(path), k_max_unit_file);
  if (!text) {
    throw Failure(text.error().message);
  }
  return std::move(*text);
}

// The names of the regular entries of a directory that end in `suffix`, sorted; none when it does not exist.
std::vector<std::string> entries_ending(const HostRoot& root, const std::string& dir, const std::string& suffix) {
  std::vector<std::string> names;
  auto fd = root.open(dir, O_RDONLY | O_DIRECTORY);
  if (!fd) {
    return names;
  }
  DIR* stream = ::fdopendir(fd->get());
  if (stream == nullptr) {
    return names;
  }
  (void)fd->release();
  while (const dirent* entry = ::readdir(stream)) {
    const std::string name = entry->d_name;
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      names.push_back(name);
    }
  }
  ::closedir(stream);
  std::sort(names.begin(), names.end());
  return names;
}

// The unit file's logical lines: comments dropped, a line ending in a backslash joined to the next with a space
// (systemd.syntax(7)).
std::vector<std::string> logical_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::string pending;
  bool continued = false;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) {
      end = text.size();
    }
    std::string line = text.substr(start, end - start);
    start = end + 1;
    const std::string trimmed = trim(line);
    if (!continued && (trimmed.empty() || trimmed[0] == '#' || trimmed[0] == ';')) {
      if (end == text.size()) {
        break;
      }
      continue;
    }
    if (continued && (trimmed.rfind('#', 0) == 0 || trimmed.rfind(';', 0) == 0)) {
      continue;  // a comment inside a continued line is skipped, the line goes on
    }
    if (!line.empty() && line.back() == '\\') {
      line.pop_back();
      pending += line + " ";
      continued = true;
    } else {
      pending += line;
      lines.push_back(pending);
      pending.clear();
      continued = false;
    }
    if (end == text.size()) {
      break;
    }
  }
  if (!pending.empty()) {
    lines.push_back(pending);
  }
  return lines;
}

// The specifiers a unit file may use in the settings read here (systemd.unit(5), "Specifiers").
std::string expand_specifiers(const std::string& text, const std::string& unit) {
  const std::string prefix = unit.substr(0, unit.rfind('.'));
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%' || i + 1 == text.size()) {
      out += text[i];
      continue;
    }
    const char spec = text[++i];
    if (spec == 'n') {
      out += unit;
    } else if (spec == 'N') {
      out += prefix;
    } else if (spec == '%') {
      out += '%';
    } else {
      out += '%';
      out += spec;
    }
  }
  return out;
}

char unescape(char c) {
  switch (c) {
    case 'n': return '\n';
    case 't': return '\t';
    case 'r': return '\r';
    case 'a': return '\a';
    case 'b': return '\b';
    case 'f': return '\f';
    case 'v': return '\v';
    case 's': return ' ';
    default: return c;
  }
}

}  // namespace

std::vector<std::string> split_unit_words(const std::string& text) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quote != 0) {
      if (c == quote) {
        quote = 0;
      } else if (c == '\\' && i + 1 < text.size()) {
        word += unescape(text[++i]);
      } else {
        word += c;
      }
      continue;
    }
    if (is_blank(c)) {
      if (in_word) {
        words.push_back(word);
        word.clear();
        in_word = false;
      }
      continue;
    }
    in_word = true;
    if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '\\' && i + 1 < text.size()) {
      word += unescape(text[++i]);
    } else {
      word += c;
    }
  }
  if (in_word) {
    words.push_back(word);
  }
  return words;
}

std::vector<std::string> parse_environment_file(const std::string& text) {
  std::vector<std::string> assignments;
  for (const std::string& raw : logical_lines(text)) {
    const std::string line = trim(raw);
    const size_t equals = line.find('=');
    if (equals == std::string::npos || equals == 0) {
      continue;  // systemd ignores what is not an assignment
    }
    const std::string name = trim(line.substr(0, equals));
    const std::string value = trim(line.substr(equals + 1));
    // A quoted value is one word, its quotes removed; an unquoted one is taken as written.
    std::string unquoted = value;
    if (value.size() >= 2 && (value.front() == '\'' || value.front() == '"') && value.back() == value.front()) {
      const auto words = split_unit_words(value);
      unquoted = words.empty() ? std::string() : words.front();
    }
    assignments.push_back(name + "=" + unquoted);
  }
  return assignments;
}

std::optional<ServiceUnit> read_service_unit(const HostRoot& root, const std::string& unit) {
  ServiceUnit service;
  service.name = unit;
  for (const char* dir : k_unit_dirs) {
    const std::string path = std::string(dir) + "/" + unit;
    if (auto text = read_host_file(root, path)) {
      service.files.push_back(path);
      break;
    }
  }
  if (service.files.empty()) {
    return std::nullopt;
  }
  // Drop-ins by file name; of two with one name, the one in the directory of higher precedence.
  std::map<std::string, std::string> dropins;
  for (const char* dir : k_unit_dirs) {
    const std::string dropin_dir = std::string(dir) + "/" + unit + ".d";
    for (const auto& name : entries_ending(root, dropin_dir, ".conf")) {
      dropins.emplace(name, dropin_dir + "/" + name);
    }
  }
  for (const auto& [name, path] : dropins) {
    service.files.push_back(path);
  }
  std::vector<std::pair<std::string, bool>> environment_files;  // path, optional
  for (const auto& path : service.files) {
    const auto text = read_host_file(root, path);
    if (!text) {
      continue;
    }
    bool in_service = false;
    for (const auto& raw : logical_lines(*text)) {
      const std::string line = trim(raw);
      if (line.empty()) {
        continue;
      }
      if (line.front() == '[') {
        in_service = line == "[Service]";
        continue;
      }
      const size_t equals = line.find('=');
      if (!in_service || equals == std::string::npos) {
        continue;
      }
      const std::string key = trim(line.substr(0, equals));
      const std::string value = trim(line.substr(equals + 1));
      if (key == "ExecStart") {
        // An empty assignment resets the list; a simple service runs the one left.
        std::vector<std::string> words = split_unit_words(value);
        if (!words.empty()) {
          // The executable's prefixes (systemd.service(5), "Table 1. Special executable prefixes").
          std::string& program = words.front();
          while (!program.empty() && std::string("-@:+!").find(program.front()) != std::string::npos) {
            program.erase(0, 1);
          }
        }
        service.exec_start = std::move(words);
      } else if (key == "Environment") {
        for (auto& word : split_unit_words(expand_specifiers(value, unit))) {
          if (word.find('=') != std::string::npos) {
            service.environment.push_back(std::move(word));
          }
        }
      } else if (key == "EnvironmentFile") {
        if (value.empty()) {
          environment_files.clear();
          continue;
        }
        std::string file = expand_specifiers(value, unit);
        const bool optional = file.front() == '-';
        if (optional) {
          file.erase(0, 1);
        }
        environment_files.emplace_back(file, optional);
      }
    }
  }
  // The files' assignments come after Environment='s, as systemd applies them.
  for (const auto& [path, optional] : environment_files) {
    const auto text = read_host_file(root, path);
    if (!text) {
      if (optional) {
        continue;
      }
      throw Failure("failed to read '" + root.display(path) + "', the EnvironmentFile of " + unit +
                    ": No such file or directory");
    }
    for (auto& assignment : parse_environment_file(*text)) {
      service.environment.push_back(std::move(assignment));
    }
  }
  return service;
}

}  // namespace hoist
