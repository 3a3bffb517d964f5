#include "payload_walk.hpp"

#include <sys/stat.h>

#include <cerrno>

#include "hoist/util/error.hpp"
#include "transfer_support.hpp"

namespace hoist::transfer {

namespace {

// Files at least this big are copied by a task of their own.
constexpr uint64_t k_own_task_bytes = uint64_t{1} << 20U;

}  // namespace

DirMeta read_dir_meta(int fd, std::string_view display, dev_t* dev) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    throw Failure(system_message("stat " + in_quotes(display), errno));
  }
  if (dev != nullptr) {
    *dev = st.st_dev;
  }
  return DirMeta{NodeMeta::from_stat(st), read_xattrs(NodeRef{-1, nullptr, fd}, display).value()};
}

void throw_stat_failure(std::string_view display, const std::string& name, int error) {
  throw Failure(system_message("stat " + in_quotes(std::string(display) + "/" + name), error));
}

PayloadWalk::PayloadWalk(const Payload& payload, const TransferOptions& options)
    : m_payload(payload),
      m_options(options),
      m_dry(options.dry_run == DryRun::yes),
      m_counters(options),
      m_pool(transfer_threads(options.threads)) {}

std::string PayloadWalk::payload_display(std::string_view relpath) const {
  return relpath.empty() ? m_payload.path().string() : m_payload.path().string() + "/" + std::string(relpath);
}

void PayloadWalk::walk(int root, std::function<void()> walk_root) {
  if (m_options.on_progress) {
    // A progress bar needs a total. The tree compared against has a content index: its size stands for the
    // payload's (a version's next differs from it by what changed). Else one walk of the payload's inodes, which
    // the copy then finds cached: a first install copies every byte, and the walk costs little beside that, while
    // beside a re-run's comparison, which reads no file, it took a quarter of the time.
    if (m_options.known != nullptr) {
      m_counters.set_total(m_options.known->total_bytes(), true);
    } else {
      m_counters.set_total(tree_bytes(root, m_payload.path().string(), m_pool), false);
    }
  }
  m_pool.submit(std::move(walk_root));
  m_pool.run([this]() { m_counters.poll(); }, Counters::k_interval);
}

void PayloadWalk::set_aside_link(std::string_view parent, const std::string& name, const struct stat& st, bool fresh) {
  std::lock_guard lock(m_mutex);
  m_links.push_back(LinkMember{std::string(parent), name, st, fresh});
}

bool PayloadWalk::own_task(const struct stat& st) const {
  return S_ISREG(st.st_mode) && st.st_size >= static_cast<off_t>(k_own_task_bytes) && m_pool.threads() > 1;
}

}  // namespace hoist::transfer
