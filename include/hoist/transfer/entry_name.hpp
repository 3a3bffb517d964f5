#pragma once

#include <string>
#include <string_view>

namespace hoist {

/// Checks the name of an archive entry (or of a hard link's target) before
/// anything is written for it, and returns it in normal form: relative, without
/// `.` components, empty or doubled slashes, or a trailing slash; "" names the
/// payload root (`.` or `./`). A leading `./` is fine. No part of a name may
/// be longer than NAME_MAX (255 bytes), which no Linux filesystem could make.
///
/// What is wrong with an entry name.
enum class NameProblem { none, empty, nul, newline, absolute, dot_dot, too_long };

/// The reason given for a problem ("it climbs out of the payload with '..'").
std::string_view describe(NameProblem problem);

/// Puts `name` in normal form into `normal`, or says what is wrong with it.
NameProblem check_entry_name(std::string_view name, std::string& normal);

/// Throws hoist::Error(ExitCode::verification) through refuse_entry() when the
/// name is absolute, has a `..` component, is empty, or contains a newline
/// (libarchive cuts names at NUL, so NUL never reaches here).
std::string normalize_entry_name(std::string_view name, std::string_view archive_display);

/// Throws hoist::Error(ExitCode::verification):
/// `refusing archive entry '<name>' in '<archive>': <reason>`, the name with
/// control characters escaped (`\n`), so that a hostile name cannot forge log lines.
[[noreturn]] void refuse_entry(std::string_view name, std::string_view archive_display, std::string_view reason);

}  // namespace hoist
