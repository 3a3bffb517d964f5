#pragma once

// The records of a sync backup's journal (sync_tree(), restore_sync_backup()).
// A journal outlives the hoist that wrote it (the next run, perhaps a newer
// hoist, undoes a killed sync from it), so its format is a contract:
//
//   one record per change, each ended by a NUL byte:
//     "T <tag>"                the sync's temporary names carry <tag> (the first record; a journal of an older
//                              hoist has none)
//     "A <path>"               <path> did not exist (restore removes it)
//     "K <path>"               the old <path> is kept in the backup's tree/
//     "D <sec> <nsec> <path>"  directory <path> had this mtime ("" is the destination itself)
//
// <path> is the rest of the record, byte for byte: a name may start or end with
// whitespace, hold a newline or any byte but NUL and '/'.

#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hoist {

/// One change a sync recorded before making it.
struct SyncRecord {
  enum class Kind : char { temporaries = 'T', added = 'A', kept = 'K', directory = 'D' };
  Kind kind = Kind::added;
  /// Relative to the destination: names joined by '/', none empty, "." or ".."; "" (the destination) only for
  /// Kind::directory. Kind::temporaries: the tag (temporary_name()), lowercase letters and digits.
  std::string relpath;
  /// Kind::directory: the directory's mtime before the sync changed it.
  timespec mtime{};
};

/// The record's bytes, without the NUL that ends it in the journal. Throws
/// std::invalid_argument for a record decode_sync_record() would refuse.
std::string encode_sync_record(const SyncRecord& record);

/// The record `text` (without its NUL) holds, or nullopt when it is malformed:
/// an unknown kind, a number that is not plain decimal or out of range, a path
/// that is absolute, has an empty, "." or ".." component, or holds a NUL.
std::optional<SyncRecord> decode_sync_record(std::string_view text);

/// The records of a journal's bytes, in order. A last record without its NUL
/// was cut short by a kill before its change was made, and is left out.
std::vector<std::string_view> split_sync_journal(std::string_view journal);

}  // namespace hoist
