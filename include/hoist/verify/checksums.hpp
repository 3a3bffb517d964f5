#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hoist/model/input_file.hpp"
#include "hoist/sys/sha256.hpp"

namespace hoist {

/// The most of a SHA256SUMS file that is read.
inline constexpr std::size_t k_max_sums_size = 16U << 20U;

/// The entries of a SHA256SUMS file in the format systemd-sysupdate reads (and
/// `sha256sum` writes): one `<64 hex digits><space><space or '*'><name>` per line.
///
/// Parsing is strict, because whatever slips through here reaches the host unverified:
///  - every line is an entry: blank lines and CRLF line endings are refused; a final
///    newline is optional;
///  - hex digits may be either case; they are kept lowercase;
///  - names are relative paths in the form of payload entries: no leading '/', no
///    empty, '.' or '..' component, no NUL or other control character, each listed
///    once; `sha256sum`'s backslash-escaped lines are refused;
///  - a file without entries is refused.
/// Errors throw hoist::Error with ExitCode::verification, naming the file and line:
/// `invalid SHA256SUMS '/payload/SHA256SUMS' line 3: expected 64 hex digits`.
class Sha256Sums {
 public:
  /// Parses `text`; `source_name` is the file named in errors. With InputQuoting::none (a file that may hold a
  /// secret) no message, of parse() or of the checks against these sums, quotes a name or digest from it.
  static Sha256Sums parse(std::string_view text, std::string_view source_name,
                          InputQuoting quoting = InputQuoting::values);
  /// Reads and parses the file at `path` (at most 16 MiB), quoting what quoting_for(`path`) allows. An unreadable
  /// file throws UsageError naming `path`.
  static Sha256Sums load(const std::filesystem::path& path);

  /// Every entry, sorted by name, with its digest.
  [[nodiscard]] const DigestTable& entries() const noexcept { return m_entries; }
  /// The lowercase hex digest listed for `name`, if it is listed.
  [[nodiscard]] std::optional<std::string> expected_for(std::string_view name) const;
  /// The file name given to parse() or load(), for messages.
  [[nodiscard]] const std::string& source() const noexcept { return m_source; }
  /// Whether messages may quote the names and digests it lists.
  [[nodiscard]] InputQuoting quoting() const noexcept { return m_quoting; }

 private:
  std::string m_source;
  InputQuoting m_quoting = InputQuoting::values;
  DigestTable m_entries;
};

/// Checks that `file` (a path in the container) hashes to the digest that `sums`
/// lists for `name`. Throws Error(ExitCode::verification) with
/// `checksum mismatch for 'name': expected <hex>, got <hex>` or
/// `'name' is not listed in SHA256SUMS '<source>'`; a read error throws Failure.
void verify_file(const Sha256Sums& sums, std::string_view name, const std::filesystem::path& file);

/// The same check for a digest already taken (64 hex digits, either case), so
/// that a caller can hash the very file it goes on to read.
void verify_digest(const Sha256Sums& sums, std::string_view name, std::string_view actual_hex);

/// Checks a payload against SHA256SUMS while it streams past, one file at a time, in
/// any order (a directory walk, an archive). Every payload file goes through check();
/// finish() then proves that nothing listed was missing. It reads the sums it is given, which must outlive it
/// (a payload of 100,000 files is not listed twice in memory), and keeps one bit an entry. Not thread-safe.
class Sha256Verifier {
 public:
  explicit Sha256Verifier(const Sha256Sums& sums) : m_sums(sums), m_seen(sums.entries().size(), false) {}
  explicit Sha256Verifier(Sha256Sums&&) = delete;

  /// Whether `name` is listed, so a caller can tell before hashing. A payload file that
  /// is not listed is an error for check(); a caller that allows some (the SHA256SUMS
  /// file itself and its signature, when they ship inside the payload) skips them.
  [[nodiscard]] bool expect(std::string_view name) const;

  /// Checks the digest of payload file `name`, as bytes (a walk's hash, a content index's entry). Throws
  /// Error(ExitCode::verification) when `name` is not listed or its digest differs, both digests in hex.
  /// A name seen twice (a tar may hold one path twice) is checked each time.
  void check(std::string_view name, const Sha256Digest& actual);

  /// What check() proves of a name without a digest: that it is listed (else Error(ExitCode::verification)), and
  /// that it went past, for finish(). For a listing checked apart from the bytes.
  void check_listed(std::string_view name);

  /// Throws Error(ExitCode::verification) when a listed name never went through check():
  /// `'bin/k3s' is listed in SHA256SUMS but not in the payload`, with
  /// ` (and N more)` appended when several are missing.
  void finish() const;

  [[nodiscard]] const Sha256Sums& sums() const noexcept { return m_sums; }

 private:
  /// The position of `name` in the sums; Error(ExitCode::verification) when it is not listed.
  [[nodiscard]] std::size_t listed_index(std::string_view name) const;

  const Sha256Sums& m_sums;  // NOLINT(cppcoreguidelines-avoid-const-or-ref-data-members): a view, never copied
  std::vector<bool> m_seen;
};

}  // namespace hoist
