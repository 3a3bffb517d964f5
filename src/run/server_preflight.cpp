#include "hoist/run/server_preflight.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <cerrno>

#include "hoist/run/progress_reporter.hpp"
#include "hoist/util/error.hpp"

namespace hoist {

namespace {

// What is left for the snapshot above its own size: the filesystem must not fill to the last block (k3s writes
// on), and a copy's metadata takes some.
constexpr std::uint64_t k_margin = 64ULL << 20U;

std::uint64_t size_of(const HostRoot& root, const std::string& path) {
  auto fd = root.open(path, O_PATH);
  struct stat st {};
  if (!fd || ::fstat(fd->get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return 0;
  }
  return static_cast<std::uint64_t>(st.st_size);
}

// The filesystem that holds `path` (or the nearest directory above it that exists): its device and free bytes.
struct Space {
  dev_t device = 0;
  std::uint64_t free = 0;
  std::string where;
};

Space space_at(const HostRoot& root, std::string path) {
  for (;;) {
    auto fd = root.open(path, O_PATH);
    if (fd) {
      struct stat st {};
      struct statvfs vfs {};
      if (::fstat(fd->get(), &st) != 0 || ::fstatvfs(fd->get(), &vfs) != 0) {
        throw Failure(system_message("look at the free space of '" + root.display(path) + "'", errno));
      }
      return Space{st.st_dev, static_cast<std::uint64_t>(vfs.f_bavail) * vfs.f_frsize, path};
    }
    const size_t slash = path.rfind('/');
    if (path == "/" || slash == std::string::npos) {
      throw Failure(fd.error().message);
    }
    path = slash == 0 ? "/" : path.substr(0, slash);
  }
}

}  // namespace

DatastoreSnapshotPolicy parse_datastore_snapshot_policy(std::string_view text) {
  if (text == "take") {
    return DatastoreSnapshotPolicy::take;
  }
  if (text == "skip") {
    return DatastoreSnapshotPolicy::skip;
  }
  throw UsageError("invalid --datastore-snapshot '" + std::string(text) + "': expected take or skip");
}

std::string snapshot_name(const std::string& from, const std::string& to) {
  return "hoist-" + from + "-to-" + to;
}

std::string sqlite_snapshot_dir(const std::string& state_dir, const std::string& component, const std::string& from,
                                const std::string& to) {
  return state_dir + (state_dir.ends_with('/') ? "" : "/") + component + "/datastore/" + snapshot_name(from, to);
}

std::optional<ServerPreflight> preflight_server(const HostRoot& root, const ComponentSpec& spec,
                                                const std::vector<std::string>& restart_units,
                                                std::uint64_t staged_bytes, const std::string& state_dir,
                                                DatastoreSnapshotPolicy policy) {
  auto server = find_server_datastore(root, spec.destination, restart_units);
  if (!server) {
    return std::nullopt;
  }
  ServerPreflight preflight{*server, policy == DatastoreSnapshotPolicy::take, 0};
  const std::string name = spec.name + ": " + server->product + " server (" + server->unit + ")";
  if (server->kind == DatastoreKind::external && preflight.snapshot) {
    throw Failure(name + " keeps its datastore outside this host (" + server->location +
                  "): hoist cannot snapshot it, so it could not put it back after a failed upgrade; take a backup "
                  "of that datastore, then pass --datastore-snapshot=skip to upgrade without a snapshot");
  }
  if (server->kind == DatastoreKind::external) {
    preflight.snapshot = false;
  }
  std::string snapshot_at;
  if (preflight.snapshot && server->kind == DatastoreKind::sqlite) {
    for (const char* suffix : {"", "-wal", "-journal"}) {
      preflight.snapshot_bytes += size_of(root, server->location + suffix);
    }
    snapshot_at = state_dir + "/" + spec.name + "/datastore";
  } else if (preflight.snapshot && server->kind == DatastoreKind::etcd) {
    preflight.snapshot_bytes = size_of(root, server->location + "/member/snap/db");
    snapshot_at = server->snapshot_dir;
  }
  // Free space: the staged version beside the destination's link (its versions live under the state directory)
  // and the snapshot where it goes; on one filesystem, both.
  const Space staged = space_at(root, state_dir);
  std::uint64_t need_staged = staged_bytes;
  if (preflight.snapshot) {
    const Space snap = space_at(root, snapshot_at);
    std::uint64_t need = preflight.snapshot_bytes + k_margin;
    if (snap.device == staged.device) {
      need += need_staged;
      need_staged = 0;
    }
    if (snap.free < need) {
      throw Failure(name + ": not enough free space for the " + std::string(to_string(server->kind)) + " snapshot in " +
                    root.display(snapshot_at) + ": it needs " + format_bytes(need) + " (the datastore " +
                    format_bytes(preflight.snapshot_bytes) +
                    (need_staged == 0 && staged_bytes > 0 ? ", the staged version " + format_bytes(staged_bytes) : "") +
                    ", 64 MiB to spare), " + format_bytes(snap.free) + " are free; nothing was changed");
    }
  }
  if (need_staged > 0 && staged.free < need_staged + k_margin) {
    throw Failure(name + ": not enough free space for the staged version in " + root.display(state_dir) +
                  ": it needs " + format_bytes(need_staged + k_margin) + ", " + format_bytes(staged.free) +
                  " are free; nothing was changed");
  }
  return preflight;
}

}  // namespace hoist
