#include "content_indexes.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <cerrno>

#include "hoist/sys/atomic_file.hpp"
#include "hoist/sys/host_dir.hpp"
#include "hoist/sys/temporary_name.hpp"
#include "hoist/util/error.hpp"
#include "hoist/util/file_io.hpp"
#include "hoist/util/text.hpp"

namespace hoist {

namespace {

constexpr const char* k_index_dir = ".index";
// 100,000 files take about 7 MB; a tree of millions stays well below this.
constexpr size_t k_max_index_size = size_t{1} << 30U;

}  // namespace

ContentIndexes::ContentIndexes(const HostRoot& root, const InstallTarget& target)
    : m_root(root),
      m_component(target.component),
      m_path(join_host_path(join_host_path(target.state_dir, target.component), k_index_dir)) {}

std::optional<ContentIndex> ContentIndexes::load(const std::string& version, Damaged damaged) const {
  if (version.empty()) {
    return std::nullopt;
  }
  auto dir = HostDir::open(m_root, m_path);
  if (!dir) {
    return std::nullopt;
  }
  const std::string display = dir->display(version);
  Fd fd(::openat(dir->fd(), version.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!fd) {
    if (errno != ENOENT && damaged == Damaged::warn) {
      spdlog::warn("{}: {}: comparing the files of {} by their bytes", m_component,
                   system_message("open " + in_quotes(display), errno), version);
    }
    return std::nullopt;
  }
  auto bytes = read_fd(fd.get(), display, k_max_index_size);
  auto index = bytes ? ContentIndex::parse(*bytes, display) : Expected<ContentIndex>(bytes.error());
  if (!index) {
    if (damaged == Damaged::warn) {
      spdlog::warn("{}: {}: comparing the files of {} by their bytes", m_component, index.error().message, version);
    }
    return std::nullopt;
  }
  return std::move(*index);
}

void ContentIndexes::save(const std::string& version, const ContentIndex& index, std::vector<std::string>* made) const {
  const HostDir dir = HostDir::create(m_root, m_path, 0755, made).value();
  write_file_atomic(dir.fd(), version, index.serialize(), 0644, dir.display(version)).value();
}

void ContentIndexes::save_like(const std::string& version, const ContentIndex& index, const std::string& from,
                               const ContentIndex* from_index, std::vector<std::string>* made) const {
  if (from_index == nullptr || from.empty() || !index.same_entries(*from_index)) {
    save(version, index, made);
    return;
  }
  const HostDir dir = HostDir::create(m_root, m_path, 0755, made).value();
  struct stat st {};
  if (from == version && ::fstatat(dir.fd(), from.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    return;  // a repair that changed nothing: its index is the one on disk
  }
  auto linked = link_file_atomic(dir.fd(), from, version, dir.display(version));
  if (!linked && linked.error().errnum == ENOENT) {
    save(version, index, made);
    return;
  }
  linked.value();
}

void ContentIndexes::remove(const std::string& version) const {
  auto dir = HostDir::open(m_root, m_path);
  if (!dir) {
    return;
  }
  if (::unlinkat(dir->fd(), version.c_str(), 0) != 0 && errno != ENOENT) {
    throw Failure(system_message("remove " + in_quotes(dir->display(version)), errno));
  }
  dir->sync().value();
}

int ContentIndexes::clean(const std::function<bool(const std::string& version)>& kept) const {
  auto dir = HostDir::open(m_root, m_path);
  if (!dir) {
    return 0;
  }
  return dir
      ->remove_leftovers([&](std::string_view name) {
        return name.starts_with(k_temp_prefix) || (!name.starts_with('.') && !kept(std::string(name)));
      })
      .value();
}

}  // namespace hoist
