#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "hoist/sys/host_root.hpp"

namespace hoist {

/// The KEY=VALUE pairs of an os-release(5) file, or of a system extension's
/// extension-release file (the same format).
using OsRelease = std::map<std::string, std::string, std::less<>>;

/// Parses os-release text as systemd 252's env-file parser reads it (parse_env_file_internal() in
/// src/basic/env-file.c), so that hoist sees the values systemd-sysext sees:
///  - LF and CR both end a line;
///  - a line that starts (after blanks) with `#` or `;` is a comment, and a comment ending in a backslash goes on
///    over the next line; a line without `=` is skipped;
///  - the key is everything before `=`, without its leading and trailing blanks (it is not checked further);
///  - a value is unquoted, in single quotes (literal) or in double quotes (a backslash escapes `"`, `\`, `` ` ``
///    and `$`, and keeps itself before any other byte); a quote opens only where a value starts or right after a
///    closing quote, elsewhere it is a plain byte (`A=x"y"` is `x"y"`); blanks between parts are skipped
///    (`A="x" "y"` is `xy`); an unquoted value loses its trailing blanks, a backslash keeps the next byte, and a
///    backslash before a line break joins the lines (so does one inside double quotes);
///  - quoted values may span lines, and a quote still open at the end of the text ends there;
///  - a later assignment wins.
/// Throws hoist::Error with ExitCode::verification naming `source` and the line when the text holds a NUL, or a
/// key or value (naming the key) is not valid UTF-8: systemd refuses such a file as a whole.
OsRelease parse_os_release(std::string_view text, std::string_view source);

/// The value of `key`, or nullopt when the file does not assign it (`KEY=` assigns "").
std::optional<std::string_view> release_field(const OsRelease& release, std::string_view key);

/// The value of `key`, "" when absent.
std::string_view release_value(const OsRelease& release, std::string_view key);

/// The host's os-release: `/etc/os-release`, else `/usr/lib/os-release`
/// (the order os-release(5) prescribes), resolved inside `root`. Throws
/// hoist::Failure naming both paths when neither can be read.
OsRelease read_host_os_release(const HostRoot& root);

}  // namespace hoist
