#include <catch2/catch.hpp>
#include <string>

#include "hoist/transfer/sync_journal.hpp"

using hoist::decode_sync_record;
using hoist::encode_sync_record;
using hoist::split_sync_journal;
using hoist::SyncRecord;

namespace {

SyncRecord round_trip(const SyncRecord& record) {
  const auto decoded = decode_sync_record(encode_sync_record(record));
  REQUIRE(decoded);
  return *decoded;
}

}  // namespace

TEST_CASE("a journal record keeps a path that starts with whitespace byte for byte", "[sync]") {
  for (const std::string relpath : {" ", "  ", " d", "\nx", "\t", "d ", "a/ ", " / /\n", "D 1 2 x", "%s%n"}) {
    const SyncRecord dir = round_trip(SyncRecord{SyncRecord::Kind::directory, relpath, {1700000000, 5}});
    CHECK(dir.kind == SyncRecord::Kind::directory);
    CHECK(dir.relpath == relpath);
    CHECK(dir.mtime.tv_sec == 1700000000);
    CHECK(dir.mtime.tv_nsec == 5);
    CHECK(round_trip(SyncRecord{SyncRecord::Kind::added, relpath, {}}).relpath == relpath);
    CHECK(round_trip(SyncRecord{SyncRecord::Kind::kept, relpath, {}}).relpath == relpath);
  }
  CHECK(encode_sync_record(SyncRecord{SyncRecord::Kind::directory, " ", {12, 34}}) == "D 12 34  ");
}

TEST_CASE("a journal record keeps every byte but NUL and '/' in a name", "[sync]") {
  for (int byte = 1; byte < 256; ++byte) {
    if (byte == '/' || byte == '.') {
      continue;
    }
    const std::string name(1, static_cast<char>(byte));
    CHECK(round_trip(SyncRecord{SyncRecord::Kind::directory, name, {-3, 999999999}}).relpath == name);
    CHECK(round_trip(SyncRecord{SyncRecord::Kind::kept, "x/" + name + "/y", {}}).relpath == "x/" + name + "/y");
  }
}

TEST_CASE("the destination itself is a directory record with an empty path, and only that", "[sync]") {
  CHECK(round_trip(SyncRecord{SyncRecord::Kind::directory, "", {7, 8}}).relpath.empty());
  CHECK_FALSE(decode_sync_record("A "));
  CHECK_FALSE(decode_sync_record("K "));
  CHECK_THROWS_AS(encode_sync_record(SyncRecord{SyncRecord::Kind::added, "", {}}), std::invalid_argument);
}

TEST_CASE("a malformed journal record is refused", "[sync]") {
  for (const std::string text : {"", "A", "Ax", "X x", "D 1 2", "D 1  x", "D  1 2 x", "D +1 2 x", "D 1 +2 x",
                                 "D 0x1 2 x", "D 1 -2 x", "D 1 1000000000 x", "D 99999999999999999999 1 x", "D 1 2 /x",
                                 "A /x", "A x//y", "A x/", "A .", "A ..", "K a/../b", "K ./a"}) {
    CHECK_FALSE(decode_sync_record(text));
  }
  CHECK_FALSE(decode_sync_record(std::string("A a\0b", 5)));
  CHECK(decode_sync_record("D -1 0 x"));
}

TEST_CASE("a journal is split at each NUL; a last record cut short by a kill is left out", "[sync]") {
  const std::string journal("A a\0K  b\0D 1 2 \0A cut", 21);
  const auto records = split_sync_journal(journal);
  REQUIRE(records.size() == 3);
  CHECK(records[0] == "A a");
  CHECK(records[1] == "K  b");
  CHECK(records[2] == "D 1 2 ");
  CHECK(split_sync_journal("").empty());
}
