// The sysext kind (ARCHITECTURE.md, "On-host layout"): each version of a system extension image under
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

#include "hoist/install/installer.hpp"
#include "hoist/sys/directory.hpp"
#include "hoist/sys/durable_tree.hpp"
#include "hoist/sys/host_dir.hpp"
#include "hoist/util/error.hpp"
#include "hoist/util/text.hpp"
#include "hoist/verify/sysext_image.hpp"
#include "linked_versions.hpp"

namespace hoist {

namespace {

class SysextInstaller final : public LinkedVersionInstaller {
 public:
  SysextInstaller(const HostRoot& root, InstallTarget target, Durability durability)
      : LinkedVersionInstaller(root, std::move(target)), m_durability(durability) {
    m_directory = !m_link_name.ends_with(".raw");
    m_image_name =
        sysext_image_name(m_target.destination, m_directory ? SysextImageType::directory : SysextImageType::squashfs);
  }

  TransferStats stage(const Payload& payload, const std::string& version, const TransferOptions& options) override {
    check_payload_type(payload);
    HostDir versions = HostDir::create(m_root, m_versions_path, 0755, &m_made).value();
    if (staged_before(versions, version, m_directory ? "is not a directory" : "is not a regular file", payload,
                      options)) {
      return {};
    }
    TransferStats stats;
    publish(versions, entry_name(version), [&](const std::string& partial) {
      if (m_directory) {
        HostDir staging = versions.make_child(partial).value();
        stats = stage_tree(payload, staging.fd(), -1, options);
        make_tree_durable(staging.fd(), m_durability, staging.display()).value();
      } else {
        stats = copy_payload_file(payload, versions, partial, false, options);
      }
    });
    staged(version);
    return stats;
  }

  TransferStats preview(const Payload& payload, const std::string& installed, const TransferOptions& options) override {
    check_payload_type(payload);
    auto versions = HostDir::open(m_root, m_versions_path);
    const bool have = !installed.empty() && versions && has_version(*versions, installed);
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
    return preview_payload_file(payload, versions ? &*versions : nullptr, have ? entry_name(installed) : std::string());
  }

 private:
  [[nodiscard]] std::string entry_name(const std::string& version) const override {
    return m_image_name + "-" + version + (m_directory ? "" : ".raw");
  }

  [[nodiscard]] std::string link_target(const std::string& version) const override {
    return join_host_path(m_versions_path, entry_name(version));
  }

  [[nodiscard]] std::string version_in_link(const std::string& target) const override {
    const std::string suffix = m_directory ? "" : ".raw";
    return name_between(target, join_host_path(m_versions_path, m_image_name + "-"), suffix);
  }

  [[nodiscard]] bool holds_payload(const HostDir& versions, const std::string& version, const Payload& payload,
                                   const TransferOptions& options) const override {
    if (!m_directory) {
      // The payload's side from the verified sums when they list it: after `hoist stage`, the upgrade's
      // verification deferred reading the image, and the copy must then equal what the sums say, not merely the
      // payload file (the sysext kind keeps no index: the copy is read).
      return version_file_digest(versions, version, entry_name(version), entry_name(version), options.compare) ==
             payload_digest(payload, options);
    }
    const Fd staged(
        ::openat(versions.fd(), entry_name(version).c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!staged) {
      throw Failure(system_message("open " + in_quotes(versions.display(entry_name(version))), errno));
    }
    TransferOptions dry = options;
    dry.dry_run = DryRun::yes;
    dry.produced = nullptr;
    dry.check_staged = nullptr;
    dry.on_progress = nullptr;
    const TransferStats stats = stage_tree(payload, versions.fd(), staged.get(), dry);
    return stats.files_added + stats.files_changed + stats.files_removed == 0;
  }

  [[nodiscard]] bool has_version(const HostDir& versions, const std::string& version) const override {
    const auto st = versions.stat(entry_name(version));
    return st && (m_directory ? S_ISDIR(st->st_mode) : S_ISREG(st->st_mode));
  }

  void check_switch() override {
    if (auto parent = HostDir::open(m_root, m_dest_parent)) {
      if (const auto st = parent->stat(m_link_name); st && !S_ISLNK(st->st_mode)) {
        (void)link_before_first_switch(*parent);
      }
    }
  }

  /// An image someone put there by hand is not ours to replace.
  [[nodiscard]] std::string link_before_first_switch(const HostDir& parent) const override {
    if (parent.stat(m_link_name)) {
      throw Failure("cannot switch '" + parent.display(m_link_name) +
                    "': it is not a symlink hoist made (remove or move it first)");
    }
    return {};
  }

  // The destination's name says what the payload must be (sysext_image_name
  // refused the mismatch already when the run was verified).
  void check_payload_type(const Payload& payload) const {
    const bool directory = payload.type() == PayloadType::directory;
    if (directory != m_directory) {
      throw UsageError("the sysext payload " + in_quotes(payload.path().string()) + " is " +
                       (directory ? "a directory" : "an image file") + " but the destination '" + m_target.destination +
                       "' names " + (m_directory ? "a directory" : "an image file (.raw)"));
    }
  }

  Durability m_durability;
  std::string m_image_name;
  bool m_directory = false;
};

}  // namespace

std::unique_ptr<Installer> make_sysext_installer(const HostRoot& root, InstallTarget target, Durability durability) {
  return std::make_unique<SysextInstaller>(root, std::move(target), durability);
}

}  // namespace hoist
