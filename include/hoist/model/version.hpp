#pragma once

#include <compare>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

namespace hoist {

/// How a component's version strings are spelled and ordered (`--version-scheme`).
enum class VersionScheme {
  semver,   ///< semver.org 2.0.0, with an optional leading `v`
  k3s,      ///< k3s/RKE2 release tags: `vX.Y.Z[-rcN]+k3sN`, `+rke2rN`, and SUC's munged `-k3sN`/`-rke2rN`
  systemd,  ///< systemd's strverscmp_improved (UAPI Version Format), as systemd-sysupdate and systemd-sysext order
};

/// The scheme called `name` ("semver", "k3s" or "systemd", case-sensitive).
/// Throws UsageError naming `name` for anything else.
VersionScheme parse_version_scheme(std::string_view name);

/// The name parse_version_scheme() accepts for `scheme`.
std::string_view to_string(VersionScheme scheme);

/// systemd's strverscmp_improved() (the UAPI Version Format Specification's comparison) on any two strings,
/// without validation: bytes other than ASCII letters, digits and `~-^.` are skipped (a NUL byte too, where C
/// would end the string). `~` < end of string < `-` < `^` < `.` < letters and digits; a run of digits compares
/// numerically (leading zeros ignored) and above a run of letters; runs of letters compare bytewise (`A` < `a`).
/// Distinct strings may be equivalent (`1.01` and `1.1`, `1_` and `1`, `1+2` and `1_2`), hence the weak ordering.
/// Where one side ends right after a `~`, the other side's next byte is compared as a C char, as systemd does: a
/// byte above 0x7f there sorts below the end where char is signed (`1~\xe9` < `1~` on x86-64).
std::weak_ordering strverscmp_improved(std::string_view lhs, std::string_view rhs);

/// A version string that has been checked against its scheme, with a total order within that scheme.
///
/// The order is total so that a gate can be strict: for any two versions of one scheme exactly one of
/// `<`, `==`, `>` holds, and `==` holds exactly when `<=>` says equal. Where a scheme's own precedence treats
/// distinct strings as equal, the tie is broken as follows:
///  - semver: equal precedence, different build metadata: the build strings compared bytewise (no build sorts
///    first). The optional leading `v` is no part of the version: `v1.2.3 == 1.2.3`.
///  - k3s: the spellings of one release are equal: `v1.27.4+k3s1 == v1.27.4-k3s1 == 1.27.4+k3s1`. The order is
///    (MAJOR, MINOR, PATCH, the counter N of `k3sN`/`rke2rN`, a release candidate before the release, the rc
///    number, `k3s` before `rke2r`): k3s and RKE2 cut `v1.19.3-rc1+k3s2` after `v1.19.3+k3s1`.
///  - systemd: equivalent under strverscmp_improved() (`1.01` and `1.1`, `1_` and `1`): the texts compared
///    bytewise, so `==` means identical text.
class Version {
 public:
  /// The longest version text accepted by any scheme, in bytes. Versions end up as file name components
  /// (`/host/opt/k3s/v1.30.1`), and a longer one is a mistake rather than a version.
  static constexpr std::size_t k_max_length = 255;

  /// Checks `text` against `scheme`; throws UsageError naming the text and the scheme and saying what is wrong.
  /// Every scheme refuses an empty text and one longer than k_max_length.
  ///  - semver: `[v]MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD]` exactly as semver.org 2.0.0 (numeric identifiers
  ///    without leading zeros, no empty identifiers, identifiers of `[0-9A-Za-z-]`); only a lower-case `v`.
  ///  - k3s: `[v]MAJOR.MINOR.PATCH[-rcN](+|-)k3sN` or `...(+|-)rke2rN`; every number is decimal without
  ///    leading zeros (`0` itself is allowed); lower-case only; nothing before or after.
  ///  - systemd: 1 to 255 bytes of `[0-9A-Za-z.~^_,+-]` with at least one letter or digit. That is the union of
  ///    what systemd accepts as a sysupdate version (`version_is_valid`: alphanumerics and `.,_-+`) and as a
  ///    version spec (`version_is_valid_versionspec`: alphanumerics and `-.~^`); everything else (whitespace,
  ///    control characters, `/`, `:`, non-ASCII...) is refused, although strverscmp_improved would skip it.
  static Version parse(VersionScheme scheme, std::string_view text);

  /// The scheme the version was parsed with.
  [[nodiscard]] VersionScheme scheme() const noexcept { return m_scheme; }

  /// The text exactly as given to parse().
  [[nodiscard]] const std::string& text() const noexcept { return m_text; }

  /// k3s: the tag spelling, with `v` and `+` (`v1.27.4+k3s1`, `v1.28.2-rc1+rke2r1`) whichever spelling was given.
  /// semver and systemd: text().
  [[nodiscard]] std::string canonical() const;

  /// The total order described on the class. Throws std::logic_error when the schemes differ: versions of two
  /// schemes have no order, and comparing them is a bug in the caller.
  friend std::strong_ordering operator<=>(const Version& lhs, const Version& rhs);

  /// `(lhs <=> rhs) == 0`; throws std::logic_error when the schemes differ.
  friend bool operator==(const Version& lhs, const Version& rhs);

 private:
  Version(VersionScheme scheme, std::string text) : m_scheme(scheme), m_text(std::move(text)) {}

  VersionScheme m_scheme;
  std::string m_text;
};

}  // namespace hoist
