#include "hoist/transfer/entry_name.hpp"

#include <climits>

#include "hoist/util/error.hpp"
#include "hoist/util/text.hpp"

namespace hoist {

void refuse_entry(std::string_view name, std::string_view archive_display, std::string_view reason) {
  throw Error(ExitCode::verification, "refusing archive entry " + in_quotes(name) + " in " +
                                          in_quotes(archive_display) + ": " + std::string(reason));
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
