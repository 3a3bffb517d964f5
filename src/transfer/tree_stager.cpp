// stage_tree() for directory payloads: a parallel walk of the payload beside
// the staging directory and the tree it links from (--link-dest).

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "archive_stager.hpp"
#include "hoist/sys/directory.hpp"
#include "hoist/transfer/transfer.hpp"
#include "hoist/util/error.hpp"
#include "hoist/util/work_pool.hpp"
#include "payload_walk.hpp"
#include "read_ahead.hpp"
#include "staging_target.hpp"
#include "transfer_counters.hpp"
#include "transfer_support.hpp"
#include "tree_node.hpp"
#include "tree_order.hpp"

namespace hoist {

namespace transfer {

namespace {

/// The three directories at one relative path (non-owning).
struct DirFds {
  int source = -1;
  int target = -1;   ///< -1 in a dry run
  int compare = -1;  ///< -1 when link_dest has no directory there
  std::string_view relpath;
};

/// An open directory of the walk, shared by the tasks of its entries.
struct DirNode {
  std::string relpath;
  Fd source;
  Fd target;
  Fd compare;
  [[nodiscard]] DirFds fds() const { return DirFds{source.get(), target.get(), compare.get(), relpath}; }
};

class DirectoryStager : PayloadWalk {
 public:
  DirectoryStager(const Payload& payload, int staging_dir, int link_dest, const TransferOptions& options)
      : PayloadWalk(payload, options), m_target(staging_dir, link_dest), m_produced(*options.produced) {}

  TransferStats run() {
    auto root = std::make_shared<DirNode>();
    root->source = open_payload_root(m_payload);
    if (!m_dry) {
      root->target = reopen_directory(m_target.staging(), m_target.staging_display()).value();
      m_target.remove_default_acl();
    }
    if (m_target.has_compare()) {
      root->compare = reopen_directory(m_target.compare(), m_target.compare_display()).value();
    }
    m_dirs.push_back(DirRecord{"", read_dir_meta(root->source.get(), payload_display(""), &m_source_dev)});
    walk(root->source.get(), [this, root]() mutable { stage_entries(std::move(root)); });
    stage_hard_links();
    if (!m_dry) {
      apply_directory_metadata();
    }
    return m_counters.snapshot();
  }

 private:
  struct DirRecord {
    std::string relpath;
    DirMeta dir;
  };

  /// Opens directory `name` under `parent` on the three sides, classifies it
  /// against link_dest, and stages what is in it.
  void stage_directory(std::shared_ptr<DirNode> parent, const std::string& name) {
    auto node = std::make_shared<DirNode>();
    node->relpath = join_path(parent->relpath, name);
    node->source = open_directory(parent->source.get(), name.c_str(), payload_display(node->relpath)).value();
    if (!m_dry) {
      node->target =
          open_directory(parent->target.get(), name.c_str(), m_target.staging_display(node->relpath)).value();
    }
    Outcome outcome = Outcome::added;
    if (parent->compare) {
      node->compare.reset(
          ::openat(parent->compare.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!node->compare) {
        if (errno != ENOENT && errno != ENOTDIR && errno != ELOOP) {
          throw Failure(system_message("open directory " + in_quotes(m_target.compare_display(node->relpath)), errno));
        }
        if (errno != ENOENT) {
          outcome = Outcome::changed;
          count_replaced(parent->compare.get(), name, node->relpath);
        }
      }
    }
    // The parent's directories stay open only while some of its entries wait.
    parent.reset();
    DirRecord record{node->relpath, read_dir_meta(node->source.get(), payload_display(node->relpath))};
    if (node->compare) {
      struct stat existing {};
      if (::fstat(node->compare.get(), &existing) != 0) {
        throw Failure(system_message("stat " + in_quotes(m_target.compare_display(node->relpath)), errno));
      }
      const bool same =
          same_attributes(record.dir.meta, NodeMeta::from_stat(existing)) &&
          same_xattrs(
              record.dir.xattrs,
              read_xattrs(NodeRef{-1, nullptr, node->compare.get()}, m_target.compare_display(node->relpath)).value());
      outcome = same ? Outcome::unchanged : Outcome::changed;
    }
    m_counters.count(outcome, 0);
    {
      std::lock_guard lock(m_mutex);
      m_dirs.push_back(std::move(record));
    }
    stage_entries(std::move(node));
  }

  void stage_entries(std::shared_ptr<DirNode> node) {
    const DirFds fds = node->fds();
    const std::string display = payload_display(fds.relpath);
    auto entries = read_directory(fds.source, display).value();
    sort_by_inode(entries);
    const auto reading = [this] {
      return payload_reading(m_dry, m_copier, m_source_dev, m_target.staging_dev(), m_options);
    };
    const bool walked =
        walk_entries(fds.source, fds.compare, entries, display, reading,
                     RecordedSources{fds.compare >= 0 ? recorded_sources(m_options) : nullptr, fds.relpath}, m_pool,
                     [&](const std::string& name, const struct stat& st, ReadAhead::Seen* seen) {
                       stage_walked(node, name, st, seen);
                     });
    if (walked && fds.compare >= 0) {
      count_removed(fds, entries);
    }
  }

  /// One entry of the walk of `node`: a directory is made and walked by a task
  /// of its own, a hard-linked name set aside, a big file copied by a task of its own.
  void stage_walked(const std::shared_ptr<DirNode>& node, const std::string& name, const struct stat& st,
                    ReadAhead::Seen* seen) {
    const DirFds fds = node->fds();
    if (S_ISDIR(st.st_mode)) {
      if (!m_dry && ::mkdirat(fds.target, name.c_str(), 0700) != 0) {
        throw Failure(system_message(
            "create directory " + in_quotes(m_target.staging_display(join_path(fds.relpath, name))), errno));
      }
      // An init-capture: `node` is a const reference, and a plain capture of it would be a const copy that
      // std::move would copy again.
      m_pool.submit([this, dir = node, name]() mutable { stage_directory(std::move(dir), name); });
    } else if (st.st_nlink > 1) {
      // Hard links are made after the walk, when the first name of each inode exists.
      set_aside_link(fds.relpath, name, st, false);
    } else if (own_task(st)) {
      m_pool.submit(
          [this, node, name, st, existing = existing_seen(seen)]() { stage_entry(node->fds(), name, st, existing); });
    } else {
      stage_entry(fds, name, st, existing_seen(seen), take_source(seen));
    }
    m_counters.poll();
  }

  /// Stages one entry that is not a directory; returns how it compares. `seen`
  /// is link_dest's entry when the walk already knows it; `opened` the payload
  /// file as the read-ahead opened it.
  Outcome stage_entry(const DirFds& fds, const std::string& name, const struct stat& st,
                      const std::optional<ExistingNode>& seen = std::nullopt, Fd opened = Fd()) {
    const std::string relpath = join_path(fds.relpath, name);
    const std::string source_display = payload_display(relpath);
    SourceNode source = read_source(fds.source, name.c_str(), st, source_display, std::move(opened));
    const ExistingNode existing =
        seen ? *seen : stat_existing(fds.compare, name.c_str(), m_target.compare_display(relpath));
    const Compared compared = compare_node(source, existing, fds.compare, EntryPath{fds.relpath, name}, m_options,
                                           source_display, m_target.compare_display(relpath));
    const Outcome outcome = compared.outcome;
    if (existing.present && S_ISDIR(existing.st.st_mode)) {
      count_replaced(fds.compare, name, relpath);
    }
    const uint64_t bytes = source.meta.size;
    if (m_dry) {
      m_counters.count(outcome, bytes);
      return outcome;
    }
    const bool regular = S_ISREG(st.st_mode);
    if (outcome == Outcome::unchanged && regular &&
        m_target.link_unchanged(fds.compare, fds.target, name, relpath, existing.st)) {
      // The link moved the inode's ctime: its stamp is taken now, after it.
      m_produced.add(
          fds.relpath, name,
          {*compared.digest, stamp_of(fds.target, name.c_str(), m_target.staging_display(relpath)), compared.source});
      m_counters.count(outcome, bytes);
      return outcome;
    }
    uint64_t reported = 0;
    const CopyProgress progress = [this, &reported](uint64_t done) {
      m_counters.add_done(done - reported);
      reported = done;
      m_counters.poll();
    };
    ContentIndex::Entry entry;
    const uint64_t written =
        write_node(source, m_target.write_target(fds.target, name.c_str()), m_copier, source_display,
                   m_target.staging_display(relpath), progress, regular ? &entry : nullptr);
    if (regular) {
      entry.source = recordable_source(source, m_options);
      m_produced.add(fds.relpath, name, entry);
    }
    m_counters.count_written(written);
    m_counters.count(outcome, bytes, reported);
    return outcome;
  }

  void count_replaced(int compare_dir, const std::string& name, const std::string& relpath) {
    transfer::count_replaced(m_counters, compare_dir, name, m_target.compare_display(relpath));
  }

  void count_removed(const DirFds& fds, const std::vector<DirEntry>& entries) {
    std::unordered_set<std::string_view> names;
    names.reserve(entries.size());
    for (const DirEntry& entry : entries) {
      names.insert(entry.name);
    }
    for (const DirEntry& entry : read_directory(fds.compare, m_target.compare_display(fds.relpath)).value()) {
      if (names.count(entry.name) == 0) {
        uint64_t files = 0;
        uint64_t bytes = 0;
        count_tree(fds.compare, entry.name.c_str(), files, bytes,
                   m_target.compare_display(join_path(fds.relpath, entry.name)));
        m_counters.count_removed(files, bytes);
      }
    }
  }

  /// Each inode of the payload with several names becomes one inode with the
  /// same names: the first name is staged as any file, the others link to it.
  void stage_hard_links() {
    const Fd payload_root = open_payload_root(m_payload);
    DirCursor sources(payload_root.get(), m_payload.path().string());
    DirCursor targets(m_target.staging(), m_target.staging_display());
    DirCursor compares(m_target.compare(), m_target.compare_display());
    for_each_link_group(m_links,
                        [&](size_t first, size_t end) { stage_link_group(first, end, sources, targets, compares); });
  }

  void stage_link_group(size_t first, size_t end, DirCursor& sources, DirCursor& targets, DirCursor& compares) {
    const LinkMember& lead = m_links[first];
    DirFds fds{sources.open(lead.parent).value(), m_dry ? -1 : targets.open(lead.parent).value(),
               m_target.has_compare() ? compares.open_if_present(lead.parent).value() : -1, lead.parent};
    const Outcome lead_outcome = stage_entry(fds, lead.name, lead.st);
    const std::string lead_path = join_path(lead.parent, lead.name);
    // The lead's inode in link_dest, which the other names share there when they are unchanged.
    const ExistingNode lead_existing =
        stat_existing(fds.compare, lead.name.c_str(), m_target.compare_display(lead_path));
    Fd lead_dir;
    if (!m_dry) {
      lead_dir = reopen_directory(fds.target, m_target.staging_display(lead.parent)).value();
    }
    for (size_t i = first + 1; i < end; ++i) {
      const LinkMember& member = m_links[i];
      const std::string relpath = join_path(member.parent, member.name);
      const int compare_dir = m_target.has_compare() ? compares.open_if_present(member.parent).value() : -1;
      const ExistingNode existing = stat_existing(compare_dir, member.name.c_str(), m_target.compare_display(relpath));
      Outcome outcome = Outcome::added;
      if (existing.present) {
        const bool same_inode = lead_existing.present && existing.st.st_dev == lead_existing.st.st_dev &&
                                existing.st.st_ino == lead_existing.st.st_ino;
        outcome = same_inode && lead_outcome == Outcome::unchanged ? Outcome::unchanged : Outcome::changed;
        if (S_ISDIR(existing.st.st_mode)) {
          count_replaced(compare_dir, member.name, relpath);
        }
      }
      // The data was counted with the first name.
      m_counters.count(outcome, 0);
      if (m_dry) {
        continue;
      }
      const int target_dir = targets.open(member.parent).value();
      if (::linkat(lead_dir.get(), lead.name.c_str(), target_dir, member.name.c_str(), 0) != 0) {
        throw Failure(system_message("link " + in_quotes(m_target.staging_display(lead_path)) + " to " +
                                         in_quotes(m_target.staging_display(relpath)),
                                     errno));
      }
      m_counters.poll();
    }
    if (!m_dry) {
      index_link_group(first, end, lead_dir.get());
    }
  }

  /// The names of one staged inode get the lead's digest and the stamp after the last link, which moved its ctime.
  void index_link_group(size_t first, size_t end, int lead_dir) {
    const LinkMember& lead = m_links[first];
    const ContentIndex::Entry* lead_entry = m_produced.find(lead.parent, lead.name);
    if (lead_entry == nullptr) {
      return;  // not a regular file
    }
    const ContentIndex::Entry entry{
        lead_entry->digest,
        stamp_of(lead_dir, lead.name.c_str(), m_target.staging_display(join_path(lead.parent, lead.name))),
        lead_entry->source};
    for (size_t i = first; i < end; ++i) {
      m_produced.add(m_links[i].parent, m_links[i].name, entry);
    }
  }

  /// Directory modes and times go last: every entry made inside a directory changes its mtime.
  void apply_directory_metadata() {
    sort_deepest_first(m_dirs, [](const DirRecord& record) -> std::string_view { return record.relpath; });
    DirCursor targets(m_target.staging(), m_target.staging_display());
    for (const DirRecord& record : m_dirs) {
      const int fd = targets.open(record.relpath).value();
      // The staging root may carry xattrs of its own; the directories made here carry none.
      const ExistingXattrs existing = record.relpath.empty() ? ExistingXattrs::reconcile : ExistingXattrs::none;
      apply_metadata(NodeRef{-1, nullptr, fd}, record.dir.meta, record.dir.xattrs, existing,
                     m_target.staging_display(record.relpath))
          .value();
      m_counters.poll();
    }
  }

  StagingTarget m_target;
  ContentIndex& m_produced;
  std::vector<DirRecord> m_dirs;  ///< guarded by m_mutex during the walk
};

}  // namespace

}  // namespace transfer

TransferStats stage_tree(const Payload& payload, int staging_dir, int link_dest, const TransferOptions& given) {
  ContentIndex own;
  TransferOptions options = given;
  if (options.produced == nullptr) {
    options.produced = &own;
  }
  if (options.known != nullptr) {
    options.produced->reserve_like(*options.known);
  }
  TransferStats stats;
  switch (payload.type()) {
    case PayloadType::directory:
      stats = transfer::DirectoryStager(payload, staging_dir, link_dest, options).run();
      break;
    case PayloadType::archive: stats = transfer::stage_archive(payload, staging_dir, link_dest, options); break;
    case PayloadType::file:
      throw UsageError("cannot stage '" + payload.path().string() +
                       "' as a tree: it is neither a directory nor an archive");
  }
  if (options.dry_run == DryRun::no) {
    // The archive was read through the file verification hashed: unwritten since, it gave the same bytes.
    payload.check_unchanged();
    if (options.check_staged) {
      options.check_staged(staging_dir, *options.produced);
    }
  }
  return stats;
}

}  // namespace hoist
