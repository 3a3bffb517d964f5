// The file kind (DESIGN.md): each version's copy under the state directory, the
// file's own host path a symlink to the current copy.
//
//   <state>/<component>/v1.30.1+k3s1/k3s      a complete version (only ever made by a rename)
//   <state>/<component>/.v1.30.2+k3s1.partial/ a staging in progress
//   <state>/<component>/pre-hoist/k3s         what was at the destination before hoist
//   /usr/local/bin/k3s -> /var/lib/hoist/k3s/v1.30.1+k3s1/k3s   host-absolute
//
// The destination is never written in place: a running binary cannot be
// (ETXTBSY), and a half-written one must never be what the host starts.
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <cerrno>

#include "hoist/core/installer.hpp"
#include "hoist/sys/atomic_file.hpp"
#include "hoist/sys/atomic_symlink.hpp"
#include "hoist/sys/copy_file.hpp"
#include "hoist/sys/directory.hpp"
#include "hoist/sys/host_dir.hpp"
#include "hoist/sys/sha256.hpp"
#include "hoist/util/error.hpp"

namespace hoist {

namespace {

class FileInstaller final : public Installer {
 public:
  FileInstaller(const HostRoot& root, InstallTarget target, Durability /*durability*/)
      : m_root(root), m_target(std::move(target)) {
    const std::filesystem::path dest(m_target.destination);
    m_file_name = dest.filename().string();
    m_dest_parent = dest.parent_path().string();
    m_versions_path = join_host_path(m_target.state_dir, m_target.component);
  }

  Integrity integrity(const std::string& version, const Payload* /*payload*/) override {
    auto parent = HostDir::open(m_root, m_dest_parent);
    auto versions = HostDir::open(m_root, m_versions_path);
    if (!parent || !versions) {
      return Integrity::damaged;
    }
    auto link = read_symlink(parent->fd(), m_file_name, parent->display(m_file_name));
    if (!link || *link != link_target(version)) {
      return Integrity::damaged;
    }
    return has_copy(*versions, version) ? Integrity::intact : Integrity::damaged;
  }

  bool clean_leftovers(ComponentState* /*state*/) override {
    int removed = 0;
    if (auto versions = HostDir::open(m_root, m_versions_path)) {
      removed += versions->remove_leftovers(is_staging_leftover).value();
    }
    if (auto parent = HostDir::open(m_root, m_dest_parent)) {
      const std::string prefix = std::string(k_temp_prefix) + m_file_name + ".";
      removed += parent->remove_leftovers([&](std::string_view name) { return name.starts_with(prefix); }).value();
    }
    if (removed > 0) {
      spdlog::info("{}: removed {} leftover(s) of an interrupted run", m_target.component, removed);
    }
    return false;
  }

  TransferStats stage(const Payload& payload, const std::string& version, const TransferOptions& options) override {
    HostDir versions = HostDir::create(m_root, m_versions_path).value();
    adopt_foreign_file(versions);
    // Also a copy that a killed run made: its state never learned of it.
    m_adopted = has_copy(versions, std::string(k_pre_hoist_version));
    if (versions.stat(version)) {
      if (!has_copy(versions, version)) {
        throw Failure("cannot install version " + version + ": '" + versions.display(version) +
                      "' exists but holds no '" + m_file_name + "'");
      }
      spdlog::info("{}: reusing the complete {} that an earlier run staged", m_target.component,
                   versions.display(version));
      return {};
    }
    Fd source(::open(payload.path().c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
    if (!source) {
      throw Failure(system_message("open '" + payload.path().string() + "'", errno));
    }
    TransferStats stats;
    (replaces_our_link() ? stats.files_changed : stats.files_added) = 1;
    struct stat st {};
    if (::fstat(source.get(), &st) == 0) {
      stats.bytes_total = static_cast<uint64_t>(st.st_size);
    }
    auto progress = [&](uint64_t done) {
      stats.bytes_done = done;
      if (options.on_progress) {
        options.on_progress(stats);
      }
    };
    stats.bytes_written = copy_into(versions, version, source.get(), progress);
    (stats.files_changed > 0 ? stats.bytes_changed : stats.bytes_added) = stats.bytes_total;
    stats.bytes_done = stats.bytes_total;
    m_staged = version;
    return stats;
  }

  /// The pre-hoist copy, whenever one is kept: the state records it (again) as
  /// a kept version, and as previous when nothing else is.
  [[nodiscard]] std::optional<std::string> adopted_version() const override {
    return m_adopted ? std::optional<std::string>(k_pre_hoist_version) : std::nullopt;
  }

  TransferStats commit(const Payload& /*payload*/, const std::string& version, const std::string& /*installed*/,
                       const TransferOptions& /*options*/) override {
    switch_link(version);
    return {};
  }

  void undo_commit() override {
    if (!m_committed) {
      return;
    }
    HostDir parent = HostDir::open(m_root, m_dest_parent).value();
    if (!m_old_link.empty()) {
      replace_symlink(parent.fd(), m_file_name, m_old_link, parent.display(m_file_name)).value();
    } else if (::unlinkat(parent.fd(), m_file_name.c_str(), 0) != 0 && errno != ENOENT) {
      throw Failure(system_message("remove '" + parent.display(m_file_name) + "'", errno));
    }
    m_committed = false;
  }

  void discard_staged() override {
    if (m_staged.empty()) {
      return;
    }
    HostDir versions = HostDir::open(m_root, m_versions_path).value();
    versions.remove_entry(m_staged).value();
    m_staged.clear();
  }

  TransferStats preview(const Payload& payload, const std::string& installed,
                        const TransferOptions& /*options*/) override {
    TransferStats stats;
    std::error_code error;
    const auto size = std::filesystem::file_size(payload.path(), error);
    const uint64_t bytes = error ? 0 : static_cast<uint64_t>(size);
    auto versions = HostDir::open(m_root, m_versions_path);
    if (installed.empty() || !versions || !has_copy(*versions, installed)) {
      stats.files_added = 1;
      stats.bytes_added = bytes;
      return stats;
    }
    const std::string current = installed + "/" + m_file_name;
    auto theirs = sha256_file(versions->fd(), current);
    auto ours = sha256_file(AT_FDCWD, payload.path().string());
    if (theirs && ours && *theirs == *ours) {
      stats.files_unchanged = 1;
    } else {
      stats.files_changed = 1;
      stats.bytes_changed = bytes;
    }
    return stats;
  }

  void check_rollback(const std::string& version, const std::string& /*current*/) override {
    auto versions = HostDir::open(m_root, m_versions_path);
    if (versions && has_copy(*versions, version)) {
      return;
    }
    if (versions && versions->stat(partial_name(version))) {
      throw UsageError("cannot roll back " + m_target.component + " to " + version + ": it is incomplete (only '" +
                       versions->display(partial_name(version)) + "' exists)");
    }
    throw UsageError("cannot roll back " + m_target.component + " to " + version + ": '" +
                     m_root.display(join_host_path(join_host_path(m_versions_path, version), m_file_name)) + "' does not exist");
  }

  void rollback(const std::string& version, const std::string& /*current*/) override { switch_link(version); }

  void remove_version(const std::string& version) override {
    if (auto versions = HostDir::open(m_root, m_versions_path)) {
      versions->remove_entry(version).value();
    }
  }

 private:
  [[nodiscard]] std::string link_target(const std::string& version) const {
    return join_host_path(join_host_path(m_versions_path, version), m_file_name);
  }

  // Whether the destination is hoist's link now (an upgrade changes the file).
  [[nodiscard]] bool replaces_our_link() const {
    auto parent = HostDir::open(m_root, m_dest_parent);
    if (!parent) {
      return false;
    }
    auto link = read_symlink(parent->fd(), m_file_name, parent->display(m_file_name));
    return link && link->starts_with(join_host_path(m_versions_path, ""));
  }

  [[nodiscard]] bool has_copy(const HostDir& versions, const std::string& version) const {
    const auto st = versions.stat(version + "/" + m_file_name);
    // The pre-hoist copy of a link that hoist replaced is a link itself.
    return st && (S_ISREG(st->st_mode) || (version == k_pre_hoist_version && S_ISLNK(st->st_mode)));
  }

  // Copies `source` into `<versions>/<version>/<file>` through a partial directory.
  uint64_t copy_into(const HostDir& versions, const std::string& version, int source,
                     const std::function<void(uint64_t)>& progress) {
    const std::string partial = partial_name(version);
    HostDir staging = versions.make_child(partial).value();
    try {
      const uint64_t bytes =
          copy_file_to(source, staging.fd(), m_file_name, staging.display(m_file_name), progress).value();
      staging.sync().value();
      publish(versions, partial, version);
      return bytes;
    } catch (...) {
      if (auto removed = remove_tree(versions.fd(), partial.c_str(), staging.display()); !removed) {
        spdlog::warn("{}", removed.error().message);
      }
      throw;
    }
  }

  static void publish(const HostDir& versions, const std::string& partial, const std::string& version) {
    if (::renameat(versions.fd(), partial.c_str(), versions.fd(), version.c_str()) != 0) {
      throw Failure(
          system_message("rename '" + versions.display(partial) + "' to '" + versions.display(version) + "'", errno));
    }
    versions.sync().value();
  }

  // A file (k3s's installer puts a regular file there) or a link that hoist did
  // not make is kept as the version `pre-hoist`, so that a rollback can return
  // to it. It is copied, not moved: the destination must exist at every instant.
  void adopt_foreign_file(const HostDir& versions) {
    auto parent = HostDir::open(m_root, m_dest_parent);
    if (!parent) {
      return;
    }
    const auto st = parent->stat(m_file_name);
    if (!st) {
      return;
    }
    const std::string shown = parent->display(m_file_name);
    if (S_ISDIR(st->st_mode)) {
      throw Failure("cannot install '" + shown + "': it is a directory");
    }
    std::string link;
    if (S_ISLNK(st->st_mode)) {
      link = read_symlink(parent->fd(), m_file_name, shown).value();
      if (link.starts_with(join_host_path(m_versions_path, ""))) {
        return;  // hoist's own link
      }
      if (!link.starts_with('/')) {
        link = join_host_path(m_dest_parent, link);  // the copy lives elsewhere: make it absolute
      }
    } else if (!S_ISREG(st->st_mode)) {
      throw Failure("cannot install '" + shown + "': it is neither a regular file nor a symlink");
    }
    const std::string version(k_pre_hoist_version);
    const std::string partial = partial_name(version);
    HostDir staging = versions.make_child(partial).value();
    try {
      if (!link.empty()) {
        if (::symlinkat(link.c_str(), staging.fd(), m_file_name.c_str()) != 0) {
          throw Failure(system_message("create symlink '" + staging.display(m_file_name) + "'", errno));
        }
      } else {
        Fd source(::openat(parent->fd(), m_file_name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY));
        if (!source) {
          throw Failure(system_message("open '" + shown + "'", errno));
        }
        copy_file_to(source.get(), staging.fd(), m_file_name, staging.display(m_file_name)).value();
      }
      staging.sync().value();
      versions.remove_entry(version).value();
      publish(versions, partial, version);
    } catch (...) {
      if (auto removed = remove_tree(versions.fd(), partial.c_str(), staging.display()); !removed) {
        spdlog::warn("{}", removed.error().message);
      }
      throw;
    }
    m_adopted = true;
    spdlog::info("{}: kept the file that was at {} as version {}", m_target.component, shown, version);
  }

  void switch_link(const std::string& version) {
    HostDir parent = HostDir::create(m_root, m_dest_parent).value();
    auto old = read_symlink(parent.fd(), m_file_name, parent.display(m_file_name));
    m_old_link = old ? *old : (m_adopted ? link_target(std::string(k_pre_hoist_version)) : std::string());
    replace_symlink(parent.fd(), m_file_name, link_target(version), parent.display(m_file_name)).value();
    m_committed = true;
  }

  const HostRoot& m_root;
  InstallTarget m_target;
  std::string m_file_name;
  std::string m_dest_parent;
  std::string m_versions_path;
  std::string m_staged;
  bool m_adopted = false;
  bool m_committed = false;
  std::string m_old_link;
};

}  // namespace

std::unique_ptr<Installer> make_file_installer(const HostRoot& root, InstallTarget target, Durability durability) {
  return std::make_unique<FileInstaller>(root, std::move(target), durability);
}

}  // namespace hoist
