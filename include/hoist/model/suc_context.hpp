#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hoist {

/// The process environment as a map, so that tests can give any environment.
using Environment = std::map<std::string, std::string>;

/// The environment of this process.
Environment process_environment();

/// Everything system-upgrade-controller gives a Job's container (ARCHITECTURE.md,
/// "The SUC contract"), read in one place so every command sees the same facts.
/// Outside a Job (a manual run) the fields are simply empty.
struct SucContext {
  std::string node_name;                      ///< SYSTEM_UPGRADE_NODE_NAME
  std::string pod_name;                       ///< SYSTEM_UPGRADE_POD_NAME
  std::string pod_uid;                        ///< SYSTEM_UPGRADE_POD_UID
  std::string plan_name;                      ///< SYSTEM_UPGRADE_PLAN_NAME
  std::string plan_latest_hash;               ///< SYSTEM_UPGRADE_PLAN_LATEST_HASH
  std::string plan_latest_version;            ///< SYSTEM_UPGRADE_PLAN_LATEST_VERSION (munged: every '+' became '-')
  std::map<std::string, std::string> labels;  ///< /run/system-upgrade/pod/labels
  std::map<std::string, std::string> annotations;  ///< /run/system-upgrade/pod/annotations
  std::filesystem::path secrets_dir;               ///< /run/system-upgrade/secrets (when present)
  std::filesystem::path service_account_dir;       ///< .../serviceaccount (when present)
  std::string kubernetes_service_host;             ///< KUBERNETES_SERVICE_HOST
  std::string kubernetes_service_port;             ///< KUBERNETES_SERVICE_PORT
  /// What could not be read of the files above, one message each ("'<file>' line 3: unknown escape '\q'"): hoist
  /// uses no label or annotation, so a line it cannot read is for a warning, never a failure.
  std::vector<std::string> warnings;

  /// Whether this process runs as a SUC Job (the controller always sets the plan name).
  [[nodiscard]] bool in_job() const { return !plan_name.empty(); }

  /// Reads the contract from `env` and from the pod-info, secret and service
  /// account files under `container_root` (`/` in a real container).
  static SucContext load(const Environment& env, const std::filesystem::path& container_root = "/");
};

/// A downward-API file as read: the values, and the lines that could not be read.
struct DownwardApi {
  std::map<std::string, std::string> values;
  std::vector<std::string> unreadable;  ///< "'<source>' line N: <why>", one a line
};

/// Parses a downward-API file: `key="value"` lines, each value quoted the way the kubelet quotes it (Go's %q, that
/// is strconv.Quote). A line that is not of that form, or whose value would hold a NUL, is left out and named.
DownwardApi parse_downward_api(const std::string& text, const std::string& source);

}  // namespace hoist
