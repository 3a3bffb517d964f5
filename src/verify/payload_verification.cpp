#include "hoist/verify/payload_verification.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

#include "hoist/sys/directory.hpp"
#include "hoist/sys/sha256.hpp"
#include "hoist/transfer/transfer.hpp"
#include "hoist/util/error.hpp"
#include "hoist/util/fd.hpp"
#include "hoist/util/text.hpp"
#include "hoist/util/work_pool.hpp"
#include "hoist/verify/checksums.hpp"
#include "hoist/verify/sums_signature.hpp"

namespace hoist {

namespace fs = std::filesystem;

namespace {

bool same_file(const fs::path& a, const fs::path& b) {
  std::error_code error;
  return !b.empty() && fs::equivalent(a, b, error);
}

// The SHA256SUMS file and its signature, which may sit inside the payload and are then no payload files. A payload
// file is asked whether it is one of them only when its name is theirs (or their target's, for a symlink):
// fs::equivalent is two stats of whole paths, and asked of every file it cost a verification of 100,000 files
// 200,000 of them, on one thread.
class SumsFiles {
 public:
  explicit SumsFiles(const ComponentSpec& spec) : m_spec(spec) {
    for (const fs::path& path : {spec.sha256sums, spec.signature}) {
      if (path.empty()) {
        continue;
      }
      m_names.push_back(path.filename());
      std::error_code error;
      const fs::path target = fs::canonical(path, error);
      if (!error) {
        m_names.push_back(target.filename());
      }
    }
  }

  [[nodiscard]] bool holds(const fs::path& in_payload) const {
    const fs::path name = in_payload.filename();
    if (std::find(m_names.begin(), m_names.end(), name) == m_names.end()) {
      return false;
    }
    return same_file(in_payload, m_spec.sha256sums) || same_file(in_payload, m_spec.signature);
  }

 private:
  const ComponentSpec& m_spec;
  std::vector<fs::path> m_names;
};

// Checks every regular file under `walked` (the payload itself, or a copy of it) as the payload file of
// the same relative name under `payload_root`.
enum class Reading { hash, listing_only };

// The walk of verify_tree(): each directory is a task of a WorkPool, its entries taken in inode order, as the
// transfer walks a payload. On one thread, a verification of 100,000 files beside an installed version (an lstat of
// each installed file, which its index then vouches for) took longer than the transfer after it.
class VerifyWalk {
 public:
  VerifyWalk(const ComponentSpec& spec, const fs::path& walked, const fs::path& payload_root, Sha256Verifier& verifier,
             Reading reading, const IndexedTree* installed, std::vector<bool>* unread, unsigned threads)
      : m_walked(walked),
        m_payload_root(payload_root),
        m_sums_files(spec),
        m_verifier(verifier),
        m_reading(reading),
        m_installed(installed),
        m_unread(unread),
        m_pool(threads) {}

  /// The number of files checked.
  uint64_t run() {
    // The payload's own path may be a symlink (a release directory's "current"), as the walk before this one
    // allowed; nothing under it is followed.
    Fd root(::open(m_walked.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!root) {
      throw Failure(system_message("list " + in_quotes(m_walked.string()), errno));
    }
    m_pool.submit([this, dir = std::make_shared<Fd>(std::move(root))]() { directory(dir, ""); });
    m_pool.run({}, std::chrono::milliseconds(0));
    return m_files.load();
  }

 private:
  // A subdirectory is opened by its own task, which holds its parent open until then: a queued task holds no
  // descriptor of its own, so a directory of thousands of subdirectories does not open them all at once (a
  // container's limit is often 1,024).
  void subdirectory(const std::shared_ptr<Fd>& parent, const std::string& name, const std::string& relpath) {
    directory(std::make_shared<Fd>(open_directory(parent->get(), name.c_str(), (m_walked / relpath).string()).value()),
              relpath);
  }

  void directory(const std::shared_ptr<Fd>& dir, const std::string& relpath) {
    const std::string display = relpath.empty() ? m_walked.string() : (m_walked / relpath).string();
    std::vector<DirEntry> entries = read_directory(dir->get(), display).value();
    sort_by_inode(entries);
    for (const DirEntry& entry : entries) {
      if (m_pool.cancelled()) {
        return;
      }
      const std::string name = relpath.empty() ? entry.name : relpath + "/" + entry.name;
      unsigned char type = entry.type;
      if (type == DT_UNKNOWN) {
        struct stat st {};
        if (::fstatat(dir->get(), entry.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
          throw Failure(system_message("stat " + in_quotes((m_walked / name).string()), errno));
        }
        type = S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG : DT_UNKNOWN;
      }
      if (type == DT_DIR) {
        m_pool.submit([this, dir, child = entry.name, name]() { subdirectory(dir, child, name); });
      } else if (type == DT_REG) {
        file(dir->get(), entry.name, name);
      }
    }
  }

  // Symlinks are never followed and have no content to check: only regular files come here. `name` is the file's
  // path in the payload, `entry` its name in the directory `dirfd` that the walk opened.
  void file(int dirfd, const std::string& entry, const std::string& name) {
    if (m_sums_files.holds(m_payload_root / name)) {
      return;
    }
    if (m_reading == Reading::listing_only) {
      const std::lock_guard lock(m_mutex);
      m_verifier.check_listed(name);
      ++m_files;
      return;
    }
    if (m_installed != nullptr) {
      const DigestTable& listed = m_verifier.sums().entries();
      const std::size_t at = listed.index_of(name);
      if (at < listed.size() && m_installed->vouch(name) == listed[at].digest) {
        const std::lock_guard lock(m_mutex);
        m_verifier.check_listed(name);
        if (m_unread != nullptr) {
          (*m_unread)[at] = true;
        }
        ++m_files;
        return;
      }
    }
    auto digest = sha256_of_file_at(dirfd, entry, (m_walked / name).string());
    if (!digest) {
      throw Failure(digest.error().message);
    }
    const std::lock_guard lock(m_mutex);
    m_verifier.check(name, *digest);
    ++m_files;
  }

  const fs::path& m_walked;
  const fs::path& m_payload_root;
  const SumsFiles m_sums_files;
  Sha256Verifier& m_verifier;  // NOLINT(cppcoreguidelines-avoid-const-or-ref-data-members): lives through run()
  const Reading m_reading;
  const IndexedTree* m_installed;
  std::vector<bool>* m_unread;
  std::mutex m_mutex;  ///< the verifier's and `unread`'s: a vector<bool> packs neighbours into one word
  std::atomic<uint64_t> m_files{0};
  WorkPool m_pool;
};

// With `installed`, a file whose listed digest the installed tree holds under its name (its index vouching for
// the file as it is) is only checked for being listed, and marked in `unread` (by its position in the sums).
void verify_tree(const ComponentSpec& spec, const fs::path& walked, const fs::path& payload_root,
                 Sha256Verifier& verifier, Reading reading = Reading::hash, const IndexedTree* installed = nullptr,
                 std::vector<bool>* unread = nullptr, unsigned threads = 1) {
  VerifyWalk walk(spec, walked, payload_root, verifier, reading, installed, unread, threads);
  const uint64_t files = walk.run();
  verifier.finish();
  spdlog::debug("{}: {} files under '{}' match '{}'", spec.name, files, walked.string(), spec.sha256sums.string());
}

}  // namespace

// Loaded once a run: the sums that the staged copy is checked against are those the payload was.
Sha256Sums load_payload_sums(const ComponentSpec& spec) {
  return spec.public_key.empty() ? Sha256Sums::load(spec.sha256sums)
                                 : load_verified(spec.sha256sums, spec.signature, spec.public_key);
}

void check_sums_entry_applies(const ComponentSpec& spec, const Payload& payload) {
  if (payload.type() == PayloadType::directory && !spec.sha256sums_entry.empty()) {
    throw UsageError("sha256sums entry '" + spec.sha256sums_entry + "' names the one file of a file or archive " +
                     "payload, and payload '" + payload.path().string() + "' is a directory (its files are listed " +
                     "under their own names)");
  }
}

void check_payload_listing(const Sha256Sums& sums, const ComponentSpec& spec, const Payload& payload) {
  if (payload.type() != PayloadType::directory) {
    return;
  }
  Sha256Verifier verifier(sums);
  verify_tree(spec, payload.path(), payload.path(), verifier, Reading::listing_only);
}

std::optional<Sha256Sums> verify_payload(const ComponentSpec& spec, const Payload& payload,
                                         const IndexedTree* installed, std::vector<bool>* unread, unsigned threads) {
  if (spec.sha256sums.empty()) {
    return std::nullopt;
  }
  Sha256Sums sums = load_payload_sums(spec);
  if (unread != nullptr) {
    unread->assign(sums.entries().size(), false);
  }
  if (payload.type() == PayloadType::directory) {
    Sha256Verifier verifier(sums);
    verify_tree(spec, payload.path(), payload.path(), verifier, Reading::hash, installed, unread,
                transfer_threads(threads));
    return sums;
  }
  // The file that staging reads too (Payload::reopen), not whatever is at the path by then.
  const Fd file = payload.reopen();
  verify_digest(sums, sums_entry_name(spec, payload.path()), sha256_fd(file.get(), payload.path().string()).value());
  return sums;
}

void verify_staged_tree(const Sha256Sums& sums, const ComponentSpec& spec, const Payload& payload,
                        const ContentIndex& staged, const std::vector<bool>* unread) {
  if (payload.type() != PayloadType::directory) {
    return;
  }
  Sha256Verifier verifier(sums);
  // Whether the file that failed is one that verify_payload() left unread: then this was its first reading. Asked
  // of the failing file only, not of every staged one.
  bool first_reading = false;
  try {
    const SumsFiles sums_files(spec);
    staged.for_each([&](const std::string& relpath, const ContentIndex::Entry& entry) {
      if (sums_files.holds(payload.path() / relpath)) {
        return;
      }
      try {
        verifier.check(relpath, entry.digest);
      } catch (const Error&) {
        const std::size_t at = unread == nullptr ? 0 : sums.entries().index_of(relpath);
        first_reading = unread != nullptr && at < unread->size() && (*unread)[at];
        throw;
      }
    });
    verifier.finish();
  } catch (const Error& e) {
    if (first_reading) {
      // Its listed digest is what the installed version holds, but the payload's file is not that (and staging
      // copied it, its metadata differing): a payload that never matched its sums, not one that changed.
      throw Error(ExitCode::verification, spec.name + ": " + payload.path().string() + " does not verify against " +
                                              spec.sha256sums.string() + ": " + e.what());
    }
    throw Error(ExitCode::verification, "what was staged from payload " + in_quotes(payload.path().string()) +
                                            " is not what was verified (the payload changed meanwhile): " + e.what());
  }
}

}  // namespace hoist
