// The sysext kind (DESIGN.md): each version of a system extension image under
// the state directory, the image's name in /etc/extensions a link to the
// current one, and systemd-sysext refreshed after the switch (HostSteps).
//
//   <state>/<component>/node-tools-1.4.2.raw            an image file, complete (made only by a rename)
//   <state>/<component>/.node-tools-1.4.3.raw.partial   a staging in progress
//   /etc/extensions/node-tools.raw -> /var/lib/hoist/node-tools/node-tools-1.4.2.raw
//
// A directory payload is kept the same way without the .raw suffix, which
// systemd-sysext only accepts on regular files: <state>/<component>/node-tools-1.4.2/
// linked from /etc/extensions/node-tools. The extension-release check is part
// of the run's verification (sysext_image.hpp), before anything is written.
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <cerrno>

#include "hoist/core/installer.hpp"
#include "hoist/core/sysext_image.hpp"
#include "hoist/sys/atomic_file.hpp"
#include "hoist/sys/atomic_symlink.hpp"
#include "hoist/sys/copy_file.hpp"
#include "hoist/sys/directory.hpp"
#include "hoist/sys/host_dir.hpp"
#include "hoist/sys/sha256.hpp"
#include "hoist/util/error.hpp"

namespace hoist {

namespace {

class SysextInstaller final : public Installer {
 public:
  SysextInstaller(const HostRoot& root, InstallTarget target, Durability durability)
      : m_root(root), m_target(std::move(target)), m_durability(durability) {
    const std::filesystem::path dest(m_target.destination);
    m_link_name = dest.filename().string();
    m_dest_parent = dest.parent_path().string();
    m_versions_path = join_host_path(m_target.state_dir, m_target.component);
    m_directory = !m_link_name.ends_with(".raw");
    m_image_name =
        sysext_image_name(m_target.destination, m_directory ? SysextImageType::directory : SysextImageType::squashfs);
  }

  Integrity integrity(const std::string& version, const Payload* /*payload*/) override {
    auto parent = HostDir::open(m_root, m_dest_parent);
    auto versions = HostDir::open(m_root, m_versions_path);
    if (!parent || !versions) {
      return Integrity::damaged;
    }
    auto link = read_symlink(parent->fd(), m_link_name, parent->display(m_link_name));
    if (!link || *link != link_target(version)) {
      return Integrity::damaged;
    }
    return has_image(*versions, version) ? Integrity::intact : Integrity::damaged;
  }

  bool clean_leftovers(ComponentState* /*state*/) override {
    int removed = 0;
    if (auto versions = HostDir::open(m_root, m_versions_path)) {
      removed += versions->remove_leftovers(is_staging_leftover).value();
    }
    if (auto parent = HostDir::open(m_root, m_dest_parent)) {
      const std::string prefix = std::string(k_temp_prefix) + m_link_name + ".";
      removed += parent->remove_leftovers([&](std::string_view name) { return name.starts_with(prefix); }).value();
    }
    if (removed > 0) {
      spdlog::info("{}: removed {} leftover(s) of an interrupted run", m_target.component, removed);
    }
    return false;
  }

  TransferStats stage(const Payload& payload, const std::string& version, const TransferOptions& options) override {
    check_payload_type(payload);
    HostDir versions = HostDir::create(m_root, m_versions_path).value();
    const std::string entry = entry_name(version);
    if (versions.stat(entry)) {
      if (!has_image(versions, version)) {
        throw Failure("cannot install version " + version + ": '" + versions.display(entry) + "' exists but is not a " +
                      (m_directory ? "directory" : "regular file"));
      }
      spdlog::info("{}: reusing the complete {} that an earlier run staged", m_target.component,
                   versions.display(entry));
      return {};
    }
    const std::string partial = partial_name(entry);
    TransferStats stats;
    try {
      if (m_directory) {
        HostDir staging = versions.make_child(partial).value();
        stats = stage_tree(payload, staging.fd(), -1, options);
        make_tree_durable(staging.fd(), m_durability, staging.display()).value();
      } else {
        stats = copy_image(payload, versions, partial, options);
      }
      if (::renameat(versions.fd(), partial.c_str(), versions.fd(), entry.c_str()) != 0) {
        throw Failure(
            system_message("rename '" + versions.display(partial) + "' to '" + versions.display(entry) + "'", errno));
      }
      versions.sync().value();
    } catch (...) {
      if (auto removed = remove_tree(versions.fd(), partial.c_str(), versions.display(partial)); !removed) {
        spdlog::warn("{}", removed.error().message);
      }
      throw;
    }
    m_staged = version;
    return stats;
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
      replace_symlink(parent.fd(), m_link_name, m_old_link, parent.display(m_link_name)).value();
    } else if (::unlinkat(parent.fd(), m_link_name.c_str(), 0) != 0 && errno != ENOENT) {
      throw Failure(system_message("remove '" + parent.display(m_link_name) + "'", errno));
    }
    m_committed = false;
  }

  void discard_staged() override {
    if (m_staged.empty()) {
      return;
    }
    HostDir versions = HostDir::open(m_root, m_versions_path).value();
    versions.remove_entry(entry_name(m_staged)).value();
    m_staged.clear();
  }

  TransferStats preview(const Payload& payload, const std::string& installed, const TransferOptions& options) override {
    check_payload_type(payload);
    auto versions = HostDir::open(m_root, m_versions_path);
    const bool have = !installed.empty() && versions && has_image(*versions, installed);
    if (m_directory) {
      TransferOptions dry = options;
      dry.dry_run = DryRun::yes;
      Fd current;
      if (have) {
        current.reset(
            ::openat(versions->fd(), entry_name(installed).c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      }
      HostDir staging = versions ? std::move(*versions) : HostDir::open(m_root, "/").value();
      return stage_tree(payload, staging.fd(), current ? current.get() : -1, dry);
    }
    TransferStats stats;
    std::error_code error;
    const auto size = std::filesystem::file_size(payload.path(), error);
    const uint64_t bytes = error ? 0 : static_cast<uint64_t>(size);
    if (!have) {
      stats.files_added = 1;
      stats.bytes_added = bytes;
      return stats;
    }
    auto theirs = sha256_file(versions->fd(), entry_name(installed));
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
    if (versions && has_image(*versions, version)) {
      return;
    }
    const std::string entry = entry_name(version);
    if (versions && versions->stat(partial_name(entry))) {
      throw UsageError("cannot roll back " + m_target.component + " to " + version + ": it is incomplete (only '" +
                       versions->display(partial_name(entry)) + "' exists)");
    }
    throw UsageError("cannot roll back " + m_target.component + " to " + version + ": '" +
                     m_root.display(join_host_path(m_versions_path, entry)) + "' does not exist");
  }

  void rollback(const std::string& version, const std::string& /*current*/) override { switch_link(version); }

  void remove_version(const std::string& version) override {
    if (auto versions = HostDir::open(m_root, m_versions_path)) {
      versions->remove_entry(entry_name(version)).value();
    }
  }

 private:
  [[nodiscard]] std::string entry_name(const std::string& version) const {
    return m_image_name + "-" + version + (m_directory ? "" : ".raw");
  }

  [[nodiscard]] std::string link_target(const std::string& version) const {
    return join_host_path(m_versions_path, entry_name(version));
  }

  [[nodiscard]] bool has_image(const HostDir& versions, const std::string& version) const {
    const auto st = versions.stat(entry_name(version));
    return st && (m_directory ? S_ISDIR(st->st_mode) : S_ISREG(st->st_mode));
  }

  // The destination's name says what the payload must be (sysext_image_name
  // refused the mismatch already when the run was verified).
  void check_payload_type(const Payload& payload) const {
    const bool directory = payload.type() == PayloadType::directory;
    if (directory != m_directory) {
      throw UsageError("the sysext payload '" + payload.path().string() + "' is " +
                       (directory ? "a directory" : "an image file") + " but the destination '" + m_target.destination +
                       "' names " + (m_directory ? "a directory" : "an image file (.raw)"));
    }
  }

  static TransferStats copy_image(const Payload& payload, const HostDir& versions, const std::string& partial,
                                  const TransferOptions& options) {
    Fd source(::open(payload.path().c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
    if (!source) {
      throw Failure(system_message("open '" + payload.path().string() + "'", errno));
    }
    TransferStats stats;
    stats.files_added = 1;
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
    // copy_file_to fsyncs the file; the rename that publishes it is fsynced by the caller.
    stats.bytes_written =
        copy_file_to(source.get(), versions.fd(), partial, versions.display(partial), progress).value();
    stats.bytes_added = stats.bytes_total;
    stats.bytes_done = stats.bytes_total;
    return stats;
  }

  void switch_link(const std::string& version) {
    HostDir parent = HostDir::create(m_root, m_dest_parent).value();
    const auto st = parent.stat(m_link_name);
    if (st && !S_ISLNK(st->st_mode)) {
      // An image someone put there by hand is not ours to replace.
      throw Failure("cannot switch '" + parent.display(m_link_name) +
                    "': it is not a symlink hoist made (remove or move it first)");
    }
    auto old = read_symlink(parent.fd(), m_link_name, parent.display(m_link_name));
    m_old_link = old ? *old : std::string();
    replace_symlink(parent.fd(), m_link_name, link_target(version), parent.display(m_link_name)).value();
    m_committed = true;
  }

  const HostRoot& m_root;
  InstallTarget m_target;
  Durability m_durability;
  std::string m_link_name;
  std::string m_dest_parent;
  std::string m_versions_path;
  std::string m_image_name;
  bool m_directory = false;
  std::string m_staged;
  bool m_committed = false;
  std::string m_old_link;
};

}  // namespace

std::unique_ptr<Installer> make_sysext_installer(const HostRoot& root, InstallTarget target, Durability durability) {
  return std::make_unique<SysextInstaller>(root, std::move(target), durability);
}

}  // namespace hoist
