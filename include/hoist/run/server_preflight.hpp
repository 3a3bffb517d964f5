#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hoist/host/server_datastore.hpp"
#include "hoist/model/component.hpp"
#include "hoist/sys/host_root.hpp"

namespace hoist {

/// --datastore-snapshot: whether an upgrade of a k3s or RKE2 server snapshots its datastore before the switch.
enum class DatastoreSnapshotPolicy {
  take,  ///< the default: SQLite copied, etcd snapshotted; an external datastore refuses the run
  skip,  ///< no snapshot (the operator keeps the datastore's backups); a switch back then happens only when the
         ///< version change cannot have moved the datastore
};

DatastoreSnapshotPolicy parse_datastore_snapshot_policy(std::string_view text);

/// What an embedded etcd's members say of their health, asked before a server upgrade (docs/datastore.md).
struct EtcdHealth {
  bool known = false;                  ///< false: etcd could not be asked (said why in the log); nothing is refused
  int members = 0;                     ///< how many it lists
  std::vector<std::string> unhealthy;  ///< one line for each member that is not healthy: which, and why
};

/// What a run does about a server's datastore (docs/datastore.md).
struct DatastoreOptions {
  DatastoreSnapshotPolicy policy = DatastoreSnapshotPolicy::take;
  /// --datastore-timeout: how long a snapshot (etcd-snapshot save) or a restore (cluster-reset) may take, each.
  std::chrono::seconds timeout{300};
  /// The members of the server's etcd cluster, as its client API lists them; 0 when it cannot tell. Set by the
  /// CLI (it reads etcd's API with the server's client certificate); unset, a run cannot tell.
  std::function<int(const ServerDatastore&)> etcd_members;
  /// Every member of the server's etcd asked for its status (set by the CLI as etcd_members is). A server upgrade
  /// (or its stage) with a member that is not healthy is refused before anything changes; unset (--etcd-health=skip),
  /// nothing is asked.
  std::function<EtcdHealth(const ServerDatastore&)> etcd_health;
};

/// What the preflight found for a component that a k3s or RKE2 server runs.
struct ServerPreflight {
  ServerDatastore server;
  bool snapshot = false;             ///< whether the upgrade takes a snapshot
  std::uint64_t snapshot_bytes = 0;  ///< what the snapshot needs: the database (and its WAL), or etcd's db file
};

/// The checks of a server's upgrade that must pass before anything changes on the host: whether `spec`'s
/// destination is run as a k3s or RKE2 server by one of `restart_units` (find_server_datastore()); an external
/// datastore refused unless `policy` is skip (hoist cannot snapshot it); and enough free space for the staged
/// version (`staged_bytes`) and the snapshot, each on its filesystem (both on one: their sum). Reads only.
/// The upgrade calls it after verification, before the remount; it is a function of the run room and of the host
/// alone so that a prepare step, run before SUC cordons the node, can call it the same way. Throws hoist::Failure
/// (exit 1) for a refusal, with the reason and what to do. nullopt when the component is no server.
std::optional<ServerPreflight> preflight_server(const HostRoot& root, const ComponentSpec& spec,
                                                const std::vector<std::string>& restart_units,
                                                std::uint64_t staged_bytes, const std::string& state_dir,
                                                DatastoreSnapshotPolicy policy);

/// Where an upgrade from `from` to `to` puts the SQLite copy: `<state>/<component>/datastore/hoist-<from>-to-<to>`.
std::string sqlite_snapshot_dir(const std::string& state_dir, const std::string& component, const std::string& from,
                                const std::string& to);

/// The name an upgrade gives its snapshot: `hoist-<from>-to-<to>`.
std::string snapshot_name(const std::string& from, const std::string& to);

}  // namespace hoist
