#include "hoist/transfer/content_index.hpp"

#include <fcntl.h>

#include <algorithm>
#include <cstring>
#include <span>

#include "hoist/util/text.hpp"

namespace hoist {

namespace {

// The file: k_magic, then per directory (sorted): its path, its entry count, and per entry (sorted by name): the
// name, the digest, the stamp and the source stamp (its inode first, 0 when none is known, and then nothing
// else of it); then the SHA-256 of all that. Numbers are LEB128 varints, signed ones zigzagged first; strings
// are a varint length and the bytes. k_magic_v1 files, which an earlier hoist wrote, have no source stamps.
constexpr std::string_view k_magic = "hoist-content-index 2\n";
constexpr std::string_view k_magic_v1 = "hoist-content-index 1\n";
static_assert(k_magic.size() == k_magic_v1.size());
constexpr std::size_t k_digest_size = std::tuple_size_v<Sha256Digest>;

void put_varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out += static_cast<char>((value & 0x7fU) | 0x80U);
    value >>= 7U;
  }
  out += static_cast<char>(value);
}

void put_signed(std::string& out, int64_t value) {
  put_varint(out, (static_cast<uint64_t>(value) << 1U) ^ static_cast<uint64_t>(value >> 63));
}

void put_string(std::string& out, std::string_view text) {
  put_varint(out, text.size());
  out += text;
}

/// Reads the fields back; every read checks the bounds and sets m_error once.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : m_bytes(bytes) {}

  uint64_t varint() {
    uint64_t value = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
      if (m_at >= m_bytes.size()) {
        fail("it ends inside a number");
        return 0;
      }
      const auto byte = static_cast<unsigned char>(m_bytes[m_at++]);
      value |= static_cast<uint64_t>(byte & 0x7fU) << shift;
      if ((byte & 0x80U) == 0) {
        return value;
      }
    }
    fail("a number is too long");
    return 0;
  }

  int64_t signed_varint() {
    const uint64_t raw = varint();
    return static_cast<int64_t>((raw >> 1U) ^ (~(raw & 1U) + 1));
  }

  std::string_view string(std::size_t limit) {
    const uint64_t size = varint();
    if (size > limit || size > m_bytes.size() - m_at) {
      fail("a name is longer than the file or than a path can be");
      return {};
    }
    const std::string_view text = m_bytes.substr(m_at, size);
    m_at += size;
    return text;
  }

  Sha256Digest digest() {
    Sha256Digest digest{};
    if (m_bytes.size() - m_at < k_digest_size) {
      fail("it ends inside a digest");
      return digest;
    }
    std::memcpy(digest.data(), m_bytes.data() + m_at, k_digest_size);
    m_at += k_digest_size;
    return digest;
  }

  void fail(std::string_view why) {
    if (m_error.empty()) {
      m_error = why;
    }
  }

  [[nodiscard]] bool done() const { return m_at == m_bytes.size(); }
  [[nodiscard]] const std::string& error() const { return m_error; }

 private:
  std::string_view m_bytes;
  std::size_t m_at = 0;
  std::string m_error;
};

constexpr std::size_t k_max_path = std::size_t{1} << 20U;  // names nest deeper than PATH_MAX through *at() calls
constexpr std::size_t k_max_name = 255;

bool valid_name(std::string_view name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string_view::npos &&
         name.find('\0') == std::string_view::npos;
}

bool valid_dir(std::string_view dir) {
  if (dir.empty()) {
    return true;
  }
  std::size_t start = 0;
  for (;;) {
    const std::size_t slash = dir.find('/', start);
    if (!valid_name(dir.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start))) {
      return false;
    }
    if (slash == std::string_view::npos) {
      return true;
    }
    start = slash + 1;
  }
}

Sha256Digest digest_of(std::string_view bytes) {
  Sha256 sha;
  sha.update(bytes);
  return sha.final_digest();
}

}  // namespace

SourceStamp SourceStamp::of(const struct stat& st) {
  return SourceStamp{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
                     static_cast<int64_t>(st.st_ctim.tv_sec), static_cast<uint32_t>(st.st_ctim.tv_nsec)};
}

FileStamp FileStamp::of(const struct stat& st) {
  return FileStamp{static_cast<uint64_t>(st.st_ino),        static_cast<int64_t>(st.st_size),
                   static_cast<int64_t>(st.st_mtim.tv_sec), static_cast<uint32_t>(st.st_mtim.tv_nsec),
                   static_cast<int64_t>(st.st_ctim.tv_sec), static_cast<uint32_t>(st.st_ctim.tv_nsec)};
}

ContentIndex::ContentIndex(ContentIndex&& other) noexcept {
  const std::lock_guard lock(other.m_mutex);
  m_sections = std::move(other.m_sections);
  m_count = std::exchange(other.m_count, 0);
}

ContentIndex& ContentIndex::operator=(ContentIndex&& other) noexcept {
  if (this != &other) {
    const std::scoped_lock lock(m_mutex, other.m_mutex);
    m_sections = std::move(other.m_sections);
    m_count = std::exchange(other.m_count, 0);
  }
  return *this;
}

std::size_t ContentIndex::Section::sort() {
  if (sorted) {
    return 0;
  }
  // Stable: of one name's records, the last added is the last of its run.
  std::stable_sort(records.begin(), records.end(),
                   [this](const Record& a, const Record& b) { return name(a) < name(b); });
  std::size_t kept = 0;
  for (std::size_t i = 0; i < records.size(); ++i) {
    if (i + 1 < records.size() && name(records[i]) == name(records[i + 1])) {
      continue;
    }
    records[kept++] = records[i];
  }
  const std::size_t removed = records.size() - kept;
  records.resize(kept);
  sorted = true;
  return removed;
}

void ContentIndex::sort_all() const {
  for (auto& [dir, section] : m_sections) {
    m_count -= section.sort();
  }
}

const ContentIndex::Record* ContentIndex::Section::find(std::string_view wanted) const {
  if (sorted) {
    const auto it = std::lower_bound(records.begin(), records.end(), wanted,
                                     [this](const Record& record, std::string_view key) { return name(record) < key; });
    return it != records.end() && name(*it) == wanted ? &*it : nullptr;
  }
  // Being built: the transfer looks up only the names of one inode's links, once each.
  const auto it =
      std::find_if(records.rbegin(), records.rend(), [&](const Record& record) { return name(record) == wanted; });
  return it != records.rend() ? &*it : nullptr;
}

void ContentIndex::add(std::string_view dir, std::string_view name, const Entry& entry) {
  const std::lock_guard lock(m_mutex);
  auto it = m_sections.find(dir);
  if (it == m_sections.end()) {
    it = m_sections.emplace(std::string(dir), Section{}).first;
  }
  Section& section = it->second;
  if (!section.records.empty() && section.name(section.records.back()) >= name) {
    // Out of order (a walk goes in inode order), or the same name again: sort() keeps the last.
    section.sorted = false;
  }
  section.records.push_back(
      Record{static_cast<uint32_t>(section.names.size()), static_cast<uint32_t>(name.size()), entry});
  section.names += name;
  ++m_count;
}

void ContentIndex::reserve_like(const ContentIndex& like) {
  const std::scoped_lock lock(m_mutex, like.m_mutex);
  m_sections.reserve(like.m_sections.size());
  for (const auto& [dir, theirs] : like.m_sections) {
    Section& ours = m_sections[dir];
    ours.records.reserve(theirs.records.size());
    ours.names.reserve(theirs.names.size());
  }
}

void ContentIndex::restamp(std::string_view dir, const std::vector<std::string_view>& names, const FileStamp& stamp) {
  const std::lock_guard lock(m_mutex);
  const auto it = m_sections.find(dir);
  if (it == m_sections.end()) {
    return;
  }
  for (const std::string_view name : names) {
    if (Record* record = it->second.find(name)) {
      record->entry.stamp = stamp;
    }
  }
}

const ContentIndex::Entry* ContentIndex::find(std::string_view dir, std::string_view name) const {
  const auto it = m_sections.find(dir);
  if (it == m_sections.end()) {
    return nullptr;
  }
  const Record* record = it->second.find(name);
  return record != nullptr ? &record->entry : nullptr;
}

std::optional<Sha256Digest> ContentIndex::vouch(std::string_view dir, std::string_view name,
                                                const struct stat& st) const {
  const Entry* entry = find(dir, name);
  if (entry == nullptr || !S_ISREG(st.st_mode) || entry->stamp != FileStamp::of(st)) {
    return std::nullopt;
  }
  return entry->digest;
}

std::optional<Sha256Digest> ContentIndex::vouch_source(std::string_view dir, std::string_view name,
                                                       const struct stat& source_st) const {
  const Entry* entry = find(dir, name);
  if (entry == nullptr || !entry->source.known() || !S_ISREG(source_st.st_mode) ||
      entry->source != SourceStamp::of(source_st) || entry->stamp.size != source_st.st_size ||
      entry->stamp.mtime_sec != source_st.st_mtim.tv_sec ||
      entry->stamp.mtime_nsec != static_cast<uint32_t>(source_st.st_mtim.tv_nsec)) {
    return std::nullopt;
  }
  return entry->digest;
}

std::optional<Sha256Digest> IndexedTree::vouch(std::string_view relpath) const {
  const std::size_t slash = relpath.rfind('/');
  const std::string_view parent = slash == std::string_view::npos ? std::string_view() : relpath.substr(0, slash);
  const std::string_view name = slash == std::string_view::npos ? relpath : relpath.substr(slash + 1);
  struct stat st {};
  if (index.find(parent, name) == nullptr ||
      ::fstatat(dir.get(), std::string(relpath).c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return std::nullopt;
  }
  return index.vouch(parent, name, st);
}

bool ContentIndex::same_entries(const ContentIndex& other) const {
  if (this == &other) {
    return true;
  }
  const std::scoped_lock lock(m_mutex, other.m_mutex);
  sort_all();
  other.sort_all();
  if (m_count != other.m_count) {
    return false;
  }
  // As many entries on both sides: when each of ours is one of theirs, they have no other.
  for (const auto& [dir, ours] : m_sections) {
    if (ours.records.empty()) {
      continue;
    }
    const auto it = other.m_sections.find(dir);
    if (it == other.m_sections.end() || it->second.records.size() != ours.records.size()) {
      return false;
    }
    const Section& theirs = it->second;
    for (std::size_t i = 0; i < ours.records.size(); ++i) {
      if (ours.name(ours.records[i]) != theirs.name(theirs.records[i]) ||
          ours.records[i].entry != theirs.records[i].entry) {
        return false;
      }
    }
  }
  return true;
}

std::size_t ContentIndex::size() const {
  const std::lock_guard lock(m_mutex);
  sort_all();
  return m_count;
}

uint64_t ContentIndex::total_bytes() const {
  const std::lock_guard lock(m_mutex);
  sort_all();
  std::vector<std::pair<uint64_t, int64_t>> inodes;
  inodes.reserve(m_count);
  for (const auto& [dir, section] : m_sections) {
    for (const Record& record : section.records) {
      inodes.emplace_back(record.entry.stamp.ino, record.entry.stamp.size);
    }
  }
  std::sort(inodes.begin(), inodes.end());
  uint64_t total = 0;
  for (std::size_t i = 0; i < inodes.size(); ++i) {
    if ((i == 0 || inodes[i].first != inodes[i - 1].first) && inodes[i].second > 0) {
      total += static_cast<uint64_t>(inodes[i].second);
    }
  }
  return total;
}

std::vector<std::pair<const std::string*, const ContentIndex::Section*>> ContentIndex::sorted_sections() const {
  sort_all();
  std::vector<std::pair<const std::string*, const Section*>> sections;
  sections.reserve(m_sections.size());
  for (auto& [dir, section] : m_sections) {
    if (!section.records.empty()) {
      sections.emplace_back(&dir, &section);
    }
  }
  std::sort(sections.begin(), sections.end(), [](const auto& a, const auto& b) { return *a.first < *b.first; });
  return sections;
}

std::string ContentIndex::serialize() const {
  const std::lock_guard lock(m_mutex);
  const auto sections = sorted_sections();
  std::string out(k_magic);
  out.reserve(k_magic.size() + m_count * 96 + k_digest_size);  // about 80 bytes an entry and its name
  put_varint(out, sections.size());
  for (const auto& [dir, section] : sections) {
    put_string(out, *dir);
    put_varint(out, section->records.size());
    for (const Record& record : section->records) {
      const Entry& entry = record.entry;
      put_string(out, section->name(record));
      out.append(reinterpret_cast<const char*>(entry.digest.data()), entry.digest.size());
      put_varint(out, entry.stamp.ino);
      put_signed(out, entry.stamp.size);
      put_signed(out, entry.stamp.mtime_sec);
      put_varint(out, entry.stamp.mtime_nsec);
      put_signed(out, entry.stamp.ctime_sec);
      put_varint(out, entry.stamp.ctime_nsec);
      put_varint(out, entry.source.ino);
      if (entry.source.known()) {
        put_varint(out, entry.source.dev);
        put_signed(out, entry.source.ctime_sec);
        put_varint(out, entry.source.ctime_nsec);
      }
    }
  }
  const Sha256Digest sum = digest_of(out);
  out.append(reinterpret_cast<const char*>(sum.data()), sum.size());
  return out;
}

Expected<ContentIndex> ContentIndex::parse(std::string_view bytes, std::string_view display) {
  auto damaged = [&](std::string_view why) {
    return SysError{"content index " + in_quotes(display) + " is damaged: " + std::string(why), 0};
  };
  const bool with_sources = bytes.starts_with(k_magic);
  if (!with_sources && !bytes.starts_with(k_magic_v1)) {
    return damaged("it does not start as a content index of this hoist does");
  }
  if (bytes.size() < k_magic.size() + k_digest_size) {
    return damaged("it is cut short");
  }
  const std::string_view body = bytes.substr(0, bytes.size() - k_digest_size);
  if (std::memcmp(digest_of(body).data(), bytes.data() + body.size(), k_digest_size) != 0) {
    return damaged("its checksum does not match (cut short, or changed)");
  }
  Reader reader(body.substr(k_magic.size()));
  ContentIndex index;
  const uint64_t sections = reader.varint();
  std::string previous_dir;
  for (uint64_t s = 0; s < sections && reader.error().empty(); ++s) {
    const std::string_view dir = reader.string(k_max_path);
    if (!valid_dir(dir) || (s > 0 && dir <= previous_dir)) {
      reader.fail("a directory is out of order or not a relative path");
      break;
    }
    previous_dir = dir;
    Section& section = index.m_sections[std::string(dir)];
    const uint64_t entries = reader.varint();
    std::string_view previous_name;
    for (uint64_t e = 0; e < entries && reader.error().empty(); ++e) {
      const std::string_view name = reader.string(k_max_name);
      if (!valid_name(name) || (e > 0 && name <= previous_name)) {
        reader.fail("a name is out of order or not a file name");
        break;
      }
      previous_name = name;
      Entry entry;
      entry.digest = reader.digest();
      entry.stamp.ino = reader.varint();
      entry.stamp.size = reader.signed_varint();
      entry.stamp.mtime_sec = reader.signed_varint();
      entry.stamp.mtime_nsec = static_cast<uint32_t>(reader.varint());
      entry.stamp.ctime_sec = reader.signed_varint();
      entry.stamp.ctime_nsec = static_cast<uint32_t>(reader.varint());
      if (with_sources) {
        entry.source.ino = reader.varint();
        if (entry.source.known()) {
          entry.source.dev = reader.varint();
          entry.source.ctime_sec = reader.signed_varint();
          entry.source.ctime_nsec = static_cast<uint32_t>(reader.varint());
        }
      }
      section.records.push_back(
          Record{static_cast<uint32_t>(section.names.size()), static_cast<uint32_t>(name.size()), entry});
      section.names += name;
      ++index.m_count;
    }
  }
  if (reader.error().empty() && !reader.done()) {
    reader.fail("it goes on after its last entry");
  }
  if (!reader.error().empty()) {
    return damaged(reader.error());
  }
  return index;
}

void ContentIndex::for_each(const std::function<void(const std::string& relpath, const Entry& entry)>& visit) const {
  const std::lock_guard lock(m_mutex);
  std::string relpath;
  for (const auto& [dir, section] : sorted_sections()) {
    for (const Record& record : section->records) {
      relpath = dir->empty() ? std::string(section->name(record)) : *dir + "/" + std::string(section->name(record));
      visit(relpath, record.entry);
    }
  }
}

}  // namespace hoist
