// The tree kind (ARCHITECTURE.md, "On-host layout"): versions side by side under the destination, the
// k3OS layout, switched by the `current` symlink.
//
//   <dest>/v1.30.0/            a complete version (only ever made by a rename)
//   <dest>/v1.30.1/
//   <dest>/.v1.30.2.partial/   a staging in progress; a leftover when no run holds the lock
//   <dest>/current -> v1.30.1  relative, so that it reads the same from the host and from /host
//   <dest>/previous -> v1.30.0
//
// A version directory exists under its final name only once all of it is
// durable, so `current` (switched by renaming a new link over it) always names
// a complete version, whenever the process dies.
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <cerrno>
#include <string>
#include <vector>

#include "hoist/install/installer.hpp"
#include "hoist/sys/atomic_file.hpp"
#include "hoist/sys/atomic_symlink.hpp"
#include "hoist/sys/directory.hpp"
#include "hoist/sys/host_dir.hpp"
#include "hoist/util/error.hpp"
#include "hoist/util/text.hpp"

namespace hoist {

namespace {

constexpr const char* k_current = "current";
constexpr const char* k_previous = "previous";

// A link target that names a version beside it: one plain name, no '/'.
bool is_version_name(const std::string& target) {
  return !target.empty() && target.find('/') == std::string::npos && target != "." && target != ".." &&
         target.front() != '.';
}

class TreeInstaller final : public Installer {
 public:
  TreeInstaller(const HostRoot& root, InstallTarget target, Durability durability)
      : m_root(root), m_target(std::move(target)), m_durability(durability) {}

  Integrity integrity(const std::string& version, const Payload* /*payload*/) override {
    auto dest = HostDir::open(m_root, m_target.destination);
    if (!dest) {
      return Integrity::damaged;
    }
    auto link = read_symlink(dest->fd(), k_current, dest->display(k_current));
    if (!link || *link != version) {
      return Integrity::damaged;
    }
    const auto st = dest->stat(version);
    return st && S_ISDIR(st->st_mode) ? Integrity::intact : Integrity::damaged;
  }

  std::string host_current(const ComponentState& /*state*/) override {
    auto dest = HostDir::open(m_root, m_target.destination);
    if (!dest) {
      return {};
    }
    auto link = read_symlink(dest->fd(), k_current, dest->display(k_current));
    if (!link || !is_version_name(*link)) {
      return {};
    }
    const auto st = dest->stat(*link);
    return st && S_ISDIR(st->st_mode) ? *link : std::string();
  }

  bool clean_leftovers(ComponentState* /*state*/) override {
    auto dest = HostDir::open(m_root, m_target.destination);
    if (!dest) {
      return false;  // nothing installed yet, nothing left over
    }
    const int removed = dest->remove_leftovers(is_staging_leftover).value();
    if (removed > 0) {
      spdlog::info("{}: removed {} leftover(s) of an interrupted run in {}", m_target.component, removed,
                   dest->display());
    }
    return false;
  }

  TransferStats stage(const Payload& payload, const std::string& version, const TransferOptions& options) override {
    HostDir dest = HostDir::create(m_root, m_target.destination, 0755, &m_made).value();
    if (const auto st = dest.stat(version)) {
      if (!S_ISDIR(st->st_mode)) {
        throw Failure("cannot install version " + version + ": '" + dest.display(version) +
                      "' exists and is not a directory");
      }
      // Only a rename of a durable staging makes this name: it is complete.
      spdlog::info("{}: reusing the complete {} that an earlier run staged", m_target.component, dest.display(version));
      return {};
    }
    const std::string partial = partial_name(version);
    HostDir staging = dest.make_child(partial).value();
    TransferStats stats;
    try {
      Fd link_dest = open_current(dest);
      stats = stage_tree(payload, staging.fd(), link_dest ? link_dest.get() : -1, options);
      make_tree_durable(staging.fd(), m_durability, staging.display()).value();
      if (::renameat(dest.fd(), partial.c_str(), dest.fd(), version.c_str()) != 0) {
        throw Failure(system_message(
            "rename " + in_quotes(staging.display()) + " to " + in_quotes(dest.display(version)), errno));
      }
      dest.sync().value();
    } catch (...) {
      // The old version is untouched; leave no partial behind (a disk-full run
      // must give its space back). A failure here is left to the next run.
      if (auto removed = remove_tree(dest.fd(), partial.c_str(), staging.display()); !removed) {
        spdlog::warn("{}", removed.error().message);
      }
      throw;
    }
    m_staged = version;
    return stats;
  }

  TransferStats commit(const Payload& /*payload*/, const std::string& version, const std::string& installed,
                       const TransferOptions& /*options*/) override {
    switch_links(version, installed);
    return {};
  }

  void undo_commit() override {
    if (!m_committed) {
      return;
    }
    HostDir dest = HostDir::open(m_root, m_target.destination).value();
    restore_link(dest, k_current, m_old_current);
    restore_link(dest, k_previous, m_old_previous);
    m_committed = false;
  }

  void discard_staged() override {
    if (!m_staged.empty()) {
      HostDir dest = HostDir::open(m_root, m_target.destination).value();
      dest.remove_entry(m_staged).value();
      m_staged.clear();
    }
    // A first install takes back the destination directories it made.
    HostDir::remove_made(m_root, m_made).value();
  }

  TransferStats preview(const Payload& payload, const std::string& /*installed*/,
                        const TransferOptions& options) override {
    TransferOptions dry = options;
    dry.dry_run = DryRun::yes;
    auto dest = HostDir::open(m_root, m_target.destination);
    Fd link_dest;
    if (dest) {
      link_dest = open_current(*dest);
    }
    // A dry run writes nothing, but stage_tree wants a directory to stage into
    // (for its filesystem): the destination, or the host's root before the first install.
    HostDir staging = dest ? std::move(*dest) : HostDir::open(m_root, "/").value();
    return stage_tree(payload, staging.fd(), link_dest ? link_dest.get() : -1, dry);
  }

  void check_rollback(const std::string& version, const std::string& /*current*/) override {
    auto dest = HostDir::open(m_root, m_target.destination);
    if (!dest) {
      throw UsageError("cannot roll back " + m_target.component + " to " + version + ": " + dest.error().message);
    }
    if (const auto st = dest->stat(version); st && S_ISDIR(st->st_mode)) {
      return;
    }
    if (dest->stat(partial_name(version))) {
      throw UsageError("cannot roll back " + m_target.component + " to " + version + ": it is incomplete (only '" +
                       dest->display(partial_name(version)) + "' exists)");
    }
    throw UsageError("cannot roll back " + m_target.component + " to " + version + ": '" + dest->display(version) +
                     "' does not exist");
  }

  void rollback(const std::string& version, const std::string& current) override { switch_links(version, current); }

  void remove_version(const std::string& version) override {
    auto dest = HostDir::open(m_root, m_target.destination);
    if (!dest) {
      return;
    }
    dest->remove_entry(version).value();
  }

 private:
  // Points `current` at `version` and `previous` at what `current` was.
  void switch_links(const std::string& version, const std::string& installed) {
    HostDir dest = HostDir::open(m_root, m_target.destination).value();
    m_old_current = read_link_or_empty(dest, k_current);
    m_old_previous = read_link_or_empty(dest, k_previous);
    // `previous` follows what `current` pointed at (the host's truth); the
    // state's version stands in when the link is gone or foreign.
    std::string previous = is_version_name(m_old_current) ? m_old_current : installed;
    if (!previous.empty() && previous != version && dest.stat(previous)) {
      replace_symlink(dest.fd(), k_previous, previous, dest.display(k_previous)).value();
    }
    replace_symlink(dest.fd(), k_current, version, dest.display(k_current)).value();
    m_committed = true;
  }

  // The current version's directory, for stage_tree's link_dest. Opened by its
  // name beside the link, never by following the link: a link that left the
  // destination would be followed in this container's namespace, not the host's.
  static Fd open_current(const HostDir& dest) {
    const std::string target = read_link_or_empty(dest, k_current);
    if (!is_version_name(target)) {
      return Fd();
    }
    return Fd(::openat(dest.fd(), target.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  }

  static std::string read_link_or_empty(const HostDir& dest, const char* name) {
    auto link = read_symlink(dest.fd(), name, dest.display(name));
    if (!link) {
      if (link.error().errnum == EINVAL) {
        throw Failure(in_quotes(dest.display(name)) + " is not a symlink; hoist manages it as one");
      }
      return {};
    }
    return *link;
  }

  static void restore_link(const HostDir& dest, const char* name, const std::string& target) {
    if (target.empty()) {
      if (::unlinkat(dest.fd(), name, 0) != 0 && errno != ENOENT) {
        throw Failure(system_message("remove " + in_quotes(dest.display(name)), errno));
      }
      dest.sync().value();
      return;
    }
    replace_symlink(dest.fd(), name, target, dest.display(name)).value();
  }

  const HostRoot& m_root;
  InstallTarget m_target;
  Durability m_durability;
  std::string m_staged;             ///< the version this object staged, until switched or discarded
  std::vector<std::string> m_made;  ///< the directories stage() made (host paths)
  bool m_committed = false;
  std::string m_old_current;
  std::string m_old_previous;
};

}  // namespace

std::unique_ptr<Installer> make_tree_installer(const HostRoot& root, InstallTarget target, Durability durability) {
  return std::make_unique<TreeInstaller>(root, std::move(target), durability);
}

}  // namespace hoist
