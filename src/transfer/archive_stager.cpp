#include "archive_stager.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "archive_index.hpp"
#include "compression_check.hpp"
#include "hoist/sys/archive_reader.hpp"
#include "hoist/sys/directory.hpp"
#include "hoist/sys/sha256.hpp"
#include "hoist/transfer/entry_name.hpp"
#include "hoist/util/error.hpp"
#include "hoist/util/work_pool.hpp"
#include "staging_target.hpp"
#include "transfer_counters.hpp"
#include "transfer_support.hpp"
#include "tree_node.hpp"
#include "tree_order.hpp"
#include "write_behind.hpp"

namespace hoist::transfer {

namespace {

/// An entry of at most this size is read whole into memory when the old file's content index vouches for the
/// old file: hashing it decides without reading the old file. A bigger one is compared as it streams.
constexpr uint64_t k_small_entry = uint64_t{1} << 20U;

struct DirRecord {
  std::string relpath;
  NodeMeta meta;
  Xattrs xattrs;
  bool implicit = false;
};

class ArchiveStager {
 public:
  ArchiveStager(const Payload& payload, int staging_dir, int link_dest, const TransferOptions& options)
      : m_reader(ArchiveReader::open(payload.reopen(), payload.path().string()).value()),
        m_archive(payload.path().string()),
        m_index(m_archive),
        m_options(options),
        m_dry(options.dry_run == DryRun::yes),
        m_target(staging_dir, link_dest),
        m_counters(options),
        m_targets(m_target.staging(), m_target.staging_display()),
        m_link_targets(m_target.staging(), m_target.staging_display()),
        m_compares(m_target.compare(), m_target.compare_display()),
        m_compare_targets(m_target.compare(), m_target.compare_display()),
        m_pool(transfer_threads(options.threads)),
        m_produced(*options.produced),
        m_write_behind(
            m_pool, m_counters, [this](std::string_view relpath) { return m_target.staging_display(relpath); },
            m_produced) {}

  TransferStats run() {
    // The compression's own checks (with no SHA256SUMS they are the only integrity) run beside the staging, which
    // stays a .partial directory until their verdict. A damaged archive may make libarchive fail first: the
    // verdict names the check, so it wins over that error.
    CompressionCheck check(m_reader);
    TransferStats stats;
    try {
      stats = stage();
    } catch (const Error& e) {
      // An entry or a limit refused: the verdict would add nothing, and a bomb would take long to decode.
      if (e.code() != ExitCode::verification) {
        check.wait(m_archive);
      }
      throw;
    } catch (...) {
      check.wait(m_archive);
      throw;
    }
    check.wait(m_archive);
    return stats;
  }

 private:
  TransferStats stage() {
    if (!m_dry) {
      m_target.remove_default_acl();
    }
    if (m_pool.threads() > 1 && !m_dry) {
      // Reading the archive stays on one thread (libarchive streams); the other
      // finishes small files behind it: their writes, metadata and close.
      m_pool.submit([this]() { read_entries(); });
      m_pool.run([this]() { m_counters.poll(); }, Counters::k_interval);
    } else {
      read_entries();
    }
    if (!m_dry) {
      index_link_groups();
    }
    finish_directories();
    if (m_target.has_compare()) {
      count_removed(m_target.compare(), "", ArchiveIndex::k_root);
    }
    return m_counters.snapshot();
  }

  /// Every name of an inode the archive hard-links gets its digest (read back when a later name brought the
  /// data) and the stamp after the last link, which moved its ctime.
  void index_link_groups() {
    for (const auto& [target, group] : m_link_groups) {
      const auto [parent, name_view] = split_parent(target);
      const std::string name(name_view);
      const std::string display = m_target.staging_display(target);
      const int dir = m_targets.open(parent).value();
      std::optional<Sha256Digest> digest;
      if (group.rewritten) {
        const Fd fd(::openat(dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
        if (!fd) {
          throw Failure(system_message("open " + in_quotes(display), errno));
        }
        digest = sha256_of_file(fd.get(), display).value();
      } else if (const ContentIndex::Entry* entry = m_produced.find(parent, name)) {
        digest = entry->digest;
      }
      if (!digest) {
        continue;  // not a regular file
      }
      const ContentIndex::Entry entry{*digest, stamp_of(dir, name.c_str(), display), {}};
      m_produced.add(parent, name, entry);
      for (const std::string& member : group.names) {
        const auto [member_parent, member_name] = split_parent(member);
        m_produced.add(member_parent, member_name, entry);
      }
    }
  }

  void read_entries() {
    while (archive_entry* entry = next_entry()) {
      if (m_pool.cancelled()) {
        return;
      }
      stage_entry(entry);
      m_counters.poll();
    }
    m_write_behind.flush();
  }

  // The next entry, nullptr after the last; an entry whose name cannot be decoded is the payload's fault (exit 5).
  archive_entry* next_entry() {
    auto entry = m_reader.next();
    if (!entry && entry.error().errnum == EILSEQ) {
      throw Error(ExitCode::verification, entry.error().message);
    }
    return entry.value();
  }

  void stage_entry(archive_entry* entry) {
    const std::string_view raw = entry_path(entry);
    std::string path = normalize_entry_name(raw, m_archive);
    const NodeMeta meta = entry_meta(entry);
    if (auto problem = entry_acl_problem(entry)) {
      refuse_entry(raw, m_archive, *problem);
    }
    if (path.empty()) {
      if (meta.type() != S_IFDIR) {
        refuse_entry(raw, m_archive, "it names the payload root but is not a directory");
      }
      if (m_root_seen) {
        refuse_entry(raw, m_archive, "it appears twice in the archive");
      }
      m_root_seen = true;
      m_dirs.push_back(DirRecord{"", meta, entry_xattrs(entry)});
      return;
    }
    // Every check first, then the first write for this entry.
    const std::vector<std::string_view> missing = m_index.check_parents(path, raw);
    const std::string_view hardlink = entry_hardlink(entry);
    if (const std::optional<ArchiveIndex::Id> existing = m_index.find(path)) {
      // A directory first made for deeper entries may still be listed once; anything else twice is
      // refused: "later wins" would let an entry replace what earlier checks were made against.
      const EntryState existing_state = m_index.state(*existing);
      if (!(existing_state.implicit && meta.type() == S_IFDIR && hardlink.empty())) {
        refuse_entry(raw, m_archive, "it appears twice in the archive");
      }
      m_index.mark_listed(*existing);
      DirRecord& record = m_dirs[existing_state.dir_record];
      record.meta = meta;
      record.xattrs = entry_xattrs(entry);
      record.implicit = false;
      return;
    }
    std::string target;
    const std::optional<EntryState> target_state =
        hardlink.empty() ? std::nullopt : std::optional(m_index.check_link_target(raw, hardlink, target));
    make_implicit_directories(missing);
    if (target_state) {
      stage_hardlink(entry, std::move(path), target, *target_state, meta);
      return;
    }
    account_declared(meta.size);
    switch (meta.type()) {
      case S_IFDIR: make_directory(std::move(path), meta, entry_xattrs(entry), false); break;
      case S_IFREG: stage_regular(std::move(path), meta, entry_xattrs(entry), entry_nlink(entry)); break;
      case S_IFLNK:
      case S_IFCHR:
      case S_IFBLK:
      case S_IFIFO:
      case S_IFSOCK: stage_other(std::move(path), meta, entry_xattrs(entry), entry_symlink(entry)); break;
      default: refuse_entry(raw, m_archive, "it has an unknown file type");
    }
    finish_entry();
  }

  /// Makes the directories above an entry that the archive did not list (yet).
  void make_implicit_directories(const std::vector<std::string_view>& missing) {
    for (const std::string_view parent : missing) {
      NodeMeta meta;
      meta.mode = S_IFDIR | 0755;
      meta.uid = m_target.creator().uid;
      meta.gid = m_target.creator().gid;
      ::clock_gettime(CLOCK_REALTIME, &meta.mtime);
      make_directory(std::string(parent), meta, {}, true);
    }
  }

  void make_directory(std::string path, const NodeMeta& meta, Xattrs xattrs, bool implicit) {
    if (!m_dry) {
      const auto [parent, name] = split_parent(path);
      const int dirfd = m_targets.open(parent).value();
      // 0700 until the end: entries are made inside as root, and its own mode could forbid that to nobody else.
      if (::mkdirat(dirfd, std::string(name).c_str(), 0700) != 0) {
        throw Failure(system_message("create directory " + in_quotes(m_target.staging_display(path)), errno));
      }
    }
    EntryState state;
    state.type = S_IFDIR;
    state.implicit = implicit;
    state.dir_record = static_cast<uint32_t>(m_dirs.size());
    m_index.add(path, state);
    m_dirs.push_back(DirRecord{std::move(path), meta, std::move(xattrs), implicit});
  }

  void stage_regular(std::string path, const NodeMeta& meta, const Xattrs& xattrs, unsigned nlink) {
    const auto [parent, name_view] = split_parent(path);
    const std::string name(name_view);
    const int compare_dir = m_target.has_compare() ? m_compares.open_if_present(parent).value() : -1;
    const ExistingNode existing = stat_existing(compare_dir, name.c_str(), m_target.compare_display(path));
    EntryState state;
    state.type = S_IFREG;
    Outcome outcome = existing.present ? Outcome::changed : Outcome::added;
    if (existing.present && S_ISDIR(existing.st.st_mode)) {
      count_replaced(compare_dir, name, path);
    }
    // The first name of a cpio hard link has no data (the last one brings it): never link it from link_dest.
    const bool data_comes_later = nlink > 1 && meta.size == 0;
    ArchiveReader::Block pending;
    uint64_t equal_prefix = 0;
    Fd compare_fd;                       // the old file, when its equal start is copied from it
    std::optional<Sha256Digest> digest;  // of the entry's bytes, once the comparison knows it
    std::optional<std::string> data;     // a small entry's bytes, read whole to compare them by digest
    if (existing.present && S_ISREG(existing.st.st_mode) && !data_comes_later &&
        same_attributes(meta, NodeMeta::from_stat(existing.st))) {
      // Equal size and mtime say nothing of the bytes. Where the old file's content index vouches for it, a small
      // entry is hashed and compared with the index; any other is compared with the old file's bytes as it streams.
      std::optional<Sha256Digest> theirs;
      if (m_options.known != nullptr && m_options.compare != Compare::checksum && meta.size <= k_small_entry) {
        theirs = m_options.known->vouch(parent, name, existing.st);
      }
      if (!theirs || !xattrs_readable_by_name()) {
        compare_fd.reset(::openat(compare_dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
        if (!compare_fd) {
          throw Failure(system_message("open " + in_quotes(m_target.compare_display(path)), errno));
        }
      }
      if (same_xattrs(xattrs,
                      read_xattrs(NodeRef{compare_dir, name.c_str(), compare_fd.get()}, m_target.compare_display(path))
                          .value())) {
        if (theirs) {
          data = read_whole_entry(meta.size);
          digest = digest_of(*data);
          outcome = *digest == *theirs ? Outcome::unchanged : Outcome::changed;
        } else if (Sha256 sha; compare_stream(compare_fd.get(), meta.size, pending, equal_prefix, sha)) {
          outcome = Outcome::unchanged;
          digest = sha.final_digest();
        }
      }
    }
    state.outcome = outcome;
    m_counters.count(outcome, meta.size);
    if (m_dry) {
      m_index.add(path, state);
      return;
    }
    const int target_dir = m_targets.open(parent).value();
    // An unchanged file that cannot be linked is written: from what the comparison read (`data`), or from
    // link_dest's copy, as the comparison has read the entry's data (equal_prefix is then the whole file).
    if (outcome == Outcome::unchanged && m_target.link_unchanged(compare_dir, target_dir, name, path, existing.st)) {
      // The link moved the inode's ctime: its stamp is taken now, after it.
      m_produced.add(parent, name, {*digest, stamp_of(target_dir, name.c_str(), m_target.staging_display(path)), {}});
      m_index.add(path, state);
      return;
    }
    InitialMode initial;
    Fd fd = create_file(target_dir, name, meta, path, initial);
    state.owned = true;
    if (data) {
      write_data(fd.get(), *data, m_target.staging_display(path));
      apply_metadata(NodeRef{target_dir, name.c_str(), fd.get()}, meta, xattrs, ExistingXattrs::none,
                     m_target.staging_display(path), &initial)
          .value();
      index_written(fd.get(), parent, name, path, digest);
      m_index.add(path, state);
      return;
    }
    if (equal_prefix == 0 && pending.size == 0 && nlink <= 1 && write_behind(fd, meta, xattrs, initial, path)) {
      m_index.add(path, state);
      return;
    }
    if (equal_prefix > 0) {
      // What the comparison read matched link_dest: take it from there.
      if (::lseek(compare_fd.get(), 0, SEEK_SET) < 0) {
        throw Failure(system_message("rewind " + in_quotes(m_target.compare_display(path)), errno));
      }
      const uint64_t copied =
          m_copier
              .copy(compare_fd.get(), existing.st.st_dev, fd.get(), m_target.staging_dev(), equal_prefix,
                    m_target.compare_display(path), m_target.staging_display(path), {}, CopyExtent::part)
              .value();
      m_counters.count_written(copied);
    }
    write_stream(fd.get(), meta.size, pending, m_target.staging_display(path));
    apply_metadata(NodeRef{target_dir, name.c_str(), fd.get()}, meta, xattrs, ExistingXattrs::none,
                   m_target.staging_display(path), &initial)
        .value();
    index_written(fd.get(), parent, name, path, std::nullopt);
    m_index.add(path, state);
  }

  /// Records a file written here: `digest` when the bytes written were hashed on their way, else the digest of
  /// what the file holds, read back (its pages are still in the page cache). Stamped once its metadata is set.
  void index_written(int fd, std::string_view parent, std::string_view name, const std::string& path,
                     std::optional<Sha256Digest> digest) {
    const std::string display = m_target.staging_display(path);
    if (!digest) {
      digest = sha256_of_file(fd, display).value();
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      throw Failure(system_message("stat " + in_quotes(display), errno));
    }
    m_produced.add(parent, name, {*digest, FileStamp::of(st), {}});
  }

  /// The whole data of the current entry, holes as zeros: a small one, `size` as the header declares it.
  std::string read_whole_entry(uint64_t size) {
    std::string buffer(size, '\0');
    for (;;) {
      const ArchiveReader::Block block = read_block();
      if (block.size == 0) {
        return buffer;
      }
      const uint64_t end = static_cast<uint64_t>(block.offset) + block.size;
      account_data(end);
      // A zip entry may bring more than it declared.
      if (end > buffer.size()) {
        buffer.resize(end);
      }
      std::memcpy(buffer.data() + block.offset, block.data, block.size);
    }
  }

  static Sha256Digest digest_of(std::string_view bytes) {
    thread_local Sha256 sha;
    sha.update(bytes);
    return sha.final_digest();
  }

  static void write_data(int fd, std::string_view data, const std::string& display) {
    for (size_t done = 0; done < data.size();) {
      const ssize_t n = ::pwrite(fd, data.data() + done, data.size() - done, static_cast<off_t>(done));
      if (n < 0) {
        if (errno == EINTR) {
          continue;
        }
        throw Failure(system_message("write " + in_quotes(display), errno));
      }
      done += static_cast<size_t>(n);
    }
  }

  /// Hands a small new file to another thread; false when it takes no more now.
  bool write_behind(Fd& fd, const NodeMeta& meta, const Xattrs& xattrs, const InitialMode& initial,
                    const std::string& path) {
    if (!m_write_behind.accepts(meta.size)) {
      return false;
    }
    m_write_behind.add(std::move(fd), meta, xattrs, initial, path, [&](std::string& buffer, size_t start) {
      buffer.resize(start + meta.size);
      for (;;) {
        const ArchiveReader::Block block = read_block();
        if (block.size == 0) {
          return;
        }
        const uint64_t end = static_cast<uint64_t>(block.offset) + block.size;
        account_data(end);
        // A zip entry may bring more than it declared.
        if (start + end > buffer.size()) {
          buffer.resize(start + end);
        }
        std::memcpy(buffer.data() + start + block.offset, block.data, block.size);
      }
    });
    return true;
  }

  /// A new regular file for an entry, made (by us, in a directory of ours) with
  /// its final permission bits where the umask lets it; `initial` says what it got.
  /// Open for reading too: what was written may be read back for its digest.
  Fd create_file(int dirfd, const std::string& name, const NodeMeta& meta, const std::string& path,
                 InitialMode& initial) const {
    initial = m_target.new_file_mode(meta.mode);
    Fd fd(::openat(dirfd, name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, initial.perms));
    if (!fd) {
      throw Failure(system_message("create " + in_quotes(m_target.staging_display(path)), errno));
    }
    return fd;
  }

  /// Reads the entry's data and compares it with `compare_fd`, adding what is
  /// equal to `sha`. On the first difference, returns false with the block in
  /// hand in `pending` and the length of the equal start in `equal_prefix`.
  bool compare_stream(int compare_fd, uint64_t size, ArchiveReader::Block& pending, uint64_t& equal_prefix,
                      Sha256& sha) {
    std::vector<char> buffer;
    for (;;) {
      const ArchiveReader::Block block = read_block();
      if (block.size == 0) {
        return equal_prefix == size;
      }
      account_data(static_cast<uint64_t>(block.offset) + block.size);
      // A hole (sparse entry) is not compared: the file is written instead.
      if (static_cast<uint64_t>(block.offset) != equal_prefix) {
        pending = block;
        return false;
      }
      buffer.resize(block.size);
      const ssize_t n = ::pread(compare_fd, buffer.data(), block.size, block.offset);
      if (n != static_cast<ssize_t>(block.size) || std::memcmp(buffer.data(), block.data, block.size) != 0) {
        pending = block;
        return false;
      }
      sha.update(std::as_bytes(std::span(static_cast<const char*>(block.data), block.size)));
      equal_prefix += block.size;
    }
  }

  /// Writes the rest of the entry's data (first `pending`, if any) at the
  /// blocks' offsets, so that holes of sparse entries stay holes.
  void write_stream(int fd, uint64_t size, const ArchiveReader::Block& pending, const std::string& display) {
    uint64_t end = 0;
    ArchiveReader::Block block = pending;
    for (bool have = pending.size > 0;; have = false) {
      if (!have) {
        block = read_block();
        if (block.size == 0) {
          break;
        }
        account_data(static_cast<uint64_t>(block.offset) + block.size);
      }
      const char* data = static_cast<const char*>(block.data);
      size_t left = block.size;
      off_t offset = block.offset;
      while (left > 0) {
        const ssize_t n = ::pwrite(fd, data, left, offset);
        if (n < 0) {
          if (errno == EINTR) {
            continue;
          }
          throw Failure(system_message("write " + in_quotes(display), errno));
        }
        data += n;
        left -= static_cast<size_t>(n);
        offset += n;
      }
      m_counters.count_written(block.size);
      end = std::max(end, static_cast<uint64_t>(block.offset) + block.size);
      m_counters.poll();
    }
    if (end < size && ::ftruncate(fd, static_cast<off_t>(size)) != 0) {
      throw Failure(system_message("write " + in_quotes(display), errno));
    }
  }

  /// A hard link entry: another name for an inode of this archive.
  void stage_hardlink(archive_entry* entry, std::string path, const std::string& target, const EntryState target_state,
                      const NodeMeta& meta) {
    const auto [parent, name_view] = split_parent(path);
    const std::string name(name_view);
    const int compare_dir = m_target.has_compare() ? m_compares.open_if_present(parent).value() : -1;
    const ExistingNode existing = stat_existing(compare_dir, name.c_str(), m_target.compare_display(path));
    EntryState state = target_state;
    state.owned = false;
    Outcome outcome = Outcome::added;
    if (existing.present) {
      outcome = target_state.outcome == Outcome::unchanged && same_compare_inode(target, existing.st)
                    ? Outcome::unchanged
                    : Outcome::changed;
      if (S_ISDIR(existing.st.st_mode)) {
        count_replaced(compare_dir, name, path);
      }
    }
    // cpio (newc) puts a hard-linked file's data on its last name, which libarchive reports as a link with data.
    const bool with_data = target_state.type == S_IFREG && meta.type() == S_IFREG && meta.size > 0;
    if (with_data) {
      account_declared(meta.size);
    }
    state.outcome = outcome;
    m_counters.count(outcome, with_data ? meta.size : 0);
    if (!m_dry) {
      const auto [target_parent, target_name] = split_parent(target);
      const int target_dir = m_link_targets.open(target_parent).value();
      const int dirfd = m_targets.open(parent).value();
      if (with_data && !target_state.owned) {
        // The target is link_dest's inode, which must never be written: this name gets an inode of its own.
        state.owned = true;
        InitialMode initial;
        Fd fd = create_file(dirfd, name, meta, path, initial);
        write_stream(fd.get(), meta.size, {}, m_target.staging_display(path));
        apply_metadata(NodeRef{dirfd, name.c_str(), fd.get()}, meta, entry_xattrs(entry), ExistingXattrs::none,
                       m_target.staging_display(path), &initial)
            .value();
        index_written(fd.get(), parent, name, path, std::nullopt);
      } else {
        if (::linkat(target_dir, std::string(target_name).c_str(), dirfd, name.c_str(), 0) != 0) {
          throw Failure(system_message("link " + in_quotes(m_target.staging_display(target)) + " to " +
                                           in_quotes(m_target.staging_display(path)),
                                       errno));
        }
        LinkGroup& group = m_link_groups[target];
        group.names.push_back(path);
        group.rewritten = group.rewritten || with_data;
        if (with_data) {
          // The target's first data may still be on its way through another thread.
          m_write_behind.wait();
          Fd fd(::openat(dirfd, name.c_str(), O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC));
          if (!fd) {
            throw Failure(system_message("open " + in_quotes(m_target.staging_display(path)), errno));
          }
          write_stream(fd.get(), meta.size, {}, m_target.staging_display(path));
          apply_metadata(NodeRef{dirfd, name.c_str(), fd.get()}, meta, entry_xattrs(entry), ExistingXattrs::none,
                         m_target.staging_display(path))
              .value();
        }
      }
    }
    m_index.add(path, state);
    finish_entry();
  }

  /// Symlinks, devices, fifos and sockets.
  void stage_other(std::string path, const NodeMeta& meta, Xattrs xattrs, std::string_view symlink) {
    const auto [parent, name_view] = split_parent(path);
    const std::string name(name_view);
    SourceNode source;
    source.meta = meta;
    source.xattrs = std::move(xattrs);
    source.symlink = symlink;
    const int compare_dir = m_target.has_compare() ? m_compares.open_if_present(parent).value() : -1;
    const ExistingNode existing = stat_existing(compare_dir, name.c_str(), m_target.compare_display(path));
    EntryState state;
    state.type = meta.type();
    state.outcome = compare_node(source, existing, compare_dir, EntryPath{parent, name}, m_options, m_archive,
                                 m_target.compare_display(path))
                        .outcome;
    if (existing.present && S_ISDIR(existing.st.st_mode)) {
      count_replaced(compare_dir, name, path);
    }
    m_counters.count(state.outcome, 0);
    if (!m_dry) {
      const int dirfd = m_targets.open(parent).value();
      write_node(source, m_target.write_target(dirfd, name.c_str()), m_copier, m_archive,
                 m_target.staging_display(path));
    }
    m_index.add(path, state);
  }

  /// Whether link_dest has, at the path of an earlier entry `target`, the inode `st`.
  bool same_compare_inode(const std::string& target, const struct stat& st) {
    const auto [parent, name] = split_parent(target);
    const int compare_dir = m_compare_targets.open_if_present(parent).value();
    const ExistingNode existing =
        stat_existing(compare_dir, std::string(name).c_str(), m_target.compare_display(target));
    return existing.present && existing.st.st_dev == st.st_dev && existing.st.st_ino == st.st_ino;
  }

  /// link_dest's directory `name` that an entry of another type replaces: everything under it is removed.
  void count_replaced(int compare_dir, const std::string& name, const std::string& relpath) {
    transfer::count_replaced(m_counters, compare_dir, name, m_target.compare_display(relpath));
  }

  /// Directories are counted, and get their modes and times, once everything
  /// inside them exists (each entry made in a directory changes its mtime).
  void finish_directories() {
    sort_deepest_first(m_dirs, [](const DirRecord& record) -> std::string_view { return record.relpath; });
    for (const DirRecord& record : m_dirs) {
      if (!record.relpath.empty()) {
        count_directory(record);
      }
      if (!m_dry) {
        const int fd = m_targets.open(record.relpath).value();
        const ExistingXattrs existing = record.relpath.empty() ? ExistingXattrs::reconcile : ExistingXattrs::none;
        apply_metadata(NodeRef{-1, nullptr, fd}, record.meta, record.xattrs, existing,
                       m_target.staging_display(record.relpath))
            .value();
      }
      m_counters.poll();
    }
  }

  void count_directory(const DirRecord& record) {
    const auto [parent, name_view] = split_parent(record.relpath);
    const std::string name(name_view);
    const int compare_dir = m_target.has_compare() ? m_compares.open_if_present(parent).value() : -1;
    const ExistingNode existing = stat_existing(compare_dir, name.c_str(), m_target.compare_display(record.relpath));
    Outcome outcome = Outcome::added;
    if (existing.present && !S_ISDIR(existing.st.st_mode)) {
      outcome = Outcome::changed;
    } else if (existing.present && record.implicit) {
      // An unlisted directory has no metadata of its own to compare.
      outcome = Outcome::unchanged;
    } else if (existing.present) {
      SourceNode source;
      source.meta = record.meta;
      source.xattrs = record.xattrs;
      outcome = compare_node(source, existing, compare_dir, EntryPath{parent, name}, m_options, m_archive,
                             m_target.compare_display(record.relpath))
                    .outcome;
    }
    m_counters.count(outcome, 0);
  }

  /// Counts what link_dest has and the archive does not.
  void count_removed(int compare_dir, const std::string& relpath, ArchiveIndex::Id dir_id) {
    for (const DirEntry& entry : read_directory(compare_dir, m_target.compare_display(relpath)).value()) {
      const std::string path = join_path(relpath, entry.name);
      const std::optional<ArchiveIndex::Id> id = m_index.find_child(dir_id, entry.name);
      if (!id) {
        uint64_t files = 0;
        uint64_t bytes = 0;
        count_tree(compare_dir, entry.name.c_str(), files, bytes, m_target.compare_display(path));
        m_counters.count_removed(files, bytes);
      } else if (m_index.state(*id).type == S_IFDIR) {
        Fd dir(::openat(compare_dir, entry.name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (dir) {
          count_removed(dir.get(), path, *id);
        }
      }
    }
  }

  void finish_entry() {
    m_unpacked_done += m_entry_unpacked;
    m_entry_unpacked = 0;
  }

  /// The next block of the entry's data; exit 5 when it does not pass the format's check.
  ArchiveReader::Block read_block() {
    Expected<ArchiveReader::Block> block = m_reader.read_block();
    if (!block && block.error().errnum == EBADMSG) {
      throw Error(ExitCode::verification, "refusing archive " + in_quotes(m_archive) + ": " + block.error().message);
    }
    return std::move(block).value();
  }

  void account_declared(uint64_t size) {
    m_entry_unpacked = size;
    check_limits();
  }

  void account_data(uint64_t end) {
    m_entry_unpacked = std::max(m_entry_unpacked, end);
    check_limits();
  }

  void check_limits() const {
    const uint64_t total = m_unpacked_done + m_entry_unpacked;
    if (m_options.max_unpacked_bytes > 0 && total > m_options.max_unpacked_bytes) {
      throw Error(ExitCode::verification, "refusing archive " + in_quotes(m_archive) + ": it unpacks to more than " +
                                              std::to_string(m_options.max_unpacked_bytes) + " bytes");
    }
    if (m_options.max_unpack_ratio > 0 && total > TransferOptions::k_unpack_ratio_floor &&
        static_cast<double>(total) > m_options.max_unpack_ratio * static_cast<double>(m_reader.file_size())) {
      throw Error(ExitCode::verification, "refusing archive " + in_quotes(m_archive) + ": it unpacks to more than " +
                                              std::to_string(static_cast<uint64_t>(m_options.max_unpack_ratio)) +
                                              " times its size of " + std::to_string(m_reader.file_size()) +
                                              " bytes (a decompression bomb?)");
    }
  }

  ArchiveReader m_reader;
  std::string m_archive;
  ArchiveIndex m_index;
  const TransferOptions& m_options;
  const bool m_dry;
  StagingTarget m_target;
  Counters m_counters;
  DataCopier m_copier;
  DirCursor m_targets;
  DirCursor m_link_targets;
  DirCursor m_compares;
  DirCursor m_compare_targets;  ///< link_dest's directories of hard links' targets
  WorkPool m_pool;
  ContentIndex& m_produced;
  /// Hard links of the archive: the entry each links to → the names linking to it, and whether a name brought
  /// the inode's data (cpio) after the target was recorded.
  struct LinkGroup {
    std::vector<std::string> names;
    bool rewritten = false;
  };
  std::map<std::string, LinkGroup> m_link_groups;
  WriteBehind m_write_behind;
  bool m_root_seen = false;
  std::vector<DirRecord> m_dirs;
  uint64_t m_unpacked_done = 0;
  uint64_t m_entry_unpacked = 0;
};

}  // namespace

TransferStats stage_archive(const Payload& payload, int staging_dir, int link_dest, const TransferOptions& options) {
  return ArchiveStager(payload, staging_dir, link_dest, options).run();
}

}  // namespace hoist::transfer
