#pragma once

#include <chrono>
#include <string>

#include "hoist/host/host_steps.hpp"
#include "hoist/host/server_datastore.hpp"
#include "hoist/model/state.hpp"
#include "hoist/run/server_preflight.hpp"
#include "hoist/sys/host_root.hpp"

namespace hoist {

/// Takes the snapshot of `server`'s datastore before the switch from `from` to `to` (docs/datastore.md) and
/// returns its record:
/// - etcd: `<product> etcd-snapshot save --name hoist-<from>-to-<to>` run by the installed (old) binary, in the
///   host root with the unit's environment, as the exec health checks run (run_in_host_root()), bounded by
///   `timeout`; the new file in the snapshot directory is the snapshot.
/// - SQLite: the unit stopped (HostSteps::stop_unit(); the caller has recorded the start it then owes), then
///   state.db with its -wal (and a hot -journal) copied into `sqlite_dir`: into a temporary directory beside it,
///   each file fsynced, checked unchanged since before the copy (a writer still running fails it), the directory
///   fsynced and renamed (over a copy an earlier, killed run left), its parent fsynced.
/// Throws hoist::Failure naming what failed.
DatastoreSnapshot take_datastore_snapshot(const HostRoot& root, HostSteps& host, const ServerDatastore& server,
                                          const std::string& from, const std::string& to, const std::string& sqlite_dir,
                                          std::chrono::seconds timeout);

/// Removes a snapshot's file or directory (renamed away first, as every removal of hoist's); a missing one is
/// removed already. Throws hoist::Failure.
void remove_datastore_snapshot(const HostRoot& root, const DatastoreSnapshot& snapshot);

/// Puts the SQLite copy of `snapshot` back as `server`'s database, with the server stopped: the new version's -wal,
/// -shm and -journal removed first (a WAL left over the old database would be replayed into it), then each copied
/// file written beside its name, fsynced and renamed over it, the directory fsynced. Idempotent, so a run killed
/// half-way is finished by the next one. Throws hoist::Failure.
void restore_sqlite(const HostRoot& root, const ServerDatastore& server, const DatastoreSnapshot& snapshot);

/// k3s's documented restore of a single etcd member ("k3s etcd-snapshot", "Restoring a Snapshot"), with the server
/// stopped: `binary` (the kept copy of the version the snapshot belongs to) runs `server <the unit's arguments>
/// --cluster-reset --cluster-reset-restore-path=<snapshot>` in the host root with the unit's environment, bounded
/// by `timeout`; it exits 0 once etcd is reset to that snapshot as a cluster of one member. Running it again redoes
/// it. Throws hoist::Failure with the end of its output.
void restore_etcd(const HostRoot& root, const ServerDatastore& server, const DatastoreSnapshot& snapshot,
                  const std::string& binary, std::chrono::seconds timeout);

/// The operator's steps to put the datastore back to `from` and run it (docs/datastore.md), one line: SQLite's
/// and a single etcd member's are what `hoist rollback --restore-snapshot` does; for etcd of several members (or an
/// unknown count: `single_member` false), k3s's procedure on every server, with `from`'s kept binary `old_binary`.
std::string restore_steps(const ServerDatastore& server, const DatastoreSnapshot* snapshot, const std::string& from,
                          const std::string& component, const std::string& old_binary, bool single_member);

/// How many members `server`'s etcd has, for deciding whether a restore on this server alone can put its datastore
/// back: what its client API lists now (options.etcd_members), else what it listed when `snapshot` was taken with
/// the old version running (a failed new version may not run etcd at all); 0 when neither can tell. Not etcd: 0.
int etcd_member_count(const DatastoreOptions& options, const ServerDatastore& server,
                      const DatastoreSnapshot* snapshot);

/// The file a restore of `snapshot` reads first, a host path: the SQLite copy's database
/// (`<snapshot>/state.db`), or etcd's snapshot file itself. A snapshot without it cannot be restored.
std::string snapshot_main_file(const ServerDatastore& server, const DatastoreSnapshot& snapshot);

/// Where the file kind keeps `version` of `component` (ARCHITECTURE.md, "On-host layout"): the binary a restore of
/// that version's datastore runs.
std::string kept_binary(const std::string& state_dir, const std::string& component, const std::string& version,
                        const std::string& destination);

}  // namespace hoist
