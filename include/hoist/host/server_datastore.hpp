#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hoist/sys/host_root.hpp"

namespace hoist {

/// Where a k3s or RKE2 server keeps the cluster's state (docs/datastore.md).
enum class DatastoreKind {
  sqlite,    ///< kine over SQLite: `<data-dir>/server/db/state.db`, this server alone
  etcd,      ///< embedded etcd: `<data-dir>/server/db/etcd`, one member of a cluster of one or more
  external,  ///< --datastore-endpoint (or etcd on other servers): nothing on this host to snapshot
};

[[nodiscard]] std::string_view to_string(DatastoreKind kind) noexcept;

/// A k3s or RKE2 server as its unit, its environment and its configuration files start it on the host.
struct ServerDatastore {
  std::string product;                   ///< "k3s" or "rke2"
  std::string unit;                      ///< the systemd unit that runs it ("k3s.service")
  std::string program;                   ///< the host path the unit runs (the component's destination)
  std::vector<std::string> server_args;  ///< the unit's arguments after `server`
  std::vector<std::string> environment;  ///< NAME=VALUE, what the unit gives the server
  std::string data_dir;                  ///< host path: --data-dir, else /var/lib/rancher/<product>
  DatastoreKind kind = DatastoreKind::sqlite;
  /// sqlite: the database file; etcd: the member's data directory; external: the endpoint without credentials.
  std::string location;
  /// etcd: where `<product> etcd-snapshot save` writes (--etcd-snapshot-dir, else <data-dir>/server/db/snapshots).
  std::string snapshot_dir;
  /// What told it, for the log: the unit and its ExecStart, the configuration files read, the deciding setting.
  std::string found;
};

/// Whether a unit of `units` (the units the run restarts) runs `program` as a k3s or RKE2 server, and with which
/// datastore, read from the host under `root` the way the installers leave it and the server itself reads it: the
/// unit's ExecStart= and environment (read_service_unit()), then the configuration file (--config, else
/// <PRODUCT>_CONFIG_FILE, else /etc/rancher/<product>/config.yaml) with its drop-ins (`config.yaml.d/*.yaml`),
/// the command line over the files and the files over the environment. nullopt when no unit runs `program`, or
/// runs it as an agent. Throws hoist::Failure when a file it must read is unreadable or not YAML.
std::optional<ServerDatastore> find_server_datastore(const HostRoot& root, const std::string& program,
                                                     const std::vector<std::string>& units);

/// The datastore-endpoint without its user and password ("postgres://db.example:5432/k3s"), for messages.
std::string endpoint_without_credentials(const std::string& endpoint);

}  // namespace hoist
