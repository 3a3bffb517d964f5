#include "payload_walk.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <exception>
#include <stop_token>
#include <system_error>
#include <thread>

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
  // A progress bar needs a total. The tree compared against has a content index: its size stands for the
  // payload's (a version's next differs from it by what changed). Else a walk of the payload's inodes counts it,
  // on a thread of its own beside the transfer, which shows no total until the count has one (as rsync's
  // incremental recursion shows a total still growing). Counted first, a first install of 100,000 small files
  // waited for its 100,000 stats (4.5-5.1 s; 4.3-4.5 s without any count); beside the copy (4.2-4.6 s) the count
  // takes the time the copy's threads wait on the disk, and the inodes it reads are then cached for the copy.
  std::jthread count;
  if (m_options.on_progress) {
    if (m_options.known != nullptr) {
      m_counters.set_total(m_options.known->total_bytes(), true);
    } else {
      try {
        count = std::jthread([this, root](const std::stop_token& stop) { count_total(root, stop); });
      } catch (const std::system_error&) {
        // No thread to spare (a pod's pids limit refused it): counted first, with the pool's threads, as before.
        m_counters.set_total(tree_bytes(root, m_payload.path().string(), m_pool, std::stop_token{}), false);
      }
    }
  }
  m_pool.submit(std::move(walk_root));
  // Should the transfer throw, the count is stopped and joined (~jthread): the process is single-threaded again
  // before walk() returns, as after WorkPool::run.
  m_pool.run([this]() { m_counters.poll(); }, Counters::k_interval);
  if (count.joinable()) {
    count.join();
  }
}

void PayloadWalk::count_total(int root, const std::stop_token& stop) {
  try {
    WorkPool alone(1);
    const uint64_t bytes = tree_bytes(root, m_payload.path().string(), alone, stop);
    if (!stop.stop_requested()) {
      m_counters.set_total(bytes, false);
    }
  } catch (const std::exception&) {
    // No total, then: the transfer's own walk meets what the count could not read, and says so.
  }
}

void PayloadWalk::set_aside_link(std::string_view parent, const std::string& name, const struct stat& st, bool fresh) {
  std::lock_guard lock(m_mutex);
  m_links.push_back(LinkMember{std::string(parent), name, st, fresh});
}

bool PayloadWalk::own_task(const struct stat& st) const {
  return S_ISREG(st.st_mode) && st.st_size >= static_cast<off_t>(k_own_task_bytes) && m_pool.threads() > 1;
}

}  // namespace hoist::transfer
