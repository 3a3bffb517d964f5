// libFuzzer target: the sync backup's journal records (hoist/transfer/sync_journal.hpp).
// The input is read twice. As a journal: every record either decodes or is
// refused, and one that decodes encodes to a record that decodes to the same
// change. As names: the input's bytes, cut at NUL and '/' into names (those a
// directory cannot hold, "." and "..", dropped), make a path that every kind
// of record must give back byte for byte, with any mtime; its letters and
// digits, a tag of temporary names that the tag's record gives back.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "hoist/transfer/sync_journal.hpp"

namespace {

void require(bool condition) {
  if (!condition) {
    std::abort();
  }
}

bool same(const hoist::SyncRecord& a, const hoist::SyncRecord& b) {
  return a.kind == b.kind && a.relpath == b.relpath &&
         (a.kind != hoist::SyncRecord::Kind::directory ||
          (a.mtime.tv_sec == b.mtime.tv_sec && a.mtime.tv_nsec == b.mtime.tv_nsec));
}

std::string path_of_names(std::string_view bytes) {
  std::string relpath;
  size_t start = 0;
  for (size_t i = 0; i <= bytes.size(); ++i) {
    if (i == bytes.size() || bytes[i] == '\0' || bytes[i] == '/') {
      const std::string_view name = bytes.substr(start, i - start);
      if (!name.empty() && name != "." && name != "..") {
        relpath += (relpath.empty() ? "" : "/") + std::string(name);
      }
      start = i + 1;
    }
  }
  return relpath;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);

  for (const std::string_view text : hoist::split_sync_journal(input)) {
    require(text.find('\0') == std::string_view::npos);
    const std::optional<hoist::SyncRecord> record = hoist::decode_sync_record(text);
    if (record) {
      const std::optional<hoist::SyncRecord> again = hoist::decode_sync_record(hoist::encode_sync_record(*record));
      require(again && same(*again, *record));
    }
  }

  const std::string relpath = path_of_names(input);
  timespec mtime{};
  if (size >= sizeof(std::int64_t)) {
    std::int64_t seconds = 0;
    std::memcpy(&seconds, data, sizeof seconds);
    mtime.tv_sec = static_cast<time_t>(seconds);
    mtime.tv_nsec = static_cast<long>(static_cast<std::uint64_t>(seconds) % 1'000'000'000U);
  }
  std::string tag;
  for (const char c : input) {
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) {
      tag += c;
    }
  }
  if (!tag.empty()) {
    const hoist::SyncRecord record{hoist::SyncRecord::Kind::temporaries, tag, {}};
    const std::optional<hoist::SyncRecord> back = hoist::decode_sync_record(hoist::encode_sync_record(record));
    require(back && same(*back, record));
  }
  for (const auto kind :
       {hoist::SyncRecord::Kind::added, hoist::SyncRecord::Kind::kept, hoist::SyncRecord::Kind::directory}) {
    if (relpath.empty() && kind != hoist::SyncRecord::Kind::directory) {
      continue;
    }
    const hoist::SyncRecord record{kind, relpath, mtime};
    const std::string text = hoist::encode_sync_record(record);
    // The record is one record of the journal: no NUL inside, and split back whole.
    const std::string journal = text + '\0';
    const auto records = hoist::split_sync_journal(journal);
    require(records.size() == 1 && records[0] == text);
    const std::optional<hoist::SyncRecord> back = hoist::decode_sync_record(records[0]);
    require(back && same(*back, record));
  }
  return 0;
}
