#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hoist/model/remount.hpp"
#include "hoist/model/version.hpp"
#include "hoist/transfer/transfer.hpp"

namespace hoist {

/// How a component lives on the host (docs/upgrading.md, "The kinds"; ARCHITECTURE.md, "On-host layout").
enum class ComponentKind {
  tree,  ///< versions side by side under the destination, `current` switches
  file,  ///< one file; its host path is a link to the current version's copy
  sync,  ///< a directory synced in place, one backup kept for one rollback
  /// A systemd-sysext image (a .raw squashfs/erofs file or a directory) kept
  /// under the state directory; /etc/extensions/<name>[.raw] links to the
  /// current one and systemd-sysext is refreshed (a host step, host/host_steps.hpp).
  sysext,
};

/// The kind called `name`. Throws UsageError for anything else.
ComponentKind parse_component_kind(std::string_view name);

/// The name parse_component_kind() accepts for `kind`.
std::string_view to_string(ComponentKind kind);

enum class AllowDowngrade { no, yes };

/// One component to upgrade, as the user asked for it (flags or one manifest
/// entry): checked for form, not yet against the host.
/// Whether the version gate lets an upgrade skip a Kubernetes minor version (the k3s scheme: 1.29 to 1.31).
enum class AllowMinorSkip { no, yes };
/// Whether an upgrade may install a version that a rollback left (`--allow-quarantined`).
enum class AllowQuarantined { no, yes };

/// `--installed-version-from` (the manifest's `installed_version_from`): where the gate learns what is installed
/// when hoist's own state cannot tell, because there is none yet (the k3s installer put k3s there) or the install
/// drifted from it (the installer ran again by hand).
struct InstalledVersionFrom {
  std::string text;                    ///< as given; empty: the state alone decides
  std::vector<std::string> exec_args;  ///< `exec:ARGS`: the file at the destination is run with these arguments
  /// `node`: the kubeletVersion of the Node this Job runs on (SYSTEM_UPGRADE_NODE_NAME), read from the API
  bool node = false;

  [[nodiscard]] bool given() const { return !text.empty(); }
};

/// Parses `exec:ARGS` (ARGS split at spaces, at least one) or `node`. Throws UsageError naming the text for
/// anything else.
InstalledVersionFrom parse_installed_version_from(std::string_view text);

/// The first whitespace-separated token of `output` that is a valid version of `scheme` (`v1.31.2+k3s1` in
/// `k3s version v1.31.2+k3s1 (6da14b51)`), or none.
std::optional<Version> first_version_in(std::string_view output, VersionScheme scheme);

/// Whose version a component is upgraded to.
enum class VersionOwner {
  /// The release's: --version, SYSTEM_UPGRADE_PLAN_LATEST_VERSION and the payload's statement (a manifest's top-level
  /// `version`), whichever are given, must agree.
  release,
  /// Its own (a manifest component's `version`): versioned apart from the release, so --version and the SUC env,
  /// which name the release, do not apply to it.
  component,
};

struct ComponentSpec {
  std::string name;
  ComponentKind kind = ComponentKind::tree;
  std::filesystem::path source;  ///< the payload, a path in the container
  std::string destination;       ///< a host path, absolute
  /// The version as the payload states it (the manifest's), empty when it does
  /// not: then --version or the SUC env alone name it.
  std::string payload_version;
  VersionOwner version_owner = VersionOwner::release;
  VersionScheme version_scheme = VersionScheme::semver;
  AllowDowngrade allow_downgrade = AllowDowngrade::no;
  unsigned keep = 3;
  Compare compare = Compare::content;
  std::filesystem::path sha256sums;  ///< empty: no verification
  /// For a file or archive payload: the name its SHA256SUMS lists it under (a release's `rke2.linux-amd64` for the
  /// binary an image keeps at /opt/rke2); empty: the payload's own file name.
  std::string sha256sums_entry;
  std::filesystem::path signature;  ///< with public_key: a detached signature over sha256sums
  std::filesystem::path public_key;
  /// A host step: make the mounts this component writes to writable for
  /// the run (the manifest's `remount`; `--remount` does it for every component).
  Remount remount = Remount::no;
  InstalledVersionFrom installed_version_from;
  AllowMinorSkip allow_minor_skip = AllowMinorSkip::no;
  /// The operator's alone (the command line): a payload's manifest cannot lift a quarantine.
  AllowQuarantined allow_quarantined = AllowQuarantined::no;
  /// The manifest's `health_checks` of this component, as written (`--health-check` gives the run's); the run
  /// parses them (host/health_check.hpp), after the switch and its restarts they must pass or it switches back.
  std::vector<std::string> health_checks;
};

/// What the operator asks of signatures (`--public-key` and `--require-signature` on the command line), which a
/// payload's manifest can never lower.
struct TrustPolicy {
  std::filesystem::path public_key;  ///< replaces every component's key; empty: the component's own
  bool require_signature = false;    ///< every component must come with a signature and a key

  [[nodiscard]] bool demands_signature() const { return require_signature || !public_key.empty(); }
};

/// Applies `policy` to `spec`: the key replaced; a signature with no key to check it is bad usage (UsageError);
/// with a policy that demands a signature, a component without SHA256SUMS and a signature throws
/// Error(ExitCode::verification) naming `where` and what is missing, before anything is read or written.
void apply_trust_policy(ComponentSpec& spec, const TrustPolicy& policy, std::string_view where);

/// The default of `--keep`: versions kept on the host after an upgrade.
inline constexpr unsigned k_default_keep = 3;

/// A component name is a directory name on the host and a word in logs:
/// `[a-z0-9][a-z0-9._-]*`, at most 63 bytes. Throws UsageError otherwise.
void validate_component_name(std::string_view name);

/// A destination in one spelling, lexically: "/opt//app/" is "/opt/app" (validate_spec refuses `.` and `..`).
[[nodiscard]] std::string normal_destination(const std::string& destination);

/// Checks the form of a spec: the name, an absolute destination without `.` or
/// `..` components, keep >= 1, a signature only with a public key and both only
/// with sha256sums. Throws UsageError naming what is wrong; `where` prefixes
/// the message ("" for flags, "manifest 'm.json': $.components[0]" for a manifest).
void validate_spec(const ComponentSpec& spec, std::string_view where = {});

/// The name a file or archive payload at `payload` is listed under in `spec`'s SHA256SUMS: `sha256sums_entry`,
/// else the payload's file name.
[[nodiscard]] std::string sums_entry_name(const ComponentSpec& spec, const std::filesystem::path& payload);

/// Names that can never be versions on the host, because hoist uses them itself
/// (`current`, `previous`, `state.json`, `pre-hoist`) or hides them (a leading
/// `.`). Throws UsageError naming the version.
void validate_version_name(std::string_view version);

/// The version kept for a file that was at a file component's destination before
/// hoist first installed it, so that a rollback can return to it.
inline constexpr std::string_view k_pre_hoist_version = "pre-hoist";

/// Where a version came from, for the agreement check.
struct VersionSources {
  std::string flag;     ///< --version
  std::string env;      ///< SYSTEM_UPGRADE_PLAN_LATEST_VERSION (munged by SUC: every '+' became '-')
  std::string payload;  ///< the payload's own statement (the manifest's version)
};

/// The version a component is upgraded to. Every source given is parsed with
/// `scheme`, and all must agree: equal under the scheme (k3s: `v1.27.4-k3s1` ==
/// `v1.27.4+k3s1`), or, for the env, equal to the other's text munged the way
/// SUC munges it. Returns the payload's, else the flag's, else the env's
/// version, in canonical() spelling. Throws UsageError when they disagree
/// (naming both) or when none is given.
Version agree_on_version(VersionScheme scheme, const VersionSources& sources, std::string_view component);

/// The sources `spec`'s version is agreed from (agree_on_version()), given the command line's --version (`flag`)
/// and SYSTEM_UPGRADE_PLAN_LATEST_VERSION (`env`): the payload's statement alone for a component with its own
/// version (VersionOwner::component), else all three.
VersionSources version_sources(const ComponentSpec& spec, const std::string& flag, const std::string& env);

}  // namespace hoist
