#include "datastore_snapshot.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <utility>
#include <vector>

#include "hoist/host/program_output.hpp"
#include "hoist/run/server_preflight.hpp"
#include "hoist/sys/copy_with_metadata.hpp"
#include "hoist/sys/host_dir.hpp"
#include "hoist/sys/temporary_name.hpp"
#include "hoist/util/error.hpp"
#include "hoist/util/fd.hpp"
#include "hoist/util/text.hpp"

namespace hoist {

namespace {

// The files of a SQLite database that hold its content: the database, its write-ahead log (kine opens it in WAL
// mode), and a rollback journal a crash left hot. The -shm index is rebuilt from the WAL by the next opener.
constexpr const char* k_sqlite_suffixes[] = {"", "-wal", "-journal"};
constexpr const char* k_sqlite_stale[] = {"-wal", "-shm", "-journal"};

constexpr size_t k_output = 256 * 1024;

// The tag of the temporaries a restore writes beside the server's database: that directory is the server's, so only
// a name with hoist's tag is a leftover of hoist's (temporary_name.hpp).
constexpr std::string_view k_restore_tag = "hoist-restore";

std::string dir_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string base_of(const std::string& path) {
  return path.substr(path.rfind('/') + 1);
}

// The last lines of a program's output, for an error: enough to say why, never the whole log.
std::string tail_of(const std::string& output) {
  const std::string text = output.size() > 600 ? output.substr(output.size() - 600) : output;
  return escaped(text);
}

HostDir open_dir(const HostRoot& root, const std::string& path) {
  auto dir = HostDir::open(root, path);
  if (!dir) {
    throw Failure(dir.error().message);
  }
  return std::move(*dir);
}

bool same_file_state(const struct stat& a, const struct stat& b) {
  return a.st_size == b.st_size && a.st_mtim.tv_sec == b.st_mtim.tv_sec && a.st_mtim.tv_nsec == b.st_mtim.tv_nsec &&
         a.st_ino == b.st_ino;
}

DatastoreSnapshot etcd_snapshot(const HostRoot& root, const ServerDatastore& server, const std::string& from,
                                const std::string& to, std::chrono::seconds timeout) {
  const std::string name = snapshot_name(from, to);
  const HostDir dir = [&] {
    auto made = HostDir::create(root, server.snapshot_dir, 0700);
    if (!made) {
      throw Failure(made.error().message);
    }
    return std::move(*made);
  }();
  auto before = dir.list();
  if (!before) {
    throw Failure(before.error().message);
  }
  const std::vector<std::string> args{
      "etcd-snapshot",    "save", "--name", name, "--data-dir", server.data_dir, "--etcd-snapshot-dir",
      server.snapshot_dir};
  const std::string command = server.program + " etcd-snapshot save --name " + name;
  spdlog::info("{}: taking the etcd snapshot: {}", server.unit, command);
  auto ran = run_in_host_root(root, server.program, args, timeout, k_output, server.environment);
  if (!ran) {
    throw Failure("failed to snapshot the etcd datastore: " + ran.error().message);
  }
  if (ran->exit_status != 0) {
    throw Failure("failed to snapshot the etcd datastore: '" + command + "' exited with status " +
                  std::to_string(ran->exit_status) + ": " + tail_of(ran->output));
  }
  auto after = dir.list();
  if (!after) {
    throw Failure(after.error().message);
  }
  // k3s names it <name>-<node>-<unix time> (.zip when compressed), written as .part and renamed.
  std::string found;
  std::sort(after->begin(), after->end());
  for (const auto& entry : *after) {
    if (entry.rfind(name + "-", 0) == 0 && !entry.ends_with(".part") &&
        std::find(before->begin(), before->end(), entry) == before->end()) {
      found = entry;
    }
  }
  if (found.empty()) {
    throw Failure("failed to snapshot the etcd datastore: '" + command + "' exited 0 but left no " + name +
                  "-* file in " + root.display(server.snapshot_dir) + ": " + tail_of(ran->output));
  }
  const auto st = dir.stat(found);
  DatastoreSnapshot snapshot;
  snapshot.from = from;
  snapshot.to = to;
  snapshot.kind = "etcd";
  snapshot.path = server.snapshot_dir + "/" + found;
  snapshot.bytes = st ? static_cast<std::uint64_t>(st->st_size) : 0;
  snapshot.how = command + " (exit 0)";
  return snapshot;
}

DatastoreSnapshot sqlite_snapshot(const HostRoot& root, HostSteps& host, const ServerDatastore& server,
                                  const std::string& from, const std::string& to, const std::string& sqlite_dir) {
  host.stop_unit(server.unit);
  const HostDir db_dir = open_dir(root, dir_of(server.location));
  const std::string db = base_of(server.location);
  auto parent = HostDir::create(root, dir_of(sqlite_dir), 0700);
  if (!parent) {
    throw Failure(parent.error().message);
  }
  // A copy or a removal that a killed run left half done: the directory is hoist's alone.
  if (auto removed = parent->remove_leftovers([](std::string_view entry) { return entry.starts_with(k_temp_prefix); });
      !removed) {
    throw Failure(removed.error().message);
  }
  const std::string final_name = base_of(sqlite_dir);
  const std::string temp_name = temporary_name(final_name);
  auto temp = parent->make_child(temp_name);
  if (!temp) {
    throw Failure(temp.error().message);
  }
  std::uint64_t bytes = 0;
  for (const char* suffix : k_sqlite_suffixes) {
    const std::string file = db + suffix;
    auto source = root.open(server.location + suffix, O_RDONLY | O_NOFOLLOW);
    if (!source) {
      if (source.error().errnum == ENOENT && *suffix != '\0') {
        continue;
      }
      throw Failure(source.error().message);
    }
    struct stat before {};
    ::fstat(source->get(), &before);
    auto copied = copy_with_metadata(source->get(), temp->fd(), file, temp->display(file));
    if (!copied) {
      throw Failure(copied.error().message);
    }
    // The unit is stopped: a file that changed during the copy means a writer still runs, and the copy of a
    // database being written is no snapshot.
    const auto now = db_dir.stat(file);
    if (!now || !same_file_state(before, *now)) {
      throw Failure("failed to copy the SQLite datastore: " + root.display(server.location + suffix) +
                    " changed while it was copied, so something still writes it after " + server.unit +
                    " was stopped; nothing was switched");
    }
    bytes += static_cast<std::uint64_t>(before.st_size);
  }
  if (auto synced = temp->sync(); !synced) {
    throw Failure(synced.error().message);
  }
  if (parent->stat(final_name)) {
    if (auto removed = parent->remove_entry(final_name); !removed) {
      throw Failure(removed.error().message);
    }
  }
  if (::renameat(parent->fd(), temp_name.c_str(), parent->fd(), final_name.c_str()) != 0) {
    throw Failure(
        system_message("rename '" + parent->display(temp_name) + "' to '" + parent->display(final_name) + "'", errno));
  }
  if (auto synced = parent->sync(); !synced) {
    throw Failure(synced.error().message);
  }
  DatastoreSnapshot snapshot;
  snapshot.from = from;
  snapshot.to = to;
  snapshot.kind = "sqlite";
  snapshot.path = sqlite_dir;
  snapshot.bytes = bytes;
  snapshot.how = "copied " + server.location + " with " + server.unit + " stopped";
  return snapshot;
}

}  // namespace

DatastoreSnapshot take_datastore_snapshot(const HostRoot& root, HostSteps& host, const ServerDatastore& server,
                                          const std::string& from, const std::string& to, const std::string& sqlite_dir,
                                          std::chrono::seconds timeout) {
  DatastoreSnapshot snapshot = server.kind == DatastoreKind::etcd
                                   ? etcd_snapshot(root, server, from, to, timeout)
                                   : sqlite_snapshot(root, host, server, from, to, sqlite_dir);
  snapshot.taken_at = now_rfc3339();
  return snapshot;
}

void remove_datastore_snapshot(const HostRoot& root, const DatastoreSnapshot& snapshot) {
  auto dir = HostDir::open(root, dir_of(snapshot.path));
  if (!dir) {
    if (dir.error().errnum == ENOENT) {
      return;
    }
    throw Failure(dir.error().message);
  }
  if (!dir->stat(base_of(snapshot.path))) {
    return;
  }
  if (auto removed = dir->remove_entry(base_of(snapshot.path)); !removed) {
    throw Failure(removed.error().message);
  }
}

void restore_sqlite(const HostRoot& root, const ServerDatastore& server, const DatastoreSnapshot& snapshot) {
  const HostDir db_dir = open_dir(root, dir_of(server.location));
  const HostDir copy = open_dir(root, snapshot.path);
  const std::string db = base_of(server.location);
  if (!copy.stat(db)) {
    throw Failure("failed to restore the SQLite datastore: the snapshot " + copy.display() + " has no " + db);
  }
  // A restore that a killed run left half done is done again whole; its temporaries go first.
  auto remove_temporaries = [&db_dir] {
    return db_dir.remove_leftovers([](std::string_view entry) { return is_temporary_name(entry, k_restore_tag); });
  };
  if (auto removed = remove_temporaries(); !removed) {
    throw Failure(removed.error().message);
  }
  // The snapshot's files are copied beside the database first: a copy that fails (a full disk) leaves the
  // database as it was, with what the version that wrote it left beside it.
  std::vector<std::pair<std::string, std::string>> copies;  // (temporary, file)
  try {
    for (const char* suffix : k_sqlite_suffixes) {
      const std::string file = db + suffix;
      if (!copy.stat(file)) {
        continue;
      }
      auto source = root.open(snapshot.path + "/" + file, O_RDONLY | O_NOFOLLOW);
      if (!source) {
        throw Failure(source.error().message);
      }
      const std::string temp = temporary_name(file, k_restore_tag);
      if (auto copied = copy_with_metadata(source->get(), db_dir.fd(), temp, db_dir.display(temp)); !copied) {
        throw Failure(copied.error().message);
      }
      copies.emplace_back(temp, file);
    }
  } catch (const Failure&) {
    (void)remove_temporaries();
    throw;
  }
  // What the new version left beside its database goes next: replayed over the old database it would corrupt it.
  for (const char* suffix : k_sqlite_stale) {
    const std::string stale = db + suffix;
    if (db_dir.stat(stale) && ::unlinkat(db_dir.fd(), stale.c_str(), 0) != 0 && errno != ENOENT) {
      throw Failure(system_message("remove '" + db_dir.display(stale) + "'", errno));
    }
  }
  if (auto synced = db_dir.sync(); !synced) {
    throw Failure(synced.error().message);
  }
  for (const auto& [temp, file] : copies) {
    if (::renameat(db_dir.fd(), temp.c_str(), db_dir.fd(), file.c_str()) != 0) {
      const int error = errno;
      (void)remove_temporaries();
      throw Failure(system_message("rename '" + db_dir.display(temp) + "' to '" + db_dir.display(file) + "'", error));
    }
  }
  if (auto synced = db_dir.sync(); !synced) {
    throw Failure(synced.error().message);
  }
  spdlog::info("{}: restored {} from {}", server.unit, root.display(server.location), root.display(snapshot.path));
}

void restore_etcd(const HostRoot& root, const ServerDatastore& server, const DatastoreSnapshot& snapshot,
                  const std::string& binary, std::chrono::seconds timeout) {
  std::vector<std::string> args{"server"};
  args.insert(args.end(), server.server_args.begin(), server.server_args.end());
  args.emplace_back("--cluster-reset");
  args.emplace_back("--cluster-reset-restore-path=" + snapshot.path);
  const std::string command = binary + " server --cluster-reset --cluster-reset-restore-path=" + snapshot.path;
  spdlog::info("{}: restoring etcd: {}", server.unit, command);
  auto ran = run_in_host_root(root, binary, args, timeout, k_output, server.environment);
  if (!ran) {
    throw Failure("failed to restore the etcd datastore: " + ran.error().message);
  }
  if (ran->exit_status != 0) {
    throw Failure("failed to restore the etcd datastore: '" + command + "' exited with status " +
                  std::to_string(ran->exit_status) + ": " + tail_of(ran->output));
  }
  spdlog::info("{}: etcd reset to {}", server.unit, root.display(snapshot.path));
}

int etcd_member_count(const DatastoreOptions& options, const ServerDatastore& server,
                      const DatastoreSnapshot* snapshot) {
  if (server.kind != DatastoreKind::etcd) {
    return 0;
  }
  const int now = options.etcd_members ? options.etcd_members(server) : 0;
  if (now > 0) {
    return now;
  }
  if (snapshot != nullptr && snapshot->etcd_members > 0) {
    spdlog::info("{}: etcd had {} member(s) when the snapshot {} was taken", server.unit, snapshot->etcd_members,
                 snapshot->path);
    return snapshot->etcd_members;
  }
  return 0;
}

std::string snapshot_main_file(const ServerDatastore& server, const DatastoreSnapshot& snapshot) {
  return snapshot.kind == "sqlite" ? snapshot.path + "/" + base_of(server.location) : snapshot.path;
}

std::string kept_binary(const std::string& state_dir, const std::string& component, const std::string& version,
                        const std::string& destination) {
  return state_dir + (state_dir.ends_with('/') ? "" : "/") + component + "/" + version + "/" + base_of(destination);
}

std::string restore_steps(const ServerDatastore& server, const DatastoreSnapshot* snapshot, const std::string& from,
                          const std::string& component, const std::string& old_binary, bool single_member) {
  const std::string rollback = "hoist rollback --component " + component + " --to " + from;
  if (snapshot == nullptr) {
    return "no snapshot of " + from + "'s datastore was taken (--datastore-snapshot=skip): restore " + from +
           "'s datastore from your own backup, then run '" + rollback + "'";
  }
  if (snapshot->kind == "sqlite" || single_member) {
    return "run '" + rollback + " --restore-snapshot' (it stops " + server.unit + ", puts " + snapshot->path +
           " back, switches to " + from + " and starts " + server.unit + ")";
  }
  // k3s docs, "k3s etcd-snapshot", restoring with several servers: reset one from the snapshot, wipe the others'
  // db and let them rejoin; each on the old version.
  return "etcd has other members, so every server takes part: stop " + server.unit + " on every server; here run '" +
         old_binary + " server --cluster-reset --cluster-reset-restore-path=" + snapshot->path + "' (" + from +
         "'s binary), then '" + rollback + "' and start " + server.unit + "; on each other server switch to " + from +
         ", remove " + server.data_dir + "/server/db and start " + server.unit + " to rejoin";
}

}  // namespace hoist
