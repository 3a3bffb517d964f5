#include "hoist/verify/payload_verification.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <system_error>
#include <vector>

#include "hoist/sys/sha256.hpp"
#include "hoist/util/error.hpp"
#include "hoist/util/fd.hpp"
#include "hoist/util/text.hpp"
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

// With `installed`, a file whose listed digest the installed tree holds under its name (its index vouching for
// the file as it is) is only checked for being listed, and marked in `unread` (by its position in the sums).
void verify_tree(const ComponentSpec& spec, const fs::path& walked, const fs::path& payload_root,
                 Sha256Verifier& verifier, Reading reading = Reading::hash, const IndexedTree* installed = nullptr,
                 std::vector<bool>* unread = nullptr) {
  const DigestTable& listed = verifier.sums().entries();
  const SumsFiles sums_files(spec);
  std::error_code error;
  fs::recursive_directory_iterator it(walked, fs::directory_options::none, error);
  if (error) {
    throw Failure(system_message("list " + in_quotes(walked.string()), error.value()));
  }
  uint64_t files = 0;
  for (const fs::recursive_directory_iterator end; it != end; it.increment(error)) {
    if (error) {
      throw Failure(system_message("list " + in_quotes(walked.string()), error.value()));
    }
    const fs::directory_entry& entry = *it;
    // Symlinks are never followed (directory_options::none does not descend
    // into them either); only regular files have a content to check.
    if (!entry.is_regular_file(error) || entry.is_symlink(error)) {
      continue;
    }
    const std::string name = entry.path().lexically_relative(walked).generic_string();
    if (sums_files.holds(payload_root / name)) {
      continue;
    }
    if (reading == Reading::listing_only) {
      verifier.check_listed(name);
      ++files;
      continue;
    }
    if (installed != nullptr) {
      const std::size_t at = listed.index_of(name);
      if (at < listed.size() && installed->vouch(name) == listed[at].digest) {
        verifier.check_listed(name);
        if (unread != nullptr) {
          (*unread)[at] = true;
        }
        ++files;
        continue;
      }
    }
    auto digest = sha256_file(AT_FDCWD, entry.path().string());
    if (!digest) {
      throw Failure(digest.error().message);
    }
    verifier.check(name, *digest);
    ++files;
  }
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
                                         const IndexedTree* installed, std::vector<bool>* unread) {
  if (spec.sha256sums.empty()) {
    return std::nullopt;
  }
  Sha256Sums sums = load_payload_sums(spec);
  if (unread != nullptr) {
    unread->assign(sums.entries().size(), false);
  }
  if (payload.type() == PayloadType::directory) {
    Sha256Verifier verifier(sums);
    verify_tree(spec, payload.path(), payload.path(), verifier, Reading::hash, installed, unread);
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
        verifier.check(relpath, to_hex(entry.digest));
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
