#include "hoist/core/entry_name.hpp"

#include <array>
#include <climits>

#include "hoist/util/error.hpp"

namespace hoist {

std::string escape_name(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  for (const char c : name) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (byte < 0x20 || byte == 0x7f) {
      constexpr std::array<char, 16> k_hex = {'0', '1', '2', '3', '4', '5', '6', '7',
                                              '8', '9', 'a', 'b', 'c', 'd', 'e', 'f'};
      out += "\\x";
      out += k_hex[byte >> 4U];
      out += k_hex[byte & 0xfU];
    } else {
      out += c;
    }
  }
  return out;
}

void refuse_entry(std::string_view name, std::string_view archive_display, std::string_view reason) {
  throw Error(ExitCode::verification, "refusing archive entry '" + escape_name(name) + "' in '" +
                                          std::string(archive_display) + "': " + std::string(reason));
}

std::string_view describe(NameProblem problem) {
  switch (problem) {
    case NameProblem::none: return "it is fine";
    case NameProblem::empty: return "its name is empty";
    case NameProblem::nul: return "its name contains a NUL byte";
    case NameProblem::newline: return "its name contains a newline";
    case NameProblem::absolute: return "it is an absolute path";
    case NameProblem::dot_dot: return "it climbs out of the payload with '..'";
    case NameProblem::too_long: return "a part of its name is longer than 255 bytes";
  }
  return "its name is invalid";
}

NameProblem check_entry_name(std::string_view name, std::string& normal) {
  normal.clear();
  if (name.empty()) {
    return NameProblem::empty;
  }
  if (name.find('\0') != std::string_view::npos) {
    return NameProblem::nul;
  }
  if (name.find('\n') != std::string_view::npos) {
    return NameProblem::newline;
  }
  if (name.front() == '/') {
    return NameProblem::absolute;
  }
  normal.reserve(name.size());
  while (!name.empty()) {
    const size_t slash = name.find('/');
    const std::string_view part = name.substr(0, slash);
    name = slash == std::string_view::npos ? std::string_view() : name.substr(slash + 1);
    if (part.empty() || part == ".") {
      continue;
    }
    if (part == "..") {
      normal.clear();
      return NameProblem::dot_dot;
    }
    if (part.size() > NAME_MAX) {
      normal.clear();
      return NameProblem::too_long;
    }
    if (!normal.empty()) {
      normal += '/';
    }
    normal += part;
  }
  return NameProblem::none;
}

std::string normalize_entry_name(std::string_view name, std::string_view archive_display) {
  std::string normal;
  if (const NameProblem problem = check_entry_name(name, normal); problem != NameProblem::none) {
    refuse_entry(name, archive_display, describe(problem));
  }
  return normal;
}

}  // namespace hoist
