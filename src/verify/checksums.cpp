#include "hoist/verify/checksums.hpp"

#include <fcntl.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hoist/model/input_file.hpp"
#include "hoist/sys/sha256.hpp"
#include "hoist/util/error.hpp"
#include "hoist/util/text.hpp"

namespace hoist {

namespace {

constexpr std::size_t k_hex_length = 64;

// ---- SHA256SUMS syntax ----

[[noreturn]] void throw_invalid(std::string_view source, std::size_t line_number, std::string_view what) {
  throw Error(ExitCode::verification, "invalid SHA256SUMS " + in_quotes(source) + " line " +
                                          std::to_string(line_number) + ": " + std::string(what));
}

bool is_hex_digit(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

std::string to_lower_hex(std::string_view hex) {
  std::string lower(hex);
  for (char& c : lower) {
    if (c >= 'A' && c <= 'F') {
      c = static_cast<char>(c - 'A' + 'a');
    }
  }
  return lower;
}

/// Why `name` is not a payload-relative path, or empty when it is one; the name quoted only where `quoting` says.
std::string name_problem(std::string_view name, InputQuoting quoting) {
  const std::string quoted = quoting == InputQuoting::values ? in_quotes(name) + " " : "";
  if (name.find('\0') != std::string_view::npos) {
    return "file name contains a NUL byte";
  }
  for (const char c : name) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return "file name contains a control character";
    }
  }
  if (name.front() == '/') {
    return "file name " + quoted + "is not relative";
  }
  std::size_t start = 0;
  for (;;) {
    const std::size_t slash = name.find('/', start);
    const std::string_view component = name.substr(start, slash == std::string_view::npos ? slash : slash - start);
    if (component.empty()) {
      return "file name " + quoted + "has an empty component";
    }
    // Payload entries are compared as strings, so './bin/k3s' would never match 'bin/k3s':
    // refusing it here gives the user the reason instead of a confusing "not listed".
    if (component == ".") {
      return "file name " + quoted + "has a '.' component";
    }
    if (component == "..") {
      return "file name " + quoted + "has a '..' component";
    }
    if (slash == std::string_view::npos) {
      return {};
    }
    start = slash + 1;
  }
}

}  // namespace

// ---- Sha256Sums ----

Sha256Sums Sha256Sums::parse(std::string_view text, std::string_view source_name, InputQuoting quoting) {
  Sha256Sums sums;
  sums.m_source = source_name;
  sums.m_quoting = quoting;
  // The entries in the file's order, each with its line; sorted by name at the end, where a name listed twice is
  // found (and named with the line it was first on).
  std::vector<DigestTable::Entry> listed;
  std::vector<std::size_t> lines;
  std::size_t line_number = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    ++line_number;
    const std::size_t end = text.find('\n', pos);
    const std::string_view line = text.substr(pos, end == std::string_view::npos ? end : end - pos);
    pos = end == std::string_view::npos ? text.size() : end + 1;

    if (line.empty()) {
      throw_invalid(source_name, line_number, "empty line");
    }
    if (line.back() == '\r') {
      throw_invalid(source_name, line_number, "ends with a carriage return (CRLF line endings are not accepted)");
    }
    // sha256sum escapes names holding '\\' or a newline and marks the line with a
    // leading backslash; such names are no payload's, so say so rather than "hex".
    if (line.front() == '\\') {
      throw_invalid(source_name, line_number, "escaped file names (a line starting with '\\') are not supported");
    }
    std::size_t hex_digits = 0;
    while (hex_digits < line.size() && hex_digits <= k_hex_length && is_hex_digit(line[hex_digits])) {
      ++hex_digits;
    }
    if (hex_digits != k_hex_length) {
      throw_invalid(source_name, line_number, "expected 64 hex digits");
    }
    // The two characters after the hash: "  " (text mode) or " *" (binary mode), which
    // mean the same to sha256sum and to systemd-sysupdate.
    const std::string_view separator = "expected two spaces or ' *' between the hash and the file name";
    if (line.size() == k_hex_length) {
      throw_invalid(source_name, line_number, "missing file name");
    }
    if (line[k_hex_length] != ' ') {
      throw_invalid(source_name, line_number, separator);
    }
    if (line.size() == k_hex_length + 1) {
      throw_invalid(source_name, line_number, "missing file name");
    }
    if (line[k_hex_length + 1] != ' ' && line[k_hex_length + 1] != '*') {
      throw_invalid(source_name, line_number, separator);
    }
    const std::string_view name = line.substr(k_hex_length + 2);
    if (name.empty()) {
      throw_invalid(source_name, line_number, "missing file name");
    }
    if (const std::string problem = name_problem(name, quoting); !problem.empty()) {
      throw_invalid(source_name, line_number, problem);
    }
    listed.push_back({std::string(name), *digest_from_hex(line.substr(0, k_hex_length))});
    lines.push_back(line_number);
  }
  if (listed.empty()) {
    // An empty list would verify an empty payload and nothing else; it is always a mistake.
    throw Error(ExitCode::verification, "invalid SHA256SUMS " + in_quotes(source_name) + ": no entries");
  }
  // Positions in the file, sorted by name (stable: a name's first line comes first).
  std::vector<std::uint32_t> order(listed.size());
  for (std::uint32_t i = 0; i < order.size(); ++i) {
    order[i] = i;
  }
  std::stable_sort(order.begin(), order.end(),
                   [&listed](std::uint32_t a, std::uint32_t b) { return listed[a].name < listed[b].name; });
  // The earliest second listing of a name is the one named, as a reader of the file meets it.
  std::optional<std::pair<std::uint32_t, std::uint32_t>> duplicate;  // (first, again)
  for (std::size_t start = 0; start < order.size();) {
    std::size_t end = start + 1;
    while (end < order.size() && listed[order[end]].name == listed[order[start]].name) {
      ++end;
    }
    if (end - start > 1 && (!duplicate || order[start + 1] < duplicate->second)) {
      duplicate = std::pair{order[start], order[start + 1]};
    }
    start = end;
  }
  if (duplicate) {
    const std::string& name = listed[duplicate->first].name;
    throw_invalid(source_name, lines[duplicate->second],
                  "duplicate file name " + (quoting == InputQuoting::values ? in_quotes(name) + " " : "") +
                      "(first on line " + std::to_string(lines[duplicate->first]) + ")");
  }
  lines = {};
  std::vector<DigestTable::Entry> sorted;
  sorted.reserve(listed.size());
  for (const std::uint32_t i : order) {
    sorted.push_back(std::move(listed[i]));
  }
  sums.m_entries = DigestTable(std::move(sorted));
  return sums;
}

Sha256Sums Sha256Sums::load(const std::filesystem::path& path) {
  return parse(read_input_file(path, k_max_sums_size), path.string(), quoting_for(path));
}

std::optional<std::string> Sha256Sums::expected_for(std::string_view name) const {
  const Sha256Digest* digest = m_entries.find(name);
  if (digest == nullptr) {
    return std::nullopt;
  }
  return to_hex(*digest);
}

// ---- verification of payload files ----

namespace {

[[noreturn]] void throw_not_listed(const Sha256Sums& sums, std::string_view name) {
  throw Error(ExitCode::verification, in_quotes(name) + " is not listed in SHA256SUMS " + in_quotes(sums.source()));
}

[[noreturn]] void throw_mismatch(const Sha256Sums& sums, std::string_view name, const Sha256Digest& listed_digest,
                                 const std::string& actual) {
  // The payload's own digest may be shown; the listed one is text of the sums file.
  const std::string listed =
      sums.quoting() == InputQuoting::values
          ? "expected " + to_hex(listed_digest)
          : "not what SHA256SUMS " + in_quotes(sums.source()) + " lists " + value_not_shown(sums.source());
  throw Error(ExitCode::verification, "checksum mismatch for " + in_quotes(name) + ": " + listed + ", got " + actual);
}

void compare(const Sha256Sums& sums, std::string_view name, const Sha256Digest& listed_digest,
             std::string_view actual_hex) {
  if (digest_from_hex(actual_hex) != listed_digest) {
    throw_mismatch(sums, name, listed_digest, to_lower_hex(actual_hex));
  }
}

void compare(const Sha256Sums& sums, std::string_view name, const Sha256Digest& listed_digest,
             const Sha256Digest& actual) {
  if (actual != listed_digest) {
    throw_mismatch(sums, name, listed_digest, to_hex(actual));
  }
}

}  // namespace

void verify_file(const Sha256Sums& sums, std::string_view name, const std::filesystem::path& file) {
  if (!sums.expected_for(name)) {
    throw_not_listed(sums, name);
  }
  verify_digest(sums, name, sha256_file(AT_FDCWD, file.string()).value());
}

void verify_digest(const Sha256Sums& sums, std::string_view name, std::string_view actual_hex) {
  const Sha256Digest* listed = sums.entries().find(name);
  if (listed == nullptr) {
    throw_not_listed(sums, name);
  }
  compare(sums, name, *listed, actual_hex);
}

bool Sha256Verifier::expect(std::string_view name) const {
  return m_sums.entries().find(name) != nullptr;
}

std::size_t Sha256Verifier::listed_index(std::string_view name) const {
  const std::size_t index = m_sums.entries().index_of(name);
  if (index == m_sums.entries().size()) {
    throw_not_listed(m_sums, name);
  }
  return index;
}

void Sha256Verifier::check(std::string_view name, const Sha256Digest& actual) {
  const std::size_t index = listed_index(name);
  compare(m_sums, name, m_sums.entries()[index].digest, actual);
  m_seen[index] = true;
}

void Sha256Verifier::check_listed(std::string_view name) {
  m_seen[listed_index(name)] = true;
}

void Sha256Verifier::finish() const {
  const std::string* first_missing = nullptr;
  std::size_t missing = 0;
  for (std::size_t i = 0; i < m_seen.size(); ++i) {
    if (!m_seen[i]) {
      if (first_missing == nullptr) {
        first_missing = &m_sums.entries()[i].name;
      }
      ++missing;
    }
  }
  if (first_missing != nullptr) {
    std::string message = m_sums.quoting() == InputQuoting::values
                              ? in_quotes(*first_missing) + " is listed in SHA256SUMS but not in the payload"
                              : "an entry of SHA256SUMS " + in_quotes(m_sums.source()) + " is not in the payload " +
                                    value_not_shown(m_sums.source());
    if (missing > 1) {
      message += " (and " + std::to_string(missing - 1) + " more)";
    }
    throw Error(ExitCode::verification, message);
  }
}

}  // namespace hoist
