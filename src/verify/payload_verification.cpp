#include "hoist/verify/payload_verification.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <system_error>

#include "hoist/sys/sha256.hpp"
#include "hoist/util/error.hpp"
#include "hoist/verify/checksums.hpp"
#include "hoist/util/text.hpp"

namespace hoist {

namespace fs = std::filesystem;

namespace {

bool same_file(const fs::path& a, const fs::path& b) {
  std::error_code error;
  return !b.empty() && fs::equivalent(a, b, error);
}

void verify_tree(const ComponentSpec& spec, const fs::path& root, Sha256Verifier& verifier) {
  std::error_code error;
  fs::recursive_directory_iterator it(root, fs::directory_options::none, error);
  if (error) {
    throw Failure(system_message("list " + in_quotes(root.string()), error.value()));
  }
  uint64_t files = 0;
  for (const fs::recursive_directory_iterator end; it != end; it.increment(error)) {
    if (error) {
      throw Failure(system_message("list " + in_quotes(root.string()), error.value()));
    }
    const fs::directory_entry& entry = *it;
    // Symlinks are never followed (directory_options::none does not descend
    // into them either); only regular files have a content to check.
    if (!entry.is_regular_file(error) || entry.is_symlink(error)) {
      continue;
    }
    if (same_file(entry.path(), spec.sha256sums) || same_file(entry.path(), spec.signature)) {
      continue;
    }
    const std::string name = entry.path().lexically_relative(root).generic_string();
    auto digest = sha256_file(AT_FDCWD, entry.path().string());
    if (!digest) {
      throw Failure(digest.error().message);
    }
    verifier.check(name, *digest);
    ++files;
  }
  verifier.finish();
  spdlog::debug("{}: {} payload files match '{}'", spec.name, files, spec.sha256sums.string());
}

}  // namespace

void verify_payload(const ComponentSpec& spec, const Payload& payload) {
  if (spec.sha256sums.empty()) {
    return;
  }
  Sha256Sums sums = spec.public_key.empty() ? Sha256Sums::load(spec.sha256sums)
                                            : load_verified(spec.sha256sums, spec.signature, spec.public_key);
  if (payload.type() == PayloadType::directory) {
    Sha256Verifier verifier(std::move(sums));
    verify_tree(spec, payload.path(), verifier);
  } else {
    verify_file(sums, payload.path().filename().string(), payload.path());
  }
}

}  // namespace hoist
