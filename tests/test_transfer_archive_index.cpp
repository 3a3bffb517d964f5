// ArchiveIndex: the compact tree of an archive's names that the archive stager checks entries against.

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "archive_index.hpp"
#include "hoist/util/error.hpp"

using hoist::transfer::ArchiveIndex;
using hoist::transfer::EntryState;
using hoist::transfer::Outcome;

namespace {

EntryState of_type(mode_t type, Outcome outcome = Outcome::added, bool owned = false) {
  EntryState state;
  state.type = type;
  state.outcome = outcome;
  state.owned = owned;
  return state;
}

/// The message of the verification error that `check` throws.
template <typename Check>
std::string refusal(Check check) {
  try {
    check();
  } catch (const hoist::Error& e) {
    CHECK(e.code() == hoist::ExitCode::verification);
    return e.what();
  }
  FAIL("nothing was refused");
  return "";
}

}  // namespace

TEST_CASE("the archive index finds every one of 70,000 names, of every length, and nothing else", "[archive-index]") {
  ArchiveIndex index("x.tar");
  // Names of up to 250 bytes fill many 64 KiB chunks of names; the slots grow many times.
  const auto name_of = [](size_t i) {
    return std::to_string(i) + std::string(1 + i % 255, static_cast<char>('a' + i % 26));
  };
  std::vector<std::string> dirs;
  for (size_t d = 0; d < 70; ++d) {
    dirs.push_back("dir" + std::to_string(d) + "/" + name_of(d).substr(0, 200));
    REQUIRE(index.check_parents(dirs.back() + "/x", dirs.back() + "/x").size() == 2);
    index.add("dir" + std::to_string(d), of_type(S_IFDIR));
    index.add(dirs.back(), of_type(S_IFDIR));
  }
  for (size_t i = 0; i < 70'000; ++i) {
    const std::string path = dirs[i % dirs.size()] + "/" + name_of(i).substr(0, 250);
    index.add(path, of_type(i % 3 == 0 ? S_IFLNK : S_IFREG, static_cast<Outcome>(i % 3), i % 2 == 0));
  }
  for (size_t i = 0; i < 70'000; ++i) {
    const std::string path = dirs[i % dirs.size()] + "/" + name_of(i).substr(0, 250);
    const auto id = index.find(path);
    REQUIRE(id);
    const EntryState state = index.state(*id);
    CHECK(state.type == (i % 3 == 0 ? S_IFLNK : S_IFREG));
    CHECK(state.outcome == static_cast<Outcome>(i % 3));
    CHECK(state.owned == (i % 2 == 0));
    CHECK_FALSE(state.implicit);
    // The same name in another directory, or one byte longer, is not there.
    CHECK_FALSE(index.find(dirs[(i + 1) % dirs.size()] + "/" + name_of(i).substr(0, 250)));
    CHECK_FALSE(index.find(path + "x"));
  }
  const auto dir = index.find(dirs[3]);
  REQUIRE(dir);
  CHECK(index.find_child(*dir, name_of(3).substr(0, 250)) == index.find(dirs[3] + "/" + name_of(3).substr(0, 250)));
  CHECK(index.find("") == ArchiveIndex::k_root);
  CHECK(index.find_child(ArchiveIndex::k_root, "dir3") == index.find("dir3"));
  CHECK_FALSE(index.find("dir3/nothing"));
  CHECK_FALSE(index.find("nothing/dir3"));
}

TEST_CASE("the archive index says which parents are missing, and refuses those that are not directories",
          "[archive-index]") {
  ArchiveIndex index("x.tar");
  const std::vector<std::string_view> missing = index.check_parents("a/b/c/file", "./a/b/c/file");
  REQUIRE(missing == std::vector<std::string_view>{"a", "a/b", "a/b/c"});
  EntryState implicit = of_type(S_IFDIR);
  implicit.implicit = true;
  for (size_t i = 0; i < missing.size(); ++i) {
    implicit.dir_record = static_cast<uint32_t>(10 + i);
    index.add(missing[i], implicit);
  }
  index.add("a/b/c/file", of_type(S_IFREG));
  index.add("a/b/c/link", of_type(S_IFLNK));
  // The same directory again passes without a lookup; another one is checked from the root.
  CHECK(index.check_parents("a/b/c/other", "a/b/c/other").empty());
  CHECK(index.check_parents("a/d/e", "a/d/e") == std::vector<std::string_view>{"a/d"});
  index.add("a/d", of_type(S_IFDIR));

  // An implicit directory keeps its record until it is listed itself.
  const auto b = index.find("a/b");
  REQUIRE(b);
  CHECK(index.state(*b).implicit);
  CHECK(index.state(*b).dir_record == 11);
  index.mark_listed(*b);
  CHECK_FALSE(index.state(*b).implicit);

  CHECK(refusal([&] { (void)index.check_parents("a/b/c/link/evil", "a/b/c/link/evil"); }) ==
        "refusing archive entry 'a/b/c/link/evil' in 'x.tar': it passes through 'a/b/c/link', a symlink made earlier "
        "in the archive");
  CHECK(refusal([&] { (void)index.check_parents("a/b/c/file/x", "./a/b/c/file/x"); }) ==
        "refusing archive entry './a/b/c/file/x' in 'x.tar': its parent 'a/b/c/file' is not a directory");
}

TEST_CASE("the archive index checks hard link targets", "[archive-index]") {
  ArchiveIndex index("x.tar");
  EntryState implicit = of_type(S_IFDIR);
  implicit.implicit = true;
  index.add("implicit", implicit);
  index.add("dir", of_type(S_IFDIR));
  index.add("dir/file", of_type(S_IFREG, Outcome::unchanged, true));
  std::string target;
  const EntryState found = index.check_link_target("l", "./dir//file", target);
  CHECK(target == "dir/file");
  CHECK(found.type == S_IFREG);
  CHECK(found.outcome == Outcome::unchanged);
  CHECK(found.owned);
  const std::string prefix = "refusing archive entry 'l' in 'x.tar': it is a hard link to ";
  CHECK(refusal([&] { (void)index.check_link_target("l", "../x", target); }) == prefix + "'../x', outside the payload");
  CHECK(refusal([&] { (void)index.check_link_target("l", ".", target); }) == prefix + "'.', outside the payload");
  CHECK(refusal([&] { (void)index.check_link_target("l", "dir/later", target); }) ==
        prefix + "'dir/later', which is not an earlier entry of the archive");
  CHECK(refusal([&] { (void)index.check_link_target("l", "implicit", target); }) ==
        prefix + "'implicit', which is not an earlier entry of the archive");
  CHECK(refusal([&] { (void)index.check_link_target("l", "dir", target); }) == prefix + "the directory 'dir'");
}
