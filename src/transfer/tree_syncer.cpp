// sync_tree(): rsync -aHAX --delete of a payload directory into a live
// destination, one atomic rename per changed entry, with a backup of
// everything replaced or deleted (sync_backup.hpp).

#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "hoist/sys/atomic_file.hpp"
#include "hoist/sys/directory.hpp"
#include "hoist/sys/temporary_name.hpp"
#include "hoist/transfer/transfer.hpp"
#include "hoist/util/error.hpp"
#include "hoist/util/work_pool.hpp"
#include "payload_walk.hpp"
#include "read_ahead.hpp"
#include "sync_backup.hpp"
#include "transfer_counters.hpp"
#include "transfer_support.hpp"
#include "tree_node.hpp"
#include "tree_order.hpp"

namespace hoist {

namespace transfer {

namespace {

/// The two directories at one relative path (non-owning).
struct DirFds {
  int source = -1;
  int dest = -1;  ///< -1 in a dry run where the destination has no directory yet
  std::string_view relpath;
  bool fresh = false;  ///< made by this sync: nothing in it to keep or record
};

struct DirNode {
  std::string relpath;
  Fd source;
  Fd dest;
  bool fresh = false;
  [[nodiscard]] DirFds fds() const { return DirFds{source.get(), dest.get(), relpath, fresh}; }
};

class TreeSyncer : PayloadWalk {
 public:
  TreeSyncer(const Payload& payload, int dest_dir, int backup_dir, const TransferOptions& options)
      : PayloadWalk(payload, options), m_dest_display(fd_display(dest_dir)), m_produced(*options.produced) {
    if (payload.type() != PayloadType::directory) {
      throw UsageError("cannot sync " + in_quotes(payload.path().string()) +
                       " in place: the sync kind takes a directory");
    }
    m_dest = reopen_directory(dest_dir, m_dest_display).value();
    struct stat st {};
    if (::fstat(m_dest.get(), &st) != 0) {
      throw Failure(system_message("stat " + in_quotes(m_dest_display), errno));
    }
    m_dest_dev = st.st_dev;
    if (!m_dry) {
      if (backup_dir < 0) {
        throw Failure("failed to sync into " + in_quotes(m_dest_display) + ": no backup directory given");
      }
      m_journal.emplace(backup_dir, fd_display(backup_dir));
    }
  }

  TransferStats run() {
    auto root = std::make_shared<DirNode>();
    root->source = open_payload_root(m_payload);
    root->dest = reopen_directory(m_dest.get(), m_dest_display).value();
    DirRecord record{"", read_dir_meta(root->source.get(), payload_display(""), &m_source_dev), false};
    if (differs_from_dest(record, root->dest.get()) && !m_dry) {
      m_journal->before_change("", root->dest.get());
    }
    m_dirs.push_back(std::move(record));
    walk(root->source.get(), [this, root]() mutable { sync_entries(std::move(root)); });
    sync_hard_links();
    if (!m_dry) {
      // rsync --delete-after: the new entries exist before the old ones go.
      delete_extras();
      apply_directory_metadata();
    }
    return m_counters.snapshot();
  }

 private:
  struct DirRecord {
    std::string relpath;
    DirMeta dir;
    bool made = false;  ///< made (or replaced) by this sync
  };
  struct Deletion {
    std::string parent;
    std::string name;
  };

  [[nodiscard]] std::string dest_display(std::string_view relpath) const {
    return relpath.empty() ? m_dest_display : m_dest_display + "/" + std::string(relpath);
  }

  bool differs_from_dest(const DirRecord& record, int dest_dir) {
    struct stat st {};
    if (::fstat(dest_dir, &st) != 0) {
      throw Failure(system_message("stat " + in_quotes(dest_display(record.relpath)), errno));
    }
    return !same_attributes(record.dir.meta, NodeMeta::from_stat(st)) ||
           !same_xattrs(record.dir.xattrs,
                        read_xattrs(NodeRef{-1, nullptr, dest_dir}, dest_display(record.relpath)).value());
  }

  void before_change(const DirFds& fds) {
    if (!fds.fresh) {
      m_journal->before_change(fds.relpath, fds.dest);
    }
  }

  /// Directory `name` of `parent`, which the destination has (or now has) as a directory.
  void sync_directory(std::shared_ptr<DirNode> parent, const std::string& name, bool fresh, Outcome outcome,
                      bool made) {
    auto node = std::make_shared<DirNode>();
    node->relpath = join_path(parent->relpath, name);
    node->fresh = fresh;
    node->source = open_directory(parent->source.get(), name.c_str(), payload_display(node->relpath)).value();
    if (!m_dry || !made) {
      node->dest = open_directory(parent->dest.get(), name.c_str(), dest_display(node->relpath)).value();
    }
    parent.reset();
    DirRecord record{node->relpath, read_dir_meta(node->source.get(), payload_display(node->relpath)), made};
    if (!made) {
      outcome = differs_from_dest(record, node->dest.get()) ? Outcome::changed : Outcome::unchanged;
      if (outcome == Outcome::changed && !m_dry) {
        before_change(node->fds());
      }
    }
    m_counters.count(outcome, 0);
    {
      std::lock_guard lock(m_mutex);
      m_dirs.push_back(std::move(record));
    }
    sync_entries(std::move(node));
  }

  void sync_entries(std::shared_ptr<DirNode> node) {
    const DirFds fds = node->fds();
    const std::string display = payload_display(fds.relpath);
    auto entries = read_directory(fds.source, display).value();
    sort_by_inode(entries);
    std::unordered_set<std::string_view> names;
    names.reserve(entries.size());
    for (const DirEntry& entry : entries) {
      names.insert(entry.name);
    }
    if (fds.dest >= 0 && !fds.fresh) {
      find_extras(fds, names);
    }
    const auto reading = [this] { return payload_reading(m_dry, m_copier, m_source_dev, m_dest_dev, m_options); };
    walk_entries(fds.source, fds.fresh ? -1 : fds.dest, entries, display, reading,
                 RecordedSources{fds.fresh ? nullptr : recorded_sources(m_options), fds.relpath}, m_pool,
                 [&](const std::string& name, const struct stat& st, ReadAhead::Seen* seen) {
                   sync_walked(node, name, st, seen);
                 });
  }

  /// One entry of the walk of `node`: a directory is prepared and walked by a
  /// task of its own, a hard-linked name set aside, a big file synced by a task of its own.
  void sync_walked(const std::shared_ptr<DirNode>& node, const std::string& name, const struct stat& st,
                   ReadAhead::Seen* seen) {
    const DirFds fds = node->fds();
    // A directory this sync made is empty but for what the walk put there.
    const std::optional<ExistingNode> existing = fds.fresh ? ExistingNode{} : existing_seen(seen);
    if (S_ISDIR(st.st_mode)) {
      prepare_directory(node, name);
    } else if (st.st_nlink > 1) {
      set_aside_link(fds.relpath, name, st, fds.fresh);
    } else if (own_task(st)) {
      m_pool.submit([this, node, name, st, existing]() { sync_entry(node->fds(), name, st, existing); });
    } else {
      sync_entry(fds, name, st, existing, take_source(seen));
    }
    m_counters.poll();
  }

  /// Lists what the payload does not have. A name with hoist's temporary prefix is the host's like any other
  /// (a killed sync's temporaries are gone with its restore): only this sync's own are skipped.
  void find_extras(const DirFds& fds, const std::unordered_set<std::string_view>& names) {
    for (const DirEntry& entry : read_directory(fds.dest, dest_display(fds.relpath)).value()) {
      const std::string relpath = join_path(fds.relpath, entry.name);
      if (names.count(entry.name) > 0 || (m_journal && is_temporary_name(entry.name, m_journal->tag()))) {
        continue;
      }
      struct stat st {};
      if (::fstatat(fds.dest, entry.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        throw Failure(system_message("stat " + in_quotes(dest_display(relpath)), errno));
      }
      if (m_journal && st.st_dev == m_journal->dev() && st.st_ino == m_journal->ino()) {
        continue;  // the backup directory itself, if the caller put it inside the destination
      }
      uint64_t files = 0;
      uint64_t bytes = 0;
      count_tree(fds.dest, entry.name.c_str(), files, bytes, dest_display(relpath));
      m_counters.count_removed(files, bytes);
      std::lock_guard lock(m_mutex);
      m_deletions.push_back(Deletion{std::string(fds.relpath), entry.name});
    }
  }

  /// Makes sure the destination has directory `name` (made or put in place of
  /// another type) and queues its walk.
  void prepare_directory(const std::shared_ptr<DirNode>& node, const std::string& name) {
    const DirFds fds = node->fds();
    const std::string relpath = join_path(fds.relpath, name);
    const ExistingNode existing = stat_existing(fds.dest, name.c_str(), dest_display(relpath));
    bool fresh = fds.fresh;
    bool made = false;
    Outcome outcome = Outcome::unchanged;
    if (!existing.present) {
      outcome = Outcome::added;
      fresh = made = true;
      if (!m_dry) {
        before_change(fds);
        if (!fds.fresh) {
          m_journal->added(relpath);
        }
        if (::mkdirat(fds.dest, name.c_str(), 0700) != 0) {
          throw Failure(system_message("create directory " + in_quotes(dest_display(relpath)), errno));
        }
      }
    } else if (!S_ISDIR(existing.st.st_mode)) {
      outcome = Outcome::changed;
      fresh = made = true;
      if (!m_dry) {
        before_change(fds);
        const std::string temp = temporary_name(name, m_journal->tag());
        if (::mkdirat(fds.dest, temp.c_str(), 0700) != 0) {
          throw Failure(system_message("create directory " + in_quotes(dest_display(relpath)), errno));
        }
        install(fds, name, temp, existing, relpath);
      }
    }
    // An init-capture: a plain capture of the const reference `node` would be a const copy, copied again by std::move.
    m_pool.submit([this, dir = node, name, fresh, outcome, made]() mutable {
      sync_directory(std::move(dir), name, fresh, outcome, made);
    });
  }

  /// One entry that is not a directory; returns how it compared. `seen` is the
  /// destination's entry when the walk already knows it.
  Outcome sync_entry(const DirFds& fds, const std::string& name, const struct stat& st,
                     const std::optional<ExistingNode>& seen = std::nullopt, Fd opened = Fd()) {
    const std::string relpath = join_path(fds.relpath, name);
    const std::string source_display = payload_display(relpath);
    SourceNode source = read_source(fds.source, name.c_str(), st, source_display, std::move(opened));
    const ExistingNode existing = seen ? *seen : stat_existing(fds.dest, name.c_str(), dest_display(relpath));
    const Compared compared = compare_node(source, existing, fds.dest, EntryPath{fds.relpath, name}, m_options,
                                           source_display, dest_display(relpath));
    const Outcome outcome = compared.outcome;
    if (existing.present && S_ISDIR(existing.st.st_mode)) {
      count_replaced(fds.dest, name, relpath);
    }
    const uint64_t bytes = source.meta.size;
    const bool regular = S_ISREG(st.st_mode);
    if (outcome == Outcome::unchanged || m_dry) {
      if (!m_dry && regular) {
        // Stamped as it was before its bytes were read: a write by the host since moved its ctime.
        m_produced.add(fds.relpath, name, {*compared.digest, FileStamp::of(existing.st), compared.source});
      }
      m_counters.count(outcome, bytes);
      return outcome;
    }
    before_change(fds);
    const std::string temp = temporary_name(name, m_journal->tag());
    uint64_t reported = 0;
    const CopyProgress progress = [this, &reported](uint64_t done) {
      m_counters.add_done(done - reported);
      reported = done;
      m_counters.poll();
    };
    // A new file in a directory with a default ACL (or under an LSM) gets xattrs of its own: reconcile.
    ContentIndex::Entry entry;
    const uint64_t written = write_node(
        source,
        WriteTarget{fds.dest, temp.c_str(), m_dest_dev, ExistingXattrs::reconcile, NewOwner::unknown, m_creator},
        m_copier, source_display, dest_display(relpath), progress, regular ? &entry : nullptr);
    m_counters.count_written(written);
    install(fds, name, temp, existing, relpath);
    if (regular) {
      entry.source = recordable_source(source, m_options);
      index_installed(fds.dest, fds.relpath, name, entry);
    }
    m_counters.count(outcome, bytes, reported);
    return outcome;
  }

  /// Puts the finished `temp` at `name`, keeping what was there: one atomic
  /// rename over a non-directory; a directory swapped out with RENAME_EXCHANGE.
  void install(const DirFds& fds, const std::string& name, const std::string& temp, const ExistingNode& existing,
               const std::string& relpath) {
    const bool old_is_dir = existing.present && S_ISDIR(existing.st.st_mode);
    const bool new_is_dir = [&] {
      struct stat st {};
      return ::fstatat(fds.dest, temp.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
    }();
    if (!existing.present) {
      if (!fds.fresh) {
        m_journal->added(relpath);
      }
    } else if (old_is_dir) {
      // A directory cannot be hard-linked: it moves into the backup, and `name` is missing until the rename below.
      m_journal->keep_by_rename(fds.dest, name, relpath);
    } else if (!fds.fresh) {
      m_journal->keep_by_link(fds.dest, name, relpath);
    }
    if (existing.present && !old_is_dir && new_is_dir) {
      // rename(2) cannot put a directory over a file; exchanging them keeps `name` present throughout.
      if (::renameat2(fds.dest, temp.c_str(), fds.dest, name.c_str(), RENAME_EXCHANGE) == 0) {
        if (::unlinkat(fds.dest, temp.c_str(), 0) != 0) {
          throw Failure(system_message("remove the old " + in_quotes(dest_display(relpath)), errno));
        }
        return;
      }
      if (errno != EINVAL && errno != ENOSYS) {
        throw Failure(system_message("exchange " + in_quotes(dest_display(join_path(fds.relpath, temp))) + " and " +
                                         in_quotes(dest_display(relpath)),
                                     errno));
      }
      if (::unlinkat(fds.dest, name.c_str(), 0) != 0) {
        throw Failure(system_message("remove the old " + in_quotes(dest_display(relpath)), errno));
      }
    }
    if (::renameat(fds.dest, temp.c_str(), fds.dest, name.c_str()) != 0) {
      throw Failure(system_message(
          "rename " + in_quotes(dest_display(join_path(fds.relpath, temp))) + " to " + in_quotes(dest_display(relpath)),
          errno));
    }
  }

  /// Records a file this sync wrote and renamed into place. The rename moved its ctime, so it is stamped after
  /// it; should the name hold another inode by then (the host replaced it), it goes unrecorded and the next
  /// sync reads it.
  void index_installed(int dest_dir, std::string_view dir, const std::string& name, ContentIndex::Entry entry) {
    const FileStamp now = stamp_of(dest_dir, name.c_str(), dest_display(join_path(dir, name)));
    if (now.ino == entry.stamp.ino) {
      entry.stamp = now;
      m_produced.add(dir, name, entry);
    }
  }

  void count_replaced(int dest_dir, const std::string& name, const std::string& relpath) {
    transfer::count_replaced(m_counters, dest_dir, name, dest_display(relpath));
  }

  /// Each payload inode with several names: the first name is synced as any
  /// file; the others become links to it where they are not already.
  void sync_hard_links() {
    const Fd payload_root = open_payload_root(m_payload);
    DirCursor sources(payload_root.get(), m_payload.path().string());
    DirCursor dests(m_dest.get(), m_dest_display);
    for_each_link_group(m_links, [&](size_t first, size_t end) { sync_link_group(first, end, sources, dests); });
  }

  void sync_link_group(size_t first, size_t end, DirCursor& sources, DirCursor& dests) {
    const LinkMember& lead = m_links[first];
    const std::string lead_path = join_path(lead.parent, lead.name);
    DirFds fds{sources.open(lead.parent).value(), dests.open_if_present(lead.parent).value(), lead.parent, lead.fresh};
    const Outcome lead_outcome = sync_entry(fds, lead.name, lead.st);
    // After sync_entry the lead's name holds the payload's inode (in a dry run, the old one).
    const ExistingNode lead_now = stat_existing(fds.dest, lead.name.c_str(), dest_display(lead_path));
    Fd lead_dir;
    if (!m_dry) {
      lead_dir = reopen_directory(fds.dest, dest_display(lead.parent)).value();
    }
    for (size_t i = first + 1; i < end; ++i) {
      const LinkMember& member = m_links[i];
      const std::string relpath = join_path(member.parent, member.name);
      DirFds member_fds{-1, dests.open_if_present(member.parent).value(), member.parent, member.fresh};
      const ExistingNode existing = stat_existing(member_fds.dest, member.name.c_str(), dest_display(relpath));
      const bool same_inode = existing.present && lead_now.present && existing.st.st_dev == lead_now.st.st_dev &&
                              existing.st.st_ino == lead_now.st.st_ino;
      Outcome outcome = existing.present ? Outcome::changed : Outcome::added;
      if (same_inode && (lead_outcome == Outcome::unchanged || !m_dry)) {
        outcome = Outcome::unchanged;
      }
      if (existing.present && S_ISDIR(existing.st.st_mode)) {
        count_replaced(member_fds.dest, member.name, relpath);
      }
      m_counters.count(outcome, 0);
      if (outcome == Outcome::unchanged || m_dry) {
        continue;
      }
      before_change(member_fds);
      const std::string temp = temporary_name(member.name, m_journal->tag());
      if (::linkat(lead_dir.get(), lead.name.c_str(), member_fds.dest, temp.c_str(), 0) != 0) {
        throw Failure(system_message(
            "link " + in_quotes(dest_display(lead_path)) + " to " + in_quotes(dest_display(relpath)), errno));
      }
      install(member_fds, member.name, temp, existing, relpath);
      m_counters.poll();
    }
    if (!m_dry) {
      index_link_group(first, end, lead_dir.get(), dests);
    }
  }

  /// The names of one synced inode get the lead's digest and the stamp after the last link, which moved its
  /// ctime; a name that holds another inode by then goes unrecorded.
  void index_link_group(size_t first, size_t end, int lead_dir, DirCursor& dests) {
    const LinkMember& lead = m_links[first];
    const ContentIndex::Entry* lead_entry = m_produced.find(lead.parent, lead.name);
    if (lead_entry == nullptr) {
      return;  // not a regular file, or the host replaced it
    }
    const ContentIndex::Entry entry{
        lead_entry->digest, stamp_of(lead_dir, lead.name.c_str(), dest_display(join_path(lead.parent, lead.name))),
        lead_entry->source};
    for (size_t i = first; i < end; ++i) {
      const LinkMember& member = m_links[i];
      const int dir = dests.open_if_present(member.parent).value();
      if (dir >= 0 &&
          stamp_of(dir, member.name.c_str(), dest_display(join_path(member.parent, member.name))) == entry.stamp) {
        m_produced.add(member.parent, member.name, entry);
      }
    }
  }

  void delete_extras() {
    sort_deepest_first(m_deletions, [](const Deletion& d) { return join_path(d.parent, d.name); });
    DirCursor dests(m_dest.get(), m_dest_display);
    for (const Deletion& deletion : m_deletions) {
      const int dir = dests.open_if_present(deletion.parent).value();
      if (dir < 0) {
        continue;
      }
      m_journal->before_change(deletion.parent, dir);
      m_journal->keep_by_rename(dir, deletion.name, join_path(deletion.parent, deletion.name));
      m_counters.poll();
    }
  }

  void apply_directory_metadata() {
    sort_deepest_first(m_dirs, [](const DirRecord& record) -> std::string_view { return record.relpath; });
    DirCursor dests(m_dest.get(), m_dest_display);
    for (const DirRecord& record : m_dirs) {
      if (!record.made && !m_journal->changed(record.relpath)) {
        continue;
      }
      const int fd = dests.open(record.relpath).value();
      apply_metadata(NodeRef{-1, nullptr, fd}, record.dir.meta, record.dir.xattrs, ExistingXattrs::reconcile,
                     dest_display(record.relpath))
          .value();
      m_counters.poll();
    }
  }

  std::string m_dest_display;
  ContentIndex& m_produced;
  Fd m_dest;
  dev_t m_dest_dev = 0;
  Creator m_creator = Creator::of_process();
  std::optional<SyncJournal> m_journal;
  std::vector<DirRecord> m_dirs;      ///< guarded by m_mutex during the walk
  std::vector<Deletion> m_deletions;  ///< guarded by m_mutex during the walk
};

}  // namespace

}  // namespace transfer

TransferStats sync_tree(const Payload& payload, int dest_dir, int backup_dir, const TransferOptions& given) {
  ContentIndex own;
  TransferOptions options = given;
  if (options.produced == nullptr) {
    options.produced = &own;
  }
  if (options.known != nullptr) {
    options.produced->reserve_like(*options.known);
  }
  TransferStats stats = transfer::TreeSyncer(payload, dest_dir, backup_dir, options).run();
  if (options.dry_run == DryRun::no && options.check_staged) {
    options.check_staged(dest_dir, *options.produced);
  }
  return stats;
}

}  // namespace hoist
