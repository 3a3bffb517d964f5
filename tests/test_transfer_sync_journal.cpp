#include <catch2/catch.hpp>
#include <string>

#include "hoist/sys/temporary_name.hpp"
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
  for (const std::string text : {"",
                                 "A",
                                 "Ax",
                                 "X x",
                                 "D 1 2",
                                 "D 1  x",
                                 "D  1 2 x",
                                 "D +1 2 x",
                                 "D 1 +2 x",
                                 "D 0x1 2 x",
                                 "D 1 -2 x",
                                 "D 1 1000000000 x",
                                 "D 99999999999999999999 1 x",
                                 "D 1 2 /x",
                                 "A /x",
                                 "A x//y",
                                 "A x/",
                                 "A .",
                                 "A ..",
                                 "K a/../b",
                                 "K ./a"}) {
    CHECK_FALSE(decode_sync_record(text));
  }
  CHECK_FALSE(decode_sync_record(std::string("A a\0b", 5)));
  CHECK(decode_sync_record("D -1 0 x"));
}

TEST_CASE("a journal is split at each NUL, and a last record cut short by a kill is left out", "[sync]") {
  const std::string journal("A a\0K  b\0D 1 2 \0A cut", 21);
  const auto records = split_sync_journal(journal);
  REQUIRE(records.size() == 3);
  CHECK(records[0] == "A a");
  CHECK(records[1] == "K  b");
  CHECK(records[2] == "D 1 2 ");
  CHECK(split_sync_journal("").empty());
}

TEST_CASE("the tag of a sync's temporaries is a record of its own, letters and digits only", "[sync]") {
  const SyncRecord tag = round_trip(SyncRecord{SyncRecord::Kind::temporaries, "ab12cd34ef56gh78", {}});
  CHECK(tag.kind == SyncRecord::Kind::temporaries);
  CHECK(tag.relpath == "ab12cd34ef56gh78");
  CHECK(encode_sync_record(tag) == "T ab12cd34ef56gh78");
  for (const std::string text : {"T ", "T a/b", "T a b", "T AB", "T a.b"}) {
    CHECK_FALSE(decode_sync_record(text));
  }
}

TEST_CASE("a temporary name carries its tag, and a host name with the prefix alone is not one", "[sync]") {
  const std::string tag = hoist::random_token(16);
  CHECK(tag.size() == 16);
  CHECK(tag != hoist::random_token(16));
  const std::string temp = hoist::temporary_name("conf", tag);
  CHECK(temp.rfind(".hoist-tmp." + tag + ".conf.", 0) == 0);
  CHECK(temp.size() == std::string(".hoist-tmp.").size() + 16 + 1 + 4 + 1 + 12);
  CHECK(hoist::is_temporary_name(temp, tag));
  CHECK_FALSE(hoist::is_temporary_name(temp, hoist::random_token(16)));
  CHECK_FALSE(hoist::is_temporary_name(".hoist-tmp.keep", tag));
  CHECK_FALSE(hoist::is_temporary_name(".hoist-tmp." + tag + "x.conf.abc", tag));
  CHECK_FALSE(hoist::is_temporary_name(temp, ""));
  // A name of 255 bytes still makes a temporary name that fits NAME_MAX.
  CHECK(hoist::temporary_name(std::string(255, 'n'), tag).size() <= 255);
  CHECK(hoist::temporary_name("state.json").rfind(".hoist-tmp.state.json.", 0) == 0);
}
