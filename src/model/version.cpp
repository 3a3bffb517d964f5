#include "hoist/model/version.hpp"

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string>
#include <vector>

#include "hoist/util/error.hpp"

namespace hoist {

namespace {

constexpr std::string_view k_semver_format = "expected [v]MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD]";
constexpr std::string_view k_k3s_format = "expected vMAJOR.MINOR.PATCH[-rcN](+|-)(k3s|rke2r)N";
constexpr std::string_view k_systemd_charset = "[0-9A-Za-z.~^_,+-]";

// How much of a rejected text a message repeats: the text may come from an environment variable or a payload,
// and a log line is no place for a megabyte of it.
constexpr std::size_t k_quote_limit = 64;

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
bool is_alnum(char c) {
  return is_digit(c) || is_alpha(c);
}
bool is_all_digits(std::string_view text) {
  return std::all_of(text.begin(), text.end(), is_digit);
}

/// Two lower-case hex digits.
std::string hex_byte(char c) {
  constexpr std::string_view k_digits = "0123456789abcdef";
  auto byte = static_cast<unsigned char>(c);
  return {k_digits[byte >> 4U], k_digits[byte & 0xfU]};
}

/// `text` in single quotes for a message, with bytes that are not printable ASCII, the quote and the backslash
/// written as \xNN, and cut after k_quote_limit bytes.
std::string quote_for_message(std::string_view text) {
  std::string result = "'";
  for (char c : text.substr(0, k_quote_limit)) {
    if (c < ' ' || c > '~' || c == '\'' || c == '\\') {
      result += "\\x";
      result += hex_byte(c);
    } else {
      result += c;
    }
  }
  if (text.size() > k_quote_limit) {
    result += "...";
  }
  result += "'";
  return result;
}

[[noreturn]] void reject(VersionScheme scheme, std::string_view text, std::string_view reason) {
  std::string message = "invalid ";
  message += to_string(scheme);
  message += " version ";
  message += quote_for_message(text);
  message += ": ";
  message += reason;
  throw UsageError(message);
}

/// The checks every scheme shares.
void check_length(VersionScheme scheme, std::string_view text) {
  if (text.empty()) {
    reject(scheme, text, "the version is empty");
  }
  if (text.size() > Version::k_max_length) {
    reject(scheme, text, "longer than " + std::to_string(Version::k_max_length) + " bytes");
  }
}

/// Two runs of decimal digits compared as numbers of any size: leading zeros dropped, then the longer is larger,
/// then the bytes decide.
std::strong_ordering compare_decimal(std::string_view lhs, std::string_view rhs) {
  lhs.remove_prefix(std::min(lhs.find_first_not_of('0'), lhs.size()));
  rhs.remove_prefix(std::min(rhs.find_first_not_of('0'), rhs.size()));
  if (auto order = lhs.size() <=> rhs.size(); std::is_neq(order)) {
    return order;
  }
  return lhs <=> rhs;
}

/// Splits `text` at every `separator` (an empty text gives one empty part).
std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  for (;;) {
    std::size_t end = text.find(separator);
    parts.push_back(text.substr(0, end));
    if (end == std::string_view::npos) {
      return parts;
    }
    text.remove_prefix(end + 1);
  }
}

// ---- semver -------------------------------------------------------------------------------------------------

struct SemverParts {
  std::array<std::string_view, 3> core;      ///< MAJOR, MINOR, PATCH
  std::vector<std::string_view> prerelease;  ///< empty for a release
  std::string_view build;                    ///< without the '+', empty when absent
};

/// A numeric identifier of semver's grammar: "0" or digits not starting with 0.
void check_numeric_identifier(std::string_view text, std::string_view identifier) {
  if (identifier.size() > 1 && identifier.front() == '0') {
    reject(VersionScheme::semver, text, "leading zero in numeric identifier " + quote_for_message(identifier));
  }
}

/// The dot-separated identifiers of a pre-release (`what` is "pre-release") or build metadata ("build").
std::vector<std::string_view> parse_identifiers(std::string_view text, std::string_view part, std::string_view what) {
  std::vector<std::string_view> identifiers = split(part, '.');
  for (std::string_view identifier : identifiers) {
    if (identifier.empty()) {
      reject(VersionScheme::semver, text, "empty " + std::string(what) + " identifier");
    }
    for (char c : identifier) {
      if (!is_alnum(c) && c != '-') {
        reject(VersionScheme::semver, text,
               std::string(what) + " identifier " + quote_for_message(identifier) +
                   " has a character outside [0-9A-Za-z-]");
      }
    }
  }
  return identifiers;
}

SemverParts parse_semver(std::string_view text) {
  check_length(VersionScheme::semver, text);
  SemverParts parts;
  std::string_view rest = text;
  // Tags spell versions v1.2.3; the v carries no meaning, so it is dropped before the grammar applies.
  if (rest.front() == 'v') {
    rest.remove_prefix(1);
  }
  // The first '+' starts the build metadata, and the first '-' before it starts the pre-release: MAJOR.MINOR.PATCH
  // has neither, while both may appear inside pre-release and build identifiers.
  if (std::size_t plus = rest.find('+'); plus != std::string_view::npos) {
    parts.build = rest.substr(plus + 1);
    parse_identifiers(text, parts.build, "build");
    rest = rest.substr(0, plus);
  }
  if (std::size_t dash = rest.find('-'); dash != std::string_view::npos) {
    parts.prerelease = parse_identifiers(text, rest.substr(dash + 1), "pre-release");
    for (std::string_view identifier : parts.prerelease) {
      if (is_all_digits(identifier)) {
        check_numeric_identifier(text, identifier);
      }
    }
    rest = rest.substr(0, dash);
  }
  std::vector<std::string_view> core = split(rest, '.');
  if (core.size() != 3) {
    reject(VersionScheme::semver, text, k_semver_format);
  }
  for (std::size_t i = 0; i < core.size(); ++i) {
    if (core[i].empty() || !is_all_digits(core[i])) {
      reject(VersionScheme::semver, text, k_semver_format);
    }
    check_numeric_identifier(text, core[i]);
    parts.core[i] = core[i];
  }
  return parts;
}

/// semver.org §11 precedence of two pre-release identifiers.
std::strong_ordering compare_prerelease_identifier(std::string_view lhs, std::string_view rhs) {
  bool lhs_numeric = is_all_digits(lhs);
  bool rhs_numeric = is_all_digits(rhs);
  if (lhs_numeric && rhs_numeric) {
    return compare_decimal(lhs, rhs);
  }
  if (lhs_numeric != rhs_numeric) {
    // Numeric identifiers have lower precedence than alphanumeric ones.
    return lhs_numeric ? std::strong_ordering::less : std::strong_ordering::greater;
  }
  return lhs <=> rhs;
}

std::strong_ordering compare_semver(std::string_view lhs_text, std::string_view rhs_text) {
  SemverParts lhs = parse_semver(lhs_text);
  SemverParts rhs = parse_semver(rhs_text);
  for (std::size_t i = 0; i < lhs.core.size(); ++i) {
    if (auto order = compare_decimal(lhs.core[i], rhs.core[i]); std::is_neq(order)) {
      return order;
    }
  }
  if (lhs.prerelease.empty() != rhs.prerelease.empty()) {
    // A pre-release comes before its release.
    return lhs.prerelease.empty() ? std::strong_ordering::greater : std::strong_ordering::less;
  }
  std::size_t common = std::min(lhs.prerelease.size(), rhs.prerelease.size());
  for (std::size_t i = 0; i < common; ++i) {
    if (auto order = compare_prerelease_identifier(lhs.prerelease[i], rhs.prerelease[i]); std::is_neq(order)) {
      return order;
    }
  }
  if (auto order = lhs.prerelease.size() <=> rhs.prerelease.size(); std::is_neq(order)) {
    return order;
  }
  // Equal precedence. semver.org ignores build metadata here, but a strict gate needs a total order, so the build
  // strings decide bytewise; no build metadata is the empty string and sorts first.
  return lhs.build <=> rhs.build;
}

// ---- k3s ----------------------------------------------------------------------------------------------------

struct K3sParts {
  std::string_view major;
  std::string_view minor;
  std::string_view patch;
  std::string_view rc;      ///< the N of -rcN, empty for a release
  std::string_view flavor;  ///< "k3s" or "rke2r"
  std::string_view build;   ///< the N of k3sN
};

/// Reads a k3s version from left to right; every failure is the one format message, except a leading zero.
class K3sScanner {
 public:
  explicit K3sScanner(std::string_view text) : m_text(text), m_rest(text) {}

  /// Consumes `token` when the rest starts with it.
  bool accept(std::string_view token) {
    if (!m_rest.starts_with(token)) {
      return false;
    }
    m_rest.remove_prefix(token.size());
    return true;
  }

  void expect(std::string_view token) {
    if (!accept(token)) {
      reject(VersionScheme::k3s, m_text, k_k3s_format);
    }
  }

  /// A decimal number without leading zeros.
  std::string_view number() {
    std::size_t length = 0;
    while (length < m_rest.size() && is_digit(m_rest[length])) {
      ++length;
    }
    std::string_view digits = m_rest.substr(0, length);
    if (digits.empty()) {
      reject(VersionScheme::k3s, m_text, k_k3s_format);
    }
    // k3s and RKE2 never write 01, and allowing it would give one release two spellings that canonical()
    // cannot both reproduce.
    if (digits.size() > 1 && digits.front() == '0') {
      reject(VersionScheme::k3s, m_text, "leading zero in " + quote_for_message(digits));
    }
    m_rest.remove_prefix(length);
    return digits;
  }

  void expect_end() const {
    if (!m_rest.empty()) {
      reject(VersionScheme::k3s, m_text, k_k3s_format);
    }
  }

 private:
  std::string_view m_text;
  std::string_view m_rest;
};

K3sParts parse_k3s(std::string_view text) {
  check_length(VersionScheme::k3s, text);
  K3sParts parts;
  K3sScanner scanner(text);
  scanner.accept("v");
  parts.major = scanner.number();
  scanner.expect(".");
  parts.minor = scanner.number();
  scanner.expect(".");
  parts.patch = scanner.number();
  // SUC turns every '+' into '-' (a '+' is not allowed in an image tag), so after PATCH a '-' starts either the
  // release candidate or the build suffix; "rc" tells them apart, as neither flavor starts with it.
  if (scanner.accept("-rc")) {
    parts.rc = scanner.number();
  }
  if (!scanner.accept("+")) {
    scanner.expect("-");
  }
  if (scanner.accept("k3s")) {
    parts.flavor = "k3s";
  } else {
    scanner.expect("rke2r");
    parts.flavor = "rke2r";
  }
  parts.build = scanner.number();
  scanner.expect_end();
  return parts;
}

std::strong_ordering compare_k3s(std::string_view lhs_text, std::string_view rhs_text) {
  K3sParts lhs = parse_k3s(lhs_text);
  K3sParts rhs = parse_k3s(rhs_text);
  for (auto field : {&K3sParts::major, &K3sParts::minor, &K3sParts::patch}) {
    if (auto order = compare_decimal(lhs.*field, rhs.*field); std::is_neq(order)) {
      return order;
    }
  }
  // The counter outranks the rc: when v1.19.3+k3s1 needs a fix, k3s cuts v1.19.3-rc1+k3s2 after it, and the
  // k3s2 candidates lead to v1.19.3+k3s2. An rc is a candidate for the release of its own counter.
  if (auto order = compare_decimal(lhs.build, rhs.build); std::is_neq(order)) {
    return order;
  }
  if (lhs.rc.empty() != rhs.rc.empty()) {
    // v1.28.2-rc1+k3s1 is a candidate for v1.28.2+k3s1 and comes before it.
    return lhs.rc.empty() ? std::strong_ordering::greater : std::strong_ordering::less;
  }
  if (auto order = compare_decimal(lhs.rc, rhs.rc); std::is_neq(order)) {
    return order;
  }
  // k3s and RKE2 builds of one Kubernetes release have no real order; the name only makes the order total.
  return lhs.flavor <=> rhs.flavor;
}

// ---- systemd ------------------------------------------------------------------------------------------------

/// The bytes strverscmp_improved() looks at; every other byte is skipped.
bool is_systemd_significant(char c) {
  return is_alnum(c) || c == '~' || c == '-' || c == '^' || c == '.';
}

char head(std::string_view text) {
  return text.empty() ? '\0' : text.front();
}

/// The side that has something is newer; equal when both or neither have.
std::strong_ordering compare_presence(bool lhs_has, bool rhs_has) {
  if (lhs_has == rhs_has) {
    return std::strong_ordering::equal;
  }
  return lhs_has ? std::strong_ordering::greater : std::strong_ordering::less;
}

/// Removes and returns the leading run of bytes that satisfy `predicate`.
template <typename Predicate>
std::string_view take_run(std::string_view& text, Predicate predicate) {
  std::size_t length = 0;
  while (length < text.size() && predicate(text[length])) {
    ++length;
  }
  std::string_view run = text.substr(0, length);
  text.remove_prefix(length);
  return run;
}

/// One separator step of strverscmp_improved(): when exactly one side is at `separator`, that side is older; when
/// both are, both step over it.
std::strong_ordering compare_separator(std::string_view& lhs, std::string_view& rhs, char separator) {
  bool lhs_at = head(lhs) == separator;
  bool rhs_at = head(rhs) == separator;
  if (lhs_at != rhs_at) {
    return lhs_at ? std::strong_ordering::less : std::strong_ordering::greater;
  }
  if (lhs_at) {
    lhs.remove_prefix(1);
    rhs.remove_prefix(1);
  }
  return std::strong_ordering::equal;
}

void check_systemd(std::string_view text) {
  check_length(VersionScheme::systemd, text);
  bool has_alnum = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (!is_alnum(c) && std::string_view(".~^_,+-").find(c) == std::string_view::npos) {
      reject(VersionScheme::systemd, text,
             "byte 0x" + hex_byte(c) + " at offset " + std::to_string(i) + " is not one of " +
                 std::string(k_systemd_charset));
    }
    has_alnum = has_alnum || is_alnum(c);
  }
  // "~", "_" or "-.^" sort somewhere, but they name no version: refusing them catches an unset variable that
  // was padded or a placeholder that was never filled in.
  if (!has_alnum) {
    reject(VersionScheme::systemd, text, "contains no letter or digit");
  }
}

}  // namespace

std::weak_ordering strverscmp_improved(std::string_view lhs, std::string_view rhs) {
  // The steps and their order are those of the UAPI Version Format Specification; each iteration consumes at
  // least one byte of each side or decides, so the loop ends.
  for (;;) {
    take_run(lhs, [](char c) { return !is_systemd_significant(c); });
    take_run(rhs, [](char c) { return !is_systemd_significant(c); });
    // '~' is checked before the end of the string so that 1.0~rc1 < 1.0: a pre-release sorts below its release.
    if (auto order = compare_separator(lhs, rhs, '~'); std::is_neq(order)) {
      return order;
    }
    if (lhs.empty() || rhs.empty()) {
      // systemd compares the two next bytes as C chars here. After a '~' the rest is not skipped again, so the
      // byte may be one that is otherwise skipped: "1~_" > "1~", and a byte above 0x7f, negative where char is
      // signed (x86-64), makes "1~\xe9" < "1~". Elsewhere the byte is significant, ASCII, and newer than the end.
      return head(lhs) <=> head(rhs);
    }
    for (char separator : {'-', '^', '.'}) {
      if (auto order = compare_separator(lhs, rhs, separator); std::is_neq(order)) {
        return order;
      }
    }
    if (is_digit(head(lhs)) || is_digit(head(rhs))) {
      std::string_view lhs_run = take_run(lhs, is_digit);
      std::string_view rhs_run = take_run(rhs, is_digit);
      // A number is newer than letters (1.0a < 1.01); an empty run is only possible on one side here.
      if (lhs_run.empty() != rhs_run.empty()) {
        return compare_presence(!lhs_run.empty(), !rhs_run.empty());
      }
      if (auto order = compare_decimal(lhs_run, rhs_run); std::is_neq(order)) {
        return order;
      }
    } else {
      std::string_view lhs_run = take_run(lhs, is_alpha);
      std::string_view rhs_run = take_run(rhs, is_alpha);
      // Bytewise, so upper case sorts first (A < a), and a run that is a prefix of the other is older.
      if (auto order = lhs_run <=> rhs_run; std::is_neq(order)) {
        return order;
      }
    }
  }
}

VersionScheme parse_version_scheme(std::string_view name) {
  for (VersionScheme scheme : {VersionScheme::semver, VersionScheme::k3s, VersionScheme::systemd}) {
    if (name == to_string(scheme)) {
      return scheme;
    }
  }
  throw UsageError("unknown version scheme " + quote_for_message(name) + ": expected semver, k3s or systemd");
}

std::string_view to_string(VersionScheme scheme) {
  switch (scheme) {
    case VersionScheme::semver: return "semver";
    case VersionScheme::k3s: return "k3s";
    case VersionScheme::systemd: return "systemd";
  }
  throw std::logic_error("unknown VersionScheme " + std::to_string(static_cast<int>(scheme)));
}

Version Version::parse(VersionScheme scheme, std::string_view text) {
  switch (scheme) {
    case VersionScheme::semver: parse_semver(text); break;
    case VersionScheme::k3s: parse_k3s(text); break;
    case VersionScheme::systemd: check_systemd(text); break;
  }
  return {scheme, std::string(text)};
}

std::string Version::canonical() const {
  if (m_scheme != VersionScheme::k3s) {
    return m_text;
  }
  K3sParts parts = parse_k3s(m_text);
  std::string result = "v";
  result += parts.major;
  result += '.';
  result += parts.minor;
  result += '.';
  result += parts.patch;
  if (!parts.rc.empty()) {
    result += "-rc";
    result += parts.rc;
  }
  result += '+';
  result += parts.flavor;
  result += parts.build;
  return result;
}

std::strong_ordering operator<=>(const Version& lhs, const Version& rhs) {
  if (lhs.m_scheme != rhs.m_scheme) {
    throw std::logic_error("cannot compare " + std::string(to_string(lhs.m_scheme)) + " version " +
                           quote_for_message(lhs.m_text) + " with " + std::string(to_string(rhs.m_scheme)) +
                           " version " + quote_for_message(rhs.m_text));
  }
  // The texts were validated by parse(), so the scheme's parser cannot throw here.
  switch (lhs.m_scheme) {
    case VersionScheme::semver: return compare_semver(lhs.m_text, rhs.m_text);
    case VersionScheme::k3s: return compare_k3s(lhs.m_text, rhs.m_text);
    case VersionScheme::systemd: break;
  }
  std::weak_ordering order = strverscmp_improved(lhs.m_text, rhs.m_text);
  if (std::is_neq(order)) {
    return std::is_lt(order) ? std::strong_ordering::less : std::strong_ordering::greater;
  }
  // Equivalent to systemd (1.01 and 1.1): the bytes decide, so that == means the same text.
  return lhs.m_text <=> rhs.m_text;
}

bool operator==(const Version& lhs, const Version& rhs) {
  return std::is_eq(lhs <=> rhs);
}

}  // namespace hoist
