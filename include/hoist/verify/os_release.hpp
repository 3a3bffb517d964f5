#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "hoist/sys/host_root.hpp"

namespace hoist {

/// The KEY=VALUE pairs of an os-release(5) file, or of a system extension's
/// extension-release file (the same format).
using OsRelease = std::map<std::string, std::string, std::less<>>;

/// Parses os-release text the way systemd's env-file parser reads it: one
/// assignment a line; blank lines and lines starting with `#` are skipped;
/// a value may be unquoted (a backslash escapes the next character, trailing
/// blanks are dropped), in single quotes (taken literally) or in double quotes
/// (a backslash escapes only `"`, `\`, `` ` `` and `$`), and parts may be
/// concatenated (`A="x"y`). Lines whose key is not a valid variable name are
/// ignored, as systemd ignores them. A later assignment wins.
OsRelease parse_os_release(std::string_view text);

/// The value of `key`, "" when absent.
std::string_view release_value(const OsRelease& release, std::string_view key);

/// The host's os-release: `/etc/os-release`, else `/usr/lib/os-release`
/// (the order os-release(5) prescribes), resolved inside `root`. Throws
/// hoist::Failure naming both paths when neither can be read.
OsRelease read_host_os_release(const HostRoot& root);

}  // namespace hoist
