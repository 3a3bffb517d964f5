#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hoist/model/component.hpp"
#include "hoist/model/input_file.hpp"

namespace hoist {

/// The schema version of the payload manifest this build reads.
inline constexpr int k_manifest_schema = 1;

/// A payload manifest (`hoist upgrade --manifest FILE`): several components
/// upgraded in one run. JSON, read strictly (docs/manifest.md, "The payload manifest"):
///
///     {"schema": 1, "version": "v1.30.1+k3s1", "version_scheme": "k3s",
///      "components": [{"name": "k3s", "kind": "file", "source": "bin/k3s",
///                      "destination": "/usr/local/bin/k3s", "sha256sums": "SHA256SUMS"}]}
///
/// Top level: `schema` (1, required), `components` (a non-empty array,
/// required), `version` and `version_scheme` (defaults for the components).
/// A component: `name`, `kind`, `source`, `destination` (required), `version`,
/// `version_scheme`, `allow_downgrade`, `keep`, `checksum`, `sha256sums`,
/// `signature`, `public_key`, `remount` (as `--remount`, for this component).
/// Relative container paths (source, sha256sums, signature, public_key) are
/// relative to the manifest's directory.
struct Manifest {
  std::string version;                          ///< the payload's release, empty when not stated
  std::optional<VersionScheme> version_scheme;  ///< the default scheme
  /// The components, in the order given. A component without its own version
  /// has payload_version == `version` and VersionOwner::release; one with its
  /// own has VersionOwner::component.
  std::vector<ComponentSpec> components;
  /// `health_checks`: the checks of every component (`--health-check`), as written; the run parses them.
  std::vector<std::string> health_checks;
  /// Whether the run's messages about it (its health checks, parsed later) may quote what it holds.
  InputQuoting quoting = InputQuoting::values;
};

/// Parses manifest text. Every error throws UsageError that names the file and
/// the key path (`$.components[1].kind`): malformed JSON, an unknown key, a
/// duplicate key, a wrong type, a missing required key, a bad value, a
/// component name listed twice.
/// With InputQuoting::none (a manifest that may hold a secret) no message quotes a value, an unknown key or a
/// component name from the text: each says where, and that the value is not shown.
Manifest parse_manifest(std::string_view text, const std::filesystem::path& path,
                        InputQuoting quoting = InputQuoting::values);

/// Reads and parses the manifest at `path` (a path in the container). An
/// unreadable file throws UsageError naming it.
/// Messages quote what quoting_for(`path`) allows.
Manifest load_manifest(const std::filesystem::path& path);

}  // namespace hoist
