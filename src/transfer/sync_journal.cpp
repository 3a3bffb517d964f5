#include "hoist/transfer/sync_journal.hpp"

#include <charconv>
#include <stdexcept>

namespace hoist {

namespace {

bool valid_relpath(std::string_view relpath, SyncRecord::Kind kind) {
  if (kind == SyncRecord::Kind::temporaries) {
    return !relpath.empty() &&
           relpath.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789") == std::string_view::npos;
  }
  if (relpath.empty()) {
    return kind == SyncRecord::Kind::directory;
  }
  if (relpath.find('\0') != std::string_view::npos) {
    return false;
  }
  while (true) {
    const size_t slash = relpath.find('/');
    const std::string_view part = relpath.substr(0, slash);
    if (part.empty() || part == "." || part == "..") {
      return false;
    }
    if (slash == std::string_view::npos) {
      return true;
    }
    relpath.remove_prefix(slash + 1);
  }
}

/// A decimal number (a '-' first for `T` signed) and the space after it, taken off the front of `text`.
template <typename T>
std::optional<T> take_number(std::string_view& text) {
  T value{};
  // from_chars takes no '+', no leading whitespace and no base prefix: the digits hoist wrote, nothing else.
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end == text.data() || end == text.data() + text.size() || *end != ' ') {
    return std::nullopt;
  }
  text.remove_prefix(static_cast<size_t>(end - text.data()) + 1);
  return value;
}

}  // namespace

std::string encode_sync_record(const SyncRecord& record) {
  if (!valid_relpath(record.relpath, record.kind)) {
    throw std::invalid_argument("a sync journal record for an invalid path");
  }
  std::string text(1, static_cast<char>(record.kind));
  text += ' ';
  if (record.kind == SyncRecord::Kind::directory) {
    if (record.mtime.tv_nsec < 0 || record.mtime.tv_nsec > 999'999'999) {
      throw std::invalid_argument("a sync journal record with nanoseconds out of range");
    }
    text +=
        std::to_string(static_cast<long long>(record.mtime.tv_sec)) + ' ' + std::to_string(record.mtime.tv_nsec) + ' ';
  }
  return text + record.relpath;
}

std::optional<SyncRecord> decode_sync_record(std::string_view text) {
  if (text.size() < 2 || text[1] != ' ') {
    return std::nullopt;
  }
  SyncRecord record;
  switch (text[0]) {
    case 'T': record.kind = SyncRecord::Kind::temporaries; break;
    case 'A': record.kind = SyncRecord::Kind::added; break;
    case 'K': record.kind = SyncRecord::Kind::kept; break;
    case 'D': record.kind = SyncRecord::Kind::directory; break;
    default: return std::nullopt;
  }
  text.remove_prefix(2);
  if (record.kind == SyncRecord::Kind::directory) {
    const auto seconds = take_number<long long>(text);
    const auto nanoseconds = take_number<long>(text);
    if (!seconds || !nanoseconds || *nanoseconds < 0 || *nanoseconds > 999'999'999) {
      return std::nullopt;
    }
    record.mtime.tv_sec = static_cast<time_t>(*seconds);
    record.mtime.tv_nsec = *nanoseconds;
  }
  // The path is the rest, byte for byte: no whitespace is skipped, which once turned " " into the destination.
  if (!valid_relpath(text, record.kind)) {
    return std::nullopt;
  }
  record.relpath = text;
  return record;
}

std::vector<std::string_view> split_sync_journal(std::string_view journal) {
  std::vector<std::string_view> records;
  for (size_t end = journal.find('\0'); end != std::string_view::npos; end = journal.find('\0')) {
    records.push_back(journal.substr(0, end));
    journal.remove_prefix(end + 1);
  }
  return records;
}

}  // namespace hoist
