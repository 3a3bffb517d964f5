#include "hoist/verify/os_release.hpp"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <optional>

#include "hoist/util/error.hpp"
#include "hoist/util/file_io.hpp"
#include "hoist/util/text.hpp"

namespace hoist {

namespace {

// The byte classes of systemd's env-file parser: a line ends at LF or CR, blanks include both, and a comment
// starts with '#' or ';' where a key could start.
bool is_newline(char c) {
  return c == '\n' || c == '\r';
}
bool is_whitespace(char c) {
  return c == ' ' || c == '\t' || is_newline(c);
}

// systemd's utf8_is_valid(): shortest-form UTF-8 of code points up to U+10FFFF, without UTF-16 surrogates and
// without the noncharacters U+FDD0..U+FDEF and U+xxFFFE/U+xxFFFF.
bool is_systemd_utf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const auto lead = static_cast<unsigned char>(text[i]);
    size_t length = 0;
    char32_t code = 0;
    if (lead < 0x80) {
      ++i;
      continue;
    }
    if ((lead & 0xe0U) == 0xc0U) {
      length = 2;
      code = lead & 0x1fU;
    } else if ((lead & 0xf0U) == 0xe0U) {
      length = 3;
      code = lead & 0x0fU;
    } else if ((lead & 0xf8U) == 0xf0U) {
      length = 4;
      code = lead & 0x07U;
    } else {
      return false;
    }
    if (i + length > text.size()) {
      return false;
    }
    for (size_t k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xc0U) != 0x80U) {
        return false;
      }
      code = (code << 6U) | (next & 0x3fU);
    }
    const size_t shortest = code < 0x80 ? 1 : code < 0x800 ? 2 : code < 0x10000 ? 3 : 4;
    if (shortest != length || code >= 0x110000 || (code & 0xFFFFF800U) == 0xD800 ||
        (code >= 0xFDD0 && code <= 0xFDEF) || (code & 0xFFFEU) == 0xFFFE) {
      return false;
    }
    i += length;
  }
  return true;
}

/// The state of the reader: where in an assignment the next byte falls.
enum class State {
  before_key,
  key,
  before_value,  ///< after '=', and after a closing quote: blanks are skipped, a quote opens
  value,         ///< unquoted: quotes are plain bytes here
  value_escape,
  single_quote,
  double_quote,
  double_quote_escape,
  comment,
  comment_escape,
};

/// Collects one assignment at a time and stores it in the release.
class Assignments {
 public:
  Assignments(OsRelease& release, std::string_view source) : m_release(release), m_source(source) {}

  void start_key(char c, unsigned line) {
    m_key.assign(1, c);
    m_key_blank = std::string::npos;
    m_value.clear();
    m_value_blank = std::string::npos;
    m_line = line;
  }
  void drop_key() { m_key.clear(); }

  /// A key byte; blanks at the end of the key are dropped when it is stored.
  void key_byte(char c) {
    if (!is_whitespace(c)) {
      m_key_blank = std::string::npos;
    } else if (m_key_blank == std::string::npos) {
      m_key_blank = m_key.size();
    }
    m_key += c;
  }

  /// An unquoted value byte; blanks at the end of an unquoted value are dropped.
  void unquoted_byte(char c) {
    if (!is_whitespace(c)) {
      m_value_blank = std::string::npos;
    } else if (m_value_blank == std::string::npos) {
      m_value_blank = m_value.size();
    }
    m_value += c;
  }
  /// A byte kept as it is: quoted or escaped.
  void literal_byte(char c) { m_value += c; }
  /// After a backslash: the blanks before it are no longer at the end.
  void escape() { m_value_blank = std::string::npos; }

  /// Stores the assignment; `unquoted_end` when the value ended unquoted, so that its trailing blanks go.
  void store(bool unquoted_end) {
    if (m_key_blank != std::string::npos) {
      m_key.resize(m_key_blank);
    }
    if (unquoted_end && m_value_blank != std::string::npos) {
      m_value.resize(m_value_blank);
    }
    if (!is_systemd_utf8(m_key)) {
      throw Error(ExitCode::verification, std::string(m_source) + ":" + std::to_string(m_line) + ": the key '" +
                                              escaped(m_key) + "' is not valid UTF-8, so systemd refuses the file");
    }
    if (!is_systemd_utf8(m_value)) {
      throw Error(ExitCode::verification, std::string(m_source) + ":" + std::to_string(m_line) + ": the value of '" +
                                              escaped(m_key) + "' is not valid UTF-8, so systemd refuses the file");
    }
    m_release[m_key] = m_value;
    m_key.clear();
  }

 private:
  OsRelease& m_release;
  std::string_view m_source;
  std::string m_key;
  std::string m_value;
  size_t m_key_blank = std::string::npos;
  size_t m_value_blank = std::string::npos;
  unsigned m_line = 1;
};

std::optional<std::string> read_inside(const HostRoot& root, const char* path, int& errnum) {
  auto fd = root.open(path, k_read_flags);
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

OsRelease parse_os_release(std::string_view text, std::string_view source) {
  // systemd reads the file as one C string and refuses one with a NUL inside, which would end it early.
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos) {
    const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(nul), '\n');
    throw Error(ExitCode::verification,
                std::string(source) + ":" + std::to_string(line) + ": a NUL byte, so systemd refuses the file");
  }
  OsRelease release;
  Assignments assignment(release, source);
  State state = State::before_key;
  unsigned line = 1;
  for (const char c : text) {
    switch (state) {
      case State::before_key:
        if (c == '#' || c == ';') {
          state = State::comment;
        } else if (!is_whitespace(c)) {
          assignment.start_key(c, line);
          state = State::key;
        }
        break;
      case State::key:
        if (is_newline(c)) {
          assignment.drop_key();  // a line without '='
          state = State::before_key;
        } else if (c == '=') {
          state = State::before_value;
        } else {
          assignment.key_byte(c);
        }
        break;
      case State::before_value:
        if (is_newline(c)) {
          assignment.store(false);
          state = State::before_key;
        } else if (c == '\'') {
          state = State::single_quote;
        } else if (c == '"') {
          state = State::double_quote;
        } else if (c == '\\') {
          state = State::value_escape;
        } else if (!is_whitespace(c)) {
          assignment.unquoted_byte(c);
          state = State::value;
        }
        break;
      case State::value:
        if (is_newline(c)) {
          assignment.store(true);
          state = State::before_key;
        } else if (c == '\\') {
          assignment.escape();
          state = State::value_escape;
        } else {
          assignment.unquoted_byte(c);
        }
        break;
      case State::value_escape:
        // A backslash before a line break joins the lines; before anything else it keeps that byte.
        if (!is_newline(c)) {
          assignment.literal_byte(c);
        }
        state = State::value;
        break;
      case State::single_quote:
        if (c == '\'') {
          state = State::before_value;
        } else {
          assignment.literal_byte(c);
        }
        break;
      case State::double_quote:
        if (c == '"') {
          state = State::before_value;
        } else if (c == '\\') {
          state = State::double_quote_escape;
        } else {
          assignment.literal_byte(c);
        }
        break;
      case State::double_quote_escape:
        // As in a shell: \" \\ \` \$ stand for the byte, a backslash-LF joins the lines, and before any other
        // byte the backslash stays.
        if (std::string_view("\"\\`$").find(c) != std::string_view::npos) {
          assignment.literal_byte(c);
        } else if (c != '\n') {
          assignment.literal_byte('\\');
          assignment.literal_byte(c);
        }
        state = State::double_quote;
        break;
      case State::comment:
        if (c == '\\') {
          state = State::comment_escape;  // a comment ending in a backslash goes on over the next line
        } else if (is_newline(c)) {
          state = State::before_key;
        }
        break;
      case State::comment_escape: state = State::comment; break;
    }
    if (c == '\n') {
      ++line;
    }
  }
  // At the end of the text an assignment is stored whatever is open, an unterminated quote included.
  switch (state) {
    case State::before_value:
    case State::value_escape:
    case State::single_quote:
    case State::double_quote:
    case State::double_quote_escape: assignment.store(false); break;
    case State::value: assignment.store(true); break;
    case State::before_key:
    case State::key:
    case State::comment:
    case State::comment_escape: break;
  }
  return release;
}

std::optional<std::string_view> release_field(const OsRelease& release, std::string_view key) {
  const auto it = release.find(key);
  if (it == release.end()) {
    return std::nullopt;
  }
  return std::string_view(it->second);
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
    return parse_os_release(*text, root.display(k_etc));
  }
  if (auto text = read_inside(root, k_usr, usr_errno)) {
    return parse_os_release(*text, root.display(k_usr));
  }
  throw Failure("failed to read the host's os-release: " + in_quotes(root.display(k_etc)) + ": " +
                errno_text(etc_errno) + ", " + in_quotes(root.display(k_usr)) + ": " + errno_text(usr_errno));
}

}  // namespace hoist
