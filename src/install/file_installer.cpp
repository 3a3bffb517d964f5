// The file kind (ARCHITECTURE.md, "On-host layout"): each version's copy under the state directory, the
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
#include <sys/xattr.h>

#include <cerrno>

#include "hoist/install/installer.hpp"
#include "hoist/sys/atomic_symlink.hpp"
#include "hoist/sys/copy_with_metadata.hpp"
#include "hoist/sys/directory.hpp"
#include "hoist/sys/host_dir.hpp"
#include "hoist/sys/metadata.hpp"
#include "hoist/transfer/content_index.hpp"
#include "hoist/util/error.hpp"
#include "hoist/util/text.hpp"
#include "linked_versions.hpp"

namespace hoist {

namespace {

class FileInstaller final : public LinkedVersionInstaller {
 public:
  FileInstaller(const HostRoot& root, InstallTarget target, Durability /*durability*/)
      : LinkedVersionInstaller(root, std::move(target)) {}

  TransferStats stage(const Payload& payload, const std::string& version, const TransferOptions& options) override {
    HostDir versions = HostDir::create(m_root, m_versions_path, 0755, &m_made).value();
    adopt_foreign_file(versions);
    // Also a copy that a killed run made: its state never learned of it.
    m_adopted = has_version(versions, std::string(k_pre_hoist_version));
    if (staged_before(versions, version, "holds no " + in_quotes(m_link_name), payload, options)) {
      return {};
    }
    TransferStats stats;
    const bool replaces = replaces_our_link();
    if (m_label.empty()) {
      m_label = destination_label();
    }
    publish(versions, version, [&](const std::string& partial) {
      HostDir staging = versions.make_child(partial).value();
      Sha256Digest digest{};
      stats = copy_payload_file(payload, staging, m_link_name, replaces, options, &digest);
      label_copy(payload, staging);
      staging.sync().value();
      // The index of the version: its one file's digest, stamped after the last change to its inode (the label).
      // Before the rename, as the tree kind's: a complete version has its index, and one that a kill left without
      // its version is the next run's to remove. The rename of the directory leaves the file's ctime alone.
      const auto st = staging.stat(m_link_name);
      if (!st) {
        throw Failure(system_message("stat " + in_quotes(staging.display(m_link_name)), errno));
      }
      ContentIndex produced;
      produced.add("", m_link_name, {digest, FileStamp::of(*st), {}});
      m_indexes.save(version, produced, &m_made);
    });
    staged(version);
    return stats;
  }

  /// The pre-hoist copy, whenever one is kept: the state records it (again) as
  /// a kept version, and as previous when nothing else is.
  [[nodiscard]] std::optional<std::string> adopted_version() const override {
    return m_adopted ? std::optional<std::string>(k_pre_hoist_version) : std::nullopt;
  }

  void use_selinux_label(const std::string& label) override { m_label = label; }

  /// The label every kept copy takes: recorded in the state, else that of the file the first switch replaces.
  [[nodiscard]] std::string selinux_label() const override { return m_label; }

  TransferStats preview(const Payload& payload, const std::string& installed,
                        const TransferOptions& /*options*/) override {
    auto versions = HostDir::open(m_root, m_versions_path);
    const bool have = !installed.empty() && versions && has_version(*versions, installed);
    return preview_payload_file(payload, versions ? &*versions : nullptr,
                                have ? installed + "/" + m_link_name : std::string());
  }

 private:
  /// `<versions>/<version>/<file>`: a directory per version, which holds the file under its own name.
  [[nodiscard]] std::string entry_name(const std::string& version) const override { return version; }

  [[nodiscard]] std::string link_target(const std::string& version) const override {
    return join_host_path(join_host_path(m_versions_path, version), m_link_name);
  }

  [[nodiscard]] std::string version_in_link(const std::string& target) const override {
    return name_between(target, join_host_path(m_versions_path, ""), "/" + m_link_name);
  }

  // The staged copy's digest from its index (nothing read while it is the inode indexed), the payload's from the
  // verified SHA256SUMS (nothing read): a copy that `hoist stage` made before the drain costs two stats here.
  [[nodiscard]] bool holds_payload(const HostDir& versions, const std::string& version, const Payload& payload,
                                   const TransferOptions& options) const override {
    return version_file_digest(versions, version, version + "/" + m_link_name, m_link_name, options.compare) ==
           payload_digest(payload, options);
  }

  void check_switch() override {
    auto parent = HostDir::open(m_root, m_dest_parent);
    if (!parent) {
      return;  // the switch makes the directory
    }
    const auto st = parent->stat(m_link_name);
    if (!st) {
      return;
    }
    const std::string shown = parent->display(m_link_name);
    if (S_ISDIR(st->st_mode)) {
      throw Failure("cannot install " + in_quotes(shown) + ": it is a directory");
    }
    if (!S_ISREG(st->st_mode) && !S_ISLNK(st->st_mode)) {
      throw Failure("cannot install " + in_quotes(shown) + ": it is neither a regular file nor a symlink");
    }
  }

  [[nodiscard]] bool has_version(const HostDir& versions, const std::string& version) const override {
    const auto st = versions.stat(version + "/" + m_link_name);
    // The pre-hoist copy of a link that hoist replaced is a link itself.
    return st && (S_ISREG(st->st_mode) || (version == k_pre_hoist_version && S_ISLNK(st->st_mode)));
  }

  /// The file that was there is kept as pre-hoist: undoing the first switch links to that copy.
  [[nodiscard]] std::string link_before_first_switch(const HostDir& /*parent*/) const override {
    return m_adopted ? link_target(std::string(k_pre_hoist_version)) : std::string();
  }

  // Whether the destination is hoist's link now (an upgrade changes the file).
  [[nodiscard]] bool replaces_our_link() const {
    auto parent = HostDir::open(m_root, m_dest_parent);
    if (!parent) {
      return false;
    }
    auto link = read_symlink(parent->fd(), m_link_name, parent->display(m_link_name));
    return link && link->starts_with(join_host_path(m_versions_path, ""));
  }

  // A file (k3s's installer puts a regular file there) or a link that hoist did
  // not make is kept as the version `pre-hoist`, so that a rollback can return
  // to it. It is copied, not moved: the destination must exist at every instant.
  void adopt_foreign_file(const HostDir& versions) {
    auto parent = HostDir::open(m_root, m_dest_parent);
    if (!parent) {
      return;
    }
    const auto st = parent->stat(m_link_name);
    if (!st) {
      return;
    }
    const std::string shown = parent->display(m_link_name);
    if (S_ISDIR(st->st_mode)) {
      throw Failure("cannot install " + in_quotes(shown) + ": it is a directory");
    }
    std::string link;
    if (S_ISLNK(st->st_mode)) {
      link = read_symlink(parent->fd(), m_link_name, shown).value();
      if (link.starts_with(join_host_path(m_versions_path, ""))) {
        return;  // hoist's own link
      }
      if (!link.starts_with('/')) {
        link = join_host_path(m_dest_parent, link);  // the copy lives elsewhere: make it absolute
      }
    } else if (!S_ISREG(st->st_mode)) {
      throw Failure("cannot install " + in_quotes(shown) + ": it is neither a regular file nor a symlink");
    }
    const std::string version(k_pre_hoist_version);
    publish(versions, version, [&](const std::string& partial) {
      HostDir staging = versions.make_child(partial).value();
      if (!link.empty()) {
        if (::symlinkat(link.c_str(), staging.fd(), m_link_name.c_str()) != 0) {
          throw Failure(system_message("create symlink " + in_quotes(staging.display(m_link_name)), errno));
        }
      } else {
        Fd source(::openat(parent->fd(), m_link_name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY));
        if (!source) {
          throw Failure(system_message("open " + in_quotes(shown), errno));
        }
        copy_with_metadata(source.get(), staging.fd(), m_link_name, staging.display(m_link_name)).value();
      }
      staging.sync().value();
      versions.remove_entry(version).value();
    });
    m_adopted = true;
    spdlog::info("{}: kept the file that was at {} as version {}", m_target.component, shown, version);
  }

  // The security.selinux label of the file at the destination, when it is not hoist's link (the first switch):
  // k3s's installer labels its binary container_runtime_exec_t, and a copy under the state directory would
  // otherwise carry that directory's label (var_lib_t), which a confined runtime may not execute.
  [[nodiscard]] std::string destination_label() const {
    if (replaces_our_link()) {
      return {};
    }
    auto file = m_root.open(m_target.destination, O_RDONLY | O_NOCTTY | O_NONBLOCK);
    if (!file) {
      return {};  // nothing there (a first install), or a dangling link: no label to keep
    }
    auto label = read_selinux_label(file->get(), m_root.display(m_target.destination)).value();
    if (!label.empty()) {
      spdlog::info("{}: the copies under {} take the SELinux label {} of {}", m_target.component, m_versions_path,
                   label, m_root.display(m_target.destination));
    }
    return label;
  }

  // Gives the staged copy m_label, unless the payload carries a label of its own (which the copy kept).
  void label_copy(const Payload& payload, const HostDir& staging) const {
    if (m_label.empty() || !read_selinux_label(payload.reopen().get(), payload.path().string()).value().empty()) {
      return;
    }
    const std::string shown = staging.display(m_link_name);
    const Fd copy(::openat(staging.fd(), m_link_name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY));
    if (!copy) {
      throw Failure(system_message("open " + in_quotes(shown), errno));
    }
    // The kernel's own labels end with a NUL, as chcon and setfattr write them.
    const std::string value = m_label + '\0';
    if (::fsetxattr(copy.get(), k_selinux_xattr.data(), value.data(), value.size(), 0) != 0) {
      throw Failure(system_message("set the SELinux label " + in_quotes(m_label) + " on " + in_quotes(shown), errno));
    }
  }

  bool m_adopted = false;
  std::string m_label;
};

}  // namespace

std::unique_ptr<Installer> make_file_installer(const HostRoot& root, InstallTarget target, Durability durability) {
  return std::make_unique<FileInstaller>(root, std::move(target), durability);
}

}  // namespace hoist
