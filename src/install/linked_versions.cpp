#include "linked_versions.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "hoist/sys/atomic_file.hpp"
#include "hoist/sys/atomic_symlink.hpp"
#include "hoist/sys/copy_with_metadata.hpp"
#include "hoist/sys/directory.hpp"
#include "hoist/sys/sha256.hpp"
#include "hoist/util/error.hpp"
#include "hoist/util/text.hpp"

namespace hoist {

LinkedVersionInstaller::LinkedVersionInstaller(const HostRoot& root, InstallTarget target)
    : m_root(root), m_target(std::move(target)), m_indexes(m_root, m_target) {
  const std::filesystem::path dest(m_target.destination);
  m_link_name = dest.filename().string();
  m_dest_parent = dest.parent_path().string();
  m_versions_path = join_host_path(m_target.state_dir, m_target.component);
}

Integrity LinkedVersionInstaller::integrity(const std::string& version, const Payload* /*payload*/) {
  auto parent = HostDir::open(m_root, m_dest_parent);
  auto versions = HostDir::open(m_root, m_versions_path);
  if (!parent || !versions) {
    return Integrity::damaged;
  }
  auto link = read_symlink(parent->fd(), m_link_name, parent->display(m_link_name));
  if (!link || *link != link_target(version)) {
    return Integrity::damaged;
  }
  return has_version(*versions, version) ? Integrity::intact : Integrity::damaged;
}

std::string LinkedVersionInstaller::host_current(const ComponentState& /*state*/) {
  auto parent = HostDir::open(m_root, m_dest_parent);
  auto versions = HostDir::open(m_root, m_versions_path);
  if (!parent || !versions) {
    return {};
  }
  auto link = read_symlink(parent->fd(), m_link_name, parent->display(m_link_name));
  if (!link) {
    return {};
  }
  const std::string version = version_in_link(*link);
  return !version.empty() && has_version(*versions, version) ? version : std::string();
}

std::string LinkedVersionInstaller::name_between(const std::string& text, const std::string& prefix,
                                                 const std::string& suffix) {
  if (text.size() <= prefix.size() + suffix.size() || !text.starts_with(prefix) || !text.ends_with(suffix)) {
    return {};
  }
  std::string name = text.substr(prefix.size(), text.size() - prefix.size() - suffix.size());
  return name.find('/') == std::string::npos ? name : std::string();
}

bool LinkedVersionInstaller::clean_leftovers(ComponentState* /*state*/) {
  int removed = 0;
  if (auto versions = HostDir::open(m_root, m_versions_path)) {
    removed += versions->remove_leftovers(is_staging_leftover).value();
    // An index whose version is not there: the staging it was written for was killed before its rename.
    removed += m_indexes.clean([&](const std::string& version) { return has_version(*versions, version); });
  }
  if (auto parent = HostDir::open(m_root, m_dest_parent)) {
    // The link's directory is the host's too (/usr/local/bin): an entry with hoist's prefix is a killed switch's
    // temporary link only when it is a link to one of this component's versions. An operator's is kept.
    const std::string prefix = std::string(k_temp_prefix) + m_link_name + ".";
    removed += parent
                   ->remove_leftovers([&](std::string_view name) {
                     if (!name.starts_with(prefix)) {
                       return false;
                     }
                     const std::string entry(name);
                     auto target = read_symlink(parent->fd(), entry, parent->display(entry));
                     return target && !version_in_link(*target).empty();
                   })
                   .value();
  }
  if (removed > 0) {
    spdlog::info("{}: removed {} leftover(s) of an interrupted run", m_target.component, removed);
  }
  return false;
}

bool LinkedVersionInstaller::has_complete(const std::string& version) {
  auto versions = HostDir::open(m_root, m_versions_path);
  return versions && has_version(*versions, version);
}

bool LinkedVersionInstaller::holds(const std::string& version, const Payload& payload, const TransferOptions& options) {
  auto versions = HostDir::open(m_root, m_versions_path);
  return versions && has_version(*versions, version) && holds_payload(*versions, version, payload, options);
}

TransferStats LinkedVersionInstaller::commit(const Payload& /*payload*/, const std::string& version,
                                             const std::string& /*installed*/, const TransferOptions& /*options*/) {
  switch_link(version);
  return {};
}

void LinkedVersionInstaller::undo_commit() {
  if (!m_committed) {
    return;
  }
  HostDir parent = HostDir::open(m_root, m_dest_parent).value();
  if (!m_old_link.empty()) {
    replace_symlink(parent.fd(), m_link_name, m_old_link, parent.display(m_link_name)).value();
  } else if (::unlinkat(parent.fd(), m_link_name.c_str(), 0) != 0 && errno != ENOENT) {
    throw Failure(system_message("remove " + in_quotes(parent.display(m_link_name)), errno));
  }
  m_committed = false;
}

void LinkedVersionInstaller::discard_staged() {
  if (!m_staged.empty()) {
    HostDir versions = HostDir::open(m_root, m_versions_path).value();
    versions.remove_entry(entry_name(m_staged)).value();
    m_indexes.remove(m_staged);
    m_staged.clear();
  }
  // A first install takes back the directories it made.
  HostDir::remove_made(m_root, m_made).value();
}

void LinkedVersionInstaller::check_rollback(const std::string& version, const std::string& /*current*/) {
  auto versions = HostDir::open(m_root, m_versions_path);
  if (versions && has_version(*versions, version)) {
    return;
  }
  const std::string partial = partial_name(entry_name(version));
  if (versions && versions->stat(partial)) {
    throw UsageError("cannot roll back " + m_target.component + " to " + version + ": it is incomplete (only '" +
                     versions->display(partial) + "' exists)");
  }
  throw UsageError("cannot roll back " + m_target.component + " to " + version + ": '" +
                   m_root.display(link_target(version)) + "' does not exist");
}

void LinkedVersionInstaller::rollback(const std::string& version, const std::string& /*current*/) {
  switch_link(version);
}

void LinkedVersionInstaller::withdraw() {
  auto parent = HostDir::open(m_root, m_dest_parent);
  if (!parent) {
    if (parent.error().errnum == ENOENT) {
      return;  // no directory, no link
    }
    throw Failure(parent.error().message);
  }
  if (::unlinkat(parent->fd(), m_link_name.c_str(), 0) != 0 && errno != ENOENT) {
    throw Failure(system_message("remove " + in_quotes(parent->display(m_link_name)), errno));
  }
  parent->sync().value();
}

void LinkedVersionInstaller::remove_version(const std::string& version) {
  if (auto versions = HostDir::open(m_root, m_versions_path)) {
    versions->remove_entry(entry_name(version)).value();
  }
  m_indexes.remove(version);
}

bool LinkedVersionInstaller::staged_before(const HostDir& versions, const std::string& version,
                                           const std::string& incomplete, const Payload& payload,
                                           const TransferOptions& options) const {
  const std::string entry = entry_name(version);
  if (!versions.stat(entry)) {
    return false;
  }
  if (!has_version(versions, version)) {
    throw Failure("cannot install version " + version + ": " + in_quotes(versions.display(entry)) + " exists but " +
                  incomplete);
  }
  if (!holds_payload(versions, version, payload, options)) {
    spdlog::info("{}: {} that an earlier run staged differs from the payload: staging it again", m_target.component,
                 versions.display(entry));
    versions.remove_entry(entry).value();
    m_indexes.remove(version);
    return false;
  }
  spdlog::info("{}: reusing the complete {} that an earlier run staged", m_target.component, versions.display(entry));
  return true;
}

void LinkedVersionInstaller::publish(const HostDir& versions, const std::string& entry,
                                     const std::function<void(const std::string& partial)>& make) {
  const std::string partial = partial_name(entry);
  try {
    make(partial);
    if (::renameat(versions.fd(), partial.c_str(), versions.fd(), entry.c_str()) != 0) {
      throw Failure(system_message(
          "rename " + in_quotes(versions.display(partial)) + " to " + in_quotes(versions.display(entry)), errno));
    }
    versions.sync().value();
  } catch (...) {
    if (auto removed = remove_tree(versions.fd(), partial.c_str(), versions.display(partial)); !removed) {
      spdlog::warn("{}", removed.error().message);
    }
    throw;
  }
}

TransferStats LinkedVersionInstaller::copy_payload_file(const Payload& payload, const HostDir& dir,
                                                        const std::string& name, bool replaces,
                                                        const TransferOptions& options, Sha256Digest* digest) {
  // The file that verification hashed, whatever is at the payload's path by now.
  const Fd source = payload.reopen();
  TransferStats stats;
  (replaces ? stats.files_changed : stats.files_added) = 1;
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
  // The verified digest is the copy's when the payload file did not change while it was copied (check_unchanged()
  // below): then the copy need not pass through here to be hashed, and the kernel may copy it.
  const bool verified =
      digest != nullptr && options.payload_file_digest != nullptr && options.compare == Compare::content;
  Sha256Digest* hashed = digest != nullptr && !verified ? digest : nullptr;
  // copy_with_metadata fsyncs the file; publish() makes its rename durable.
  stats.bytes_written = copy_with_metadata(source.get(), dir.fd(), name, dir.display(name), progress, hashed).value();
  payload.check_unchanged();
  if (verified) {
    *digest = *options.payload_file_digest;
  }
  (replaces ? stats.bytes_changed : stats.bytes_added) = stats.bytes_total;
  stats.bytes_done = stats.bytes_total;
  return stats;
}

Sha256Digest LinkedVersionInstaller::payload_digest(const Payload& payload, const TransferOptions& options) {
  if (options.payload_file_digest != nullptr && options.compare == Compare::content) {
    return *options.payload_file_digest;
  }
  const Fd file = payload.reopen();
  return sha256_of_file(file.get(), payload.path().string()).value();
}

Sha256Digest LinkedVersionInstaller::version_file_digest(const HostDir& versions, const std::string& version,
                                                         const std::string& relpath, const std::string& name,
                                                         Compare compare) const {
  const Fd file(::openat(versions.fd(), relpath.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!file) {
    throw Failure(system_message("open " + in_quotes(versions.display(relpath)), errno));
  }
  struct stat st {};
  if (::fstat(file.get(), &st) != 0) {
    throw Failure(system_message("stat " + in_quotes(versions.display(relpath)), errno));
  }
  if (!S_ISREG(st.st_mode)) {
    throw Failure(in_quotes(versions.display(relpath)) + " is not a regular file");
  }
  if (compare == Compare::content) {
    if (const auto index = m_indexes.load(version)) {
      if (const auto digest = index->vouch("", name, st)) {
        return *digest;
      }
    }
  }
  return sha256_of_file(file.get(), versions.display(relpath)).value();
}

TransferStats LinkedVersionInstaller::preview_payload_file(const Payload& payload, const HostDir* versions,
                                                           const std::string& installed) {
  TransferStats stats;
  std::error_code error;
  const auto size = std::filesystem::file_size(payload.path(), error);
  const uint64_t bytes = error ? 0 : static_cast<uint64_t>(size);
  if (installed.empty() || versions == nullptr) {
    stats.files_added = 1;
    stats.bytes_added = bytes;
    return stats;
  }
  auto theirs = sha256_file(versions->fd(), installed);
  const Fd file = payload.reopen();
  auto ours = sha256_fd(file.get(), payload.path().string());
  if (theirs && ours && *theirs == *ours) {
    stats.files_unchanged = 1;
  } else {
    stats.files_changed = 1;
    stats.bytes_changed = bytes;
  }
  return stats;
}

void LinkedVersionInstaller::switch_link(const std::string& version) {
  HostDir parent = HostDir::create(m_root, m_dest_parent, 0755, &m_made).value();
  auto old = read_symlink(parent.fd(), m_link_name, parent.display(m_link_name));
  m_old_link = old ? *old : link_before_first_switch(parent);
  replace_symlink(parent.fd(), m_link_name, link_target(version), parent.display(m_link_name)).value();
  m_committed = true;
}

}  // namespace hoist
