// The tree kind (ARCHITECTURE.md, "On-host layout"): versions side by side under the destination, the
// k3OS layout, switched by the `current` symlink.
//
//   <dest>/v1.30.0/            a complete version (only ever made by a rename)
//   <dest>/v1.30.1/
//   <dest>/.v1.30.2.partial/   a staging in progress; a leftover when no run holds the lock
//   <dest>/current -> v1.30.1  relative, so that it reads the same from the host and from /host
//   <dest>/previous -> v1.30.0
//   <state>/<component>/.index/v1.30.1   its content index (content_indexes.hpp), written before the rename
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

#include "content_indexes.hpp"
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
      : m_root(root), m_target(std::move(target)), m_durability(durability), m_indexes(m_root, m_target) {}

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

  bool has_complete(const std::string& version) override {
    auto dest = HostDir::open(m_root, m_target.destination);
    if (!dest) {
      return false;
    }
    const auto st = dest->stat(version);
    return st && S_ISDIR(st->st_mode);
  }

  bool holds(const std::string& version, const Payload& payload, const TransferOptions& options) override {
    auto dest = HostDir::open(m_root, m_target.destination);
    if (!dest) {
      return false;
    }
    const auto st = dest->stat(version);
    return st && S_ISDIR(st->st_mode) && holds_payload(*dest, version, payload, options);
  }

  void check_switch() override {
    auto dest = HostDir::open(m_root, m_target.destination);
    if (!dest) {
      if (dest.error().errnum == ENOENT) {
        return;  // a first install makes it
      }
      throw Failure("cannot install " + m_target.component + ": " + dest.error().message);
    }
    // Throws for a `current` or `previous` that is not a symlink: hoist would have to replace it.
    (void)read_link_or_empty(*dest, k_current);
    (void)read_link_or_empty(*dest, k_previous);
  }

  bool clean_leftovers(ComponentState* /*state*/) override {
    auto dest = HostDir::open(m_root, m_target.destination);
    if (!dest) {
      return false;  // nothing installed yet, nothing left over
    }
    // An index whose version has no directory: the staging it was written for was killed before its rename.
    const int removed =
        dest->remove_leftovers(is_staging_leftover).value() + m_indexes.clean([&](const std::string& v) {
          const auto st = dest->stat(v);
          return st && S_ISDIR(st->st_mode);
        });
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
      // Only a rename of a durable staging makes this name: it is complete. Whether it holds this payload is
      // another matter (an image re-tagged with other bytes): its content decides, as for any file.
      if (holds_payload(dest, version, payload, options)) {
        spdlog::info("{}: reusing the complete {} that an earlier run staged", m_target.component,
                     dest.display(version));
        return {};
      }
      spdlog::info("{}: {} that an earlier run staged differs from the payload: staging it again", m_target.component,
                   dest.display(version));
      dest.remove_entry(version).value();
      m_indexes.remove(version);
    }
    const std::string partial = partial_name(version);
    HostDir staging = dest.make_child(partial).value();
    TransferStats stats;
    try {
      std::string current;
      Fd link_dest = open_current(dest, &current);
      const std::optional<ContentIndex> known = link_dest ? m_indexes.load(current) : std::nullopt;
      ContentIndex produced;
      TransferOptions staging_options = options;
      staging_options.known = known ? &*known : nullptr;
      staging_options.produced = &produced;
      stats = stage_tree(payload, staging.fd(), link_dest ? link_dest.get() : -1, staging_options);
      make_tree_durable(staging.fd(), m_durability, staging.display()).value();
      // Before the rename: a complete version always has its index. A kill between the two leaves an index
      // without a version, which the next run's clean_leftovers() removes with the staging.
      m_indexes.save(version, produced, &m_made);
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
      m_indexes.remove(m_staged);
      m_staged.clear();
    }
    // A first install takes back the destination directories it made.
    HostDir::remove_made(m_root, m_made).value();
  }

  std::optional<IndexedTree> installed_tree(const std::string& /*installed*/) override {
    auto dest = HostDir::open(m_root, m_target.destination);
    std::string current;
    Fd link_dest = dest ? open_current(*dest, &current) : Fd();
    std::optional<ContentIndex> known =
        link_dest ? m_indexes.load(current, ContentIndexes::Damaged::quiet) : std::nullopt;
    if (!known) {
      return std::nullopt;
    }
    return IndexedTree{std::move(link_dest), std::move(*known)};
  }

  TransferStats preview(const Payload& payload, const std::string& /*installed*/,
                        const TransferOptions& options) override {
    TransferOptions dry = options;
    dry.dry_run = DryRun::yes;
    auto dest = HostDir::open(m_root, m_target.destination);
    Fd link_dest;
    std::string current;
    if (dest) {
      link_dest = open_current(*dest, &current);
    }
    const std::optional<ContentIndex> known = link_dest ? m_indexes.load(current) : std::nullopt;
    dry.known = known ? &*known : nullptr;
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
    m_indexes.remove(version);
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

  // The current version's directory, for stage_tree's link_dest, and its name in `version`. Opened by its
  // name beside the link, never by following the link: a link that left the
  // destination would be followed in this container's namespace, not the host's.
  static Fd open_current(const HostDir& dest, std::string* version = nullptr) {
    const std::string target = read_link_or_empty(dest, k_current);
    if (!is_version_name(target)) {
      return Fd();
    }
    if (version != nullptr) {
      *version = target;
    }
    return Fd(::openat(dest.fd(), target.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  }

  // Whether the complete `version` holds exactly the payload: a dry run of the staging against it, its own
  // content index vouching for its files, finds nothing to add, change or remove.
  bool holds_payload(const HostDir& dest, const std::string& version, const Payload& payload,
                     const TransferOptions& options) const {
    const Fd staged(::openat(dest.fd(), version.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!staged) {
      throw Failure(system_message("open " + in_quotes(dest.display(version)), errno));
    }
    const std::optional<ContentIndex> known = m_indexes.load(version);
    TransferOptions dry = options;
    dry.dry_run = DryRun::yes;
    dry.known = known ? &*known : nullptr;
    dry.produced = nullptr;
    dry.check_staged = nullptr;
    dry.on_progress = nullptr;
    const TransferStats stats = stage_tree(payload, dest.fd(), staged.get(), dry);
    return stats.files_added + stats.files_changed + stats.files_removed == 0;
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
  ContentIndexes m_indexes;
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
