// libFuzzer target: the content index kept beside each installed version (hoist/transfer/content_index.hpp).
// The input is read twice. As an index file: it parses or is refused (never a crash), and one that parses
// writes back to the same bytes (a format-1 file: to format 2) and parses again to the same entries. As entries:
// its bytes, cut at NUL into names of one directory and its parent, make entries (every other one with a source
// stamp) that write and read back unchanged.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "hoist/transfer/content_index.hpp"

namespace {

void require(bool condition) {
  if (!condition) {
    std::abort();
  }
}

std::vector<std::pair<std::string, hoist::ContentIndex::Entry>> entries_of(const hoist::ContentIndex& index) {
  std::vector<std::pair<std::string, hoist::ContentIndex::Entry>> entries;
  index.for_each([&](const std::string& relpath, const hoist::ContentIndex::Entry& entry) {
    entries.emplace_back(relpath, entry);
  });
  return entries;
}

bool same(const std::vector<std::pair<std::string, hoist::ContentIndex::Entry>>& a,
          const std::vector<std::pair<std::string, hoist::ContentIndex::Entry>>& b) {
  if (a.size() != b.size()) {
    return false;
  }
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].first != b[i].first || a[i].second.digest != b[i].second.digest ||
        !(a[i].second.stamp == b[i].second.stamp) || !(a[i].second.source == b[i].second.source)) {
      return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);

  if (auto index = hoist::ContentIndex::parse(input, "fuzz")) {
    const std::string bytes = index->serialize();
    require(bytes == input || input.starts_with("hoist-content-index 1\n"));
    auto again = hoist::ContentIndex::parse(bytes, "fuzz");
    require(again && same(entries_of(*again), entries_of(*index)));
  }

  hoist::ContentIndex built;
  std::string dir;
  size_t start = 0;
  for (size_t i = 0; i <= input.size(); ++i) {
    if (i < input.size() && input[i] != '\0') {
      continue;
    }
    const std::string_view name = input.substr(start, i - start);
    start = i + 1;
    if (name.empty() || name == "." || name == ".." || name.size() > 255 || name.find('/') != std::string_view::npos) {
      continue;
    }
    hoist::ContentIndex::Entry entry;
    std::memcpy(entry.digest.data(), name.data(), std::min(name.size(), entry.digest.size()));
    entry.stamp.ino = name.size();
    entry.stamp.size = -static_cast<std::int64_t>(name.size());
    entry.stamp.mtime_sec = static_cast<std::int64_t>(i) << 40;
    entry.stamp.ctime_nsec = static_cast<std::uint32_t>(i);
    if (i % 2 == 0) {
      entry.source = hoist::SourceStamp{static_cast<std::uint64_t>(i) << 33U, name.size() + 1,
                                        -static_cast<std::int64_t>(i), static_cast<std::uint32_t>(name.size())};
    }
    built.add(dir, name, entry);
    if (dir.size() + 1 + name.size() <= 8192) {
      dir += (dir.empty() ? "" : "/") + std::string(name);
    }
  }
  auto parsed = hoist::ContentIndex::parse(built.serialize(), "fuzz");
  require(parsed && same(entries_of(*parsed), entries_of(built)));
  return 0;
}
