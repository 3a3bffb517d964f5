// ArchiveReader and the entry accessors of the sys room: what an archive records of its entries.

#include <catch2/catch.hpp>
#include <map>
#include <string>

#include "hoist/sys/archive_reader.hpp"
#include "scoped_temp_dir.hpp"
#include "transfer_fixture.hpp"

namespace {

using hoist::test::run;
using hoist::test::ScopedTempDir;

/// Each entry's path and link count, in archive order.
std::map<std::string, unsigned> link_counts(const std::filesystem::path& archive) {
  hoist::ArchiveReader reader = hoist::ArchiveReader::open(archive).value();
  std::map<std::string, unsigned> counts;
  while (archive_entry* entry = reader.next().value()) {
    counts[std::string(hoist::entry_path(entry))] = hoist::entry_nlink(entry);
  }
  return counts;
}

}  // namespace

TEST_CASE("entry_nlink gives the link count an archive recorded for each name", "[archive]") {
  const ScopedTempDir tmp;
  const std::string src = (tmp / "src").string();
  run("mkdir '" + src + "' && echo one > '" + src + "/a' && ln '" + src + "/a' '" + src + "/b' && echo two > '" + src +
      "/c'");
  // newc records the count on every name; the data comes with the last one.
  run("cd '" + src + "' && printf 'a\\nb\\nc\\n' | cpio -o -H newc --quiet > ../x.cpio");
  CHECK(link_counts(tmp / "x.cpio") == std::map<std::string, unsigned>{{"a", 2}, {"b", 2}, {"c", 1}});
  // tar keeps no count: its second name is a link entry.
  run("tar -C '" + src + "' -cf '" + (tmp / "x.tar").string() + "' a b c");
  CHECK(link_counts(tmp / "x.tar") == std::map<std::string, unsigned>{{"a", 0}, {"b", 0}, {"c", 0}});
}
