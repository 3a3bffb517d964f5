#include "tree_node.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <tuple>
#include <utility>

#include "hoist/sys/directory.hpp"
#include "hoist/sys/sha256.hpp"
#include "hoist/util/error.hpp"
#include "read_ahead.hpp"
#include "transfer_support.hpp"

namespace hoist::transfer {

namespace {

/// Opens an existing regular file or directory for reading its xattrs and content.
Fd open_existing(int dirfd, const char* name, mode_t type, std::string_view display) {
  const int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | (type == S_IFDIR ? O_DIRECTORY : 0);
  Fd fd(::openat(dirfd, name, flags));
  if (!fd) {
    throw Failure(system_message("open " + in_quotes(display), errno));
  }
  return fd;
}

}  // namespace

SourceNode read_source(int dirfd, const char* name, const struct stat& st, std::string_view display, Fd opened) {
  SourceNode node;
  node.meta = NodeMeta::from_stat(st);
  node.dev = st.st_dev;
  node.st = st;
  switch (node.meta.type()) {
    case S_IFREG:
      // Opened now only when its xattrs are cheaper to read open; else when its data is read.
      node.dirfd = dirfd;
      node.name = name;
      node.fd = std::move(opened);
      if (!xattrs_readable_by_name()) {
        open_source(node, display);
      }
      node.xattrs = read_xattrs(NodeRef{dirfd, name, node.fd.get()}, display).value();
      break;
    case S_IFLNK:
      node.symlink = read_symlink(dirfd, name, display).value();
      node.xattrs = read_xattrs(NodeRef{dirfd, name}, display).value();
      break;
    case S_IFDIR: {
      Fd dir = open_existing(dirfd, name, S_IFDIR, display);
      node.xattrs = read_xattrs(NodeRef{dirfd, name, dir.get()}, display).value();
      break;
    }
    default: node.xattrs = read_xattrs(NodeRef{dirfd, name}, display).value(); break;
  }
  return node;
}

int open_source(SourceNode& node, std::string_view display) {
  if (!node.fd) {
    node.fd = open_existing(node.dirfd, node.name, S_IFREG, display);
  }
  return node.fd.get();
}

ExistingNode stat_existing(int dirfd, const char* name, std::string_view display) {
  ExistingNode existing;
  if (dirfd < 0) {
    return existing;
  }
  if (::fstatat(dirfd, name, &existing.st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) {
      return existing;
    }
    throw Failure(system_message("stat " + in_quotes(display), errno));
  }
  existing.present = true;
  return existing;
}

std::optional<ExistingNode> existing_seen(const ReadAhead::Seen* seen) {
  if (seen == nullptr || seen->skip == ReadAhead::Seen::Skip::unknown) {
    return std::nullopt;
  }
  return ExistingNode{seen->skip == ReadAhead::Seen::Skip::present, seen->skip_st};
}

std::string EntryPath::relpath() const {
  return join_path(dir, name);
}

std::optional<Sha256Digest> listed_digest(const TransferOptions& options, const std::string& relpath) {
  if (options.payload_digests == nullptr || options.compare == Compare::checksum) {
    return std::nullopt;
  }
  const Sha256Digest* digest = options.payload_digests->find(relpath);
  return digest != nullptr ? std::optional<Sha256Digest>(*digest) : std::nullopt;
}

Compared compare_node(SourceNode& source, const ExistingNode& existing, int dirfd, EntryPath at,
                      const TransferOptions& options, std::string_view source_display, std::string_view display) {
  if (!existing.present) {
    return {Outcome::added, {}, {}};
  }
  if (!same_attributes(source.meta, NodeMeta::from_stat(existing.st))) {
    return {Outcome::changed, {}, {}};
  }
  const std::string name(at.name);
  const mode_t type = source.meta.type();
  if (type == S_IFLNK && read_symlink(dirfd, name.c_str(), display).value() != source.symlink) {
    return {Outcome::changed, {}, {}};
  }
  // Equal size and mtime say nothing of the bytes (one mtime for every file of a reproducible image): the
  // index vouches for them while the inode is the one it took them of, else they are read.
  std::optional<Sha256Digest> theirs;
  if (type == S_IFREG && options.known != nullptr && options.compare != Compare::checksum) {
    theirs = options.known->vouch(at.dir, at.name, existing.st);
  }
  // Opened for its xattrs where reading them by name costs more, and for its content.
  Fd fd;
  if ((type == S_IFREG && !theirs) || ((type == S_IFREG || type == S_IFDIR) && !xattrs_readable_by_name())) {
    fd = open_existing(dirfd, name.c_str(), type, display);
  }
  if (!same_xattrs(source.xattrs, read_xattrs(NodeRef{dirfd, name.c_str(), fd.get()}, display).value())) {
    return {Outcome::changed, {}, {}};
  }
  if (type != S_IFREG) {
    return {Outcome::unchanged, {}, {}};
  }
  std::optional<Sha256Digest> ours = listed_digest(options, at.relpath());
  SourceStamp source_stamp;
  if (!ours) {
    // A payload file read before, unchanged since (the same inode and ctime), holds the bytes it held then.
    if (options.known != nullptr && options.compare != Compare::checksum) {
      ours = options.known->vouch_source(at.dir, at.name, source.st);
    }
    if (!ours) {
      ours = sha256_of_file(open_source(source, source_display), source.meta.size, source_display).value();
    }
    source_stamp = recordable_source(source, options);
  }
  if (!theirs) {
    theirs = sha256_of_file(fd.get(), display).value();
  }
  return {*ours == *theirs ? Outcome::unchanged : Outcome::changed, ours, source_stamp};
}

SourceStamp recordable_source(const SourceNode& source, const TransferOptions& options) {
  const struct timespec& ctime = source.st.st_ctim;
  constexpr int64_t k_ns = 1'000'000'000;
  if (!S_ISREG(source.st.st_mode) || options.source_stamps_before_ns <= 0 || ctime.tv_sec < 0 ||
      ctime.tv_sec > options.source_stamps_before_ns / k_ns ||
      ctime.tv_sec * k_ns + ctime.tv_nsec >= options.source_stamps_before_ns) {
    return {};
  }
  return SourceStamp::of(source.st);
}

FileStamp stamp_of(int dirfd, const char* name, std::string_view display) {
  struct stat st {};
  if (::fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
    throw Failure(system_message("stat " + in_quotes(display), errno));
  }
  return FileStamp::of(st);
}

Creator Creator::of_process() {
  return Creator{current_umask(), ::geteuid(), ::getegid()};
}

InitialMode initial_mode(const WriteTarget& target, mode_t mode) {
  // The inode is made with its final permission bits where the umask lets it,
  // and owned by us: then apply_metadata() has no chmod or chown left to do.
  const mode_t perms = mode & 0777;
  const Creator& creator = target.creator;
  return InitialMode{creator.uid, creator.gid, (perms & creator.umask) == 0 ? perms : mode_t{0600}};
}

uint64_t write_node(SourceNode& source, const WriteTarget& target, DataCopier& copier, std::string_view source_display,
                    std::string_view target_display, const CopyProgress& progress, ContentIndex::Entry* written_entry) {
  const InitialMode initial = initial_mode(target, source.meta.mode);
  const mode_t create_perms = initial.perms;
  uint64_t written = 0;
  Fd fd;
  switch (source.meta.type()) {
    case S_IFREG:
      // Readable too: a clone is hashed from the copy (DataCopier::copy_hashed).
      fd.reset(::openat(target.dirfd, target.name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, create_perms));
      if (!fd) {
        throw Failure(system_message("create " + in_quotes(target_display), errno));
      }
      // Offsets stay at 0 for the copy: comparisons read with pread.
      if (written_entry != nullptr) {
        written = copier
                      .copy_hashed(open_source(source, source_display), source.dev, fd.get(), target.dev,
                                   source.meta.size, written_entry->digest, source_display, target_display, progress)
                      .value();
      } else {
        written = copier
                      .copy(open_source(source, source_display), source.dev, fd.get(), target.dev, source.meta.size,
                            source_display, target_display, progress)
                      .value();
      }
      break;
    case S_IFLNK:
      if (::symlinkat(source.symlink.c_str(), target.dirfd, target.name) != 0) {
        throw Failure(system_message("create symlink " + in_quotes(target_display), errno));
      }
      break;
    case S_IFCHR:
    case S_IFBLK:
    case S_IFIFO:
    case S_IFSOCK:
      if (::mknodat(target.dirfd, target.name, source.meta.type() | create_perms, source.meta.rdev) != 0) {
        throw Failure(system_message("create " + in_quotes(target_display), errno));
      }
      break;
    default: throw Failure("failed to copy " + in_quotes(source_display) + ": unsupported file type");
  }
  apply_metadata(NodeRef{target.dirfd, target.name, fd.get()}, source.meta, source.xattrs, target.inherited,
                 target_display, target.owner == NewOwner::creator ? &initial : nullptr)
      .value();
  if (written_entry != nullptr && fd) {
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) {
      throw Failure(system_message("stat " + in_quotes(target_display), errno));
    }
    written_entry->stamp = FileStamp::of(st);
  }
  return written;
}

void count_tree(int dirfd, const char* name, uint64_t& files, uint64_t& bytes, std::string_view display) {
  struct stat st {};
  if (::fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) {
      return;
    }
    throw Failure(system_message("stat " + in_quotes(display), errno));
  }
  ++files;
  if (S_ISREG(st.st_mode)) {
    bytes += static_cast<uint64_t>(st.st_size);
    return;
  }
  if (!S_ISDIR(st.st_mode)) {
    return;
  }
  Fd dir = open_directory(dirfd, name, display).value();
  for (const DirEntry& entry : read_directory(dir.get(), display).value()) {
    count_tree(dir.get(), entry.name.c_str(), files, bytes, join_path(display, entry.name));
  }
}

void count_replaced(Counters& counters, int dirfd, const std::string& name, std::string_view display) {
  uint64_t files = 0;
  uint64_t bytes = 0;
  count_tree(dirfd, name.c_str(), files, bytes, display);
  if (files > 0) {
    counters.count_removed(files - 1, bytes);
  }
}

Fd open_payload_root(const Payload& payload) {
  Fd root(::open(payload.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root) {
    throw Failure(system_message("open directory " + in_quotes(payload.path().string()), errno));
  }
  return root;
}

void for_each_link_group(std::vector<LinkMember>& members, const std::function<void(size_t, size_t)>& group) {
  std::sort(members.begin(), members.end(), [](const LinkMember& a, const LinkMember& b) {
    return std::tie(a.st.st_dev, a.st.st_ino, a.parent, a.name) < std::tie(b.st.st_dev, b.st.st_ino, b.parent, b.name);
  });
  for (size_t first = 0; first < members.size();) {
    size_t end = first + 1;
    while (end < members.size() && members[end].st.st_dev == members[first].st.st_dev &&
           members[end].st.st_ino == members[first].st.st_ino) {
      ++end;
    }
    group(first, end);
    first = end;
  }
}

namespace {

/// tree_bytes() as tasks of a WorkPool, one per directory: on a cold cache,
/// several threads wait on the disk's inode reads at once.
class TreeBytes {
 public:
  TreeBytes(WorkPool& pool, const std::stop_token& stop) : m_pool(pool), m_stop(stop) {}

  uint64_t total(int dir, std::string_view display) {
    auto root = std::make_shared<Fd>(reopen_directory(dir, display).value());
    m_pool.submit([this, root, path = std::string(display)]() { walk(root, path); });
    m_pool.run({}, std::chrono::milliseconds(0));
    return m_bytes.load(std::memory_order_relaxed);
  }

 private:
  // A subdirectory is opened by its own task, which holds its parent open until then: queued tasks hold no
  // descriptor of their own, so a directory of thousands of subdirectories does not open them all at once.
  void walk(const std::shared_ptr<Fd>& dir, const std::string& display) {
    auto entries = read_directory(dir->get(), display).value();
    sort_by_inode(entries);
    uint64_t bytes = 0;
    for (const DirEntry& entry : entries) {
      if (m_pool.cancelled() || m_stop.stop_requested()) {
        return;
      }
      struct stat st {};
      if (::fstatat(dir->get(), entry.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        throw Failure(system_message("stat " + in_quotes(join_path(display, entry.name)), errno));
      }
      if (S_ISDIR(st.st_mode)) {
        m_pool.submit([this, dir, name = entry.name, path = join_path(display, entry.name)]() {
          walk(std::make_shared<Fd>(open_directory(dir->get(), name.c_str(), path).value()), path);
        });
      } else if (S_ISREG(st.st_mode) && (st.st_nlink == 1 || first_name(st))) {
        bytes += static_cast<uint64_t>(st.st_size);
      }
    }
    m_bytes.fetch_add(bytes, std::memory_order_relaxed);
  }

  /// Hard-linked data counts once, as the transfer counts it.
  bool first_name(const struct stat& st) {
    std::lock_guard lock(m_mutex);
    return m_linked.emplace(st.st_dev, st.st_ino).second;
  }

  WorkPool& m_pool;
  const std::stop_token& m_stop;
  std::atomic<uint64_t> m_bytes{0};
  std::mutex m_mutex;
  std::set<std::pair<dev_t, ino_t>> m_linked;
};

}  // namespace

uint64_t tree_bytes(int dir, std::string_view display, WorkPool& pool, const std::stop_token& stop) {
  return TreeBytes(pool, stop).total(dir, display);
}

}  // namespace hoist::transfer
