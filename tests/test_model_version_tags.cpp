// The k3s scheme against the order in which k3s and RKE2 really cut their tags (tests/data/*-tags.txt).
#include <catch2/catch.hpp>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "hoist/model/version.hpp"

namespace {

using hoist::Version;
using hoist::VersionScheme;

struct Tag {
  std::string text;
  bool late = false;  ///< marked "late" in the fixture: cut on a commit dated after later releases of its line
  std::string minor_line;
  std::string patch_line;
  std::string counter;
  bool rc = false;
};

/// The tags of `file` under tests/data, in the file's order.
std::vector<Tag> read_tags(const std::string& file) {
  std::string path = std::string(HOIST_TEST_DIR) + "/data/" + file;
  std::ifstream in(path);
  REQUIRE(in.good());
  static const std::regex k_tag(R"(v(\d+)\.(\d+)\.(\d+)(-rc\d+)?\+(?:k3s|rke2r)(\d+))");
  std::vector<Tag> tags;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line.front() == '#') {
      continue;
    }
    std::istringstream fields(line);
    Tag tag;
    std::string mark;
    fields >> tag.text >> mark;
    CAPTURE(path, line);
    REQUIRE((mark.empty() || mark == "late"));
    std::smatch match;
    REQUIRE(std::regex_match(tag.text, match, k_tag));
    tag.late = mark == "late";
    tag.minor_line = match[1].str() + "." + match[2].str();
    tag.patch_line = tag.minor_line + "." + match[3].str();
    tag.rc = match[4].matched;
    tag.counter = match[5].str();
    tags.push_back(tag);
  }
  return tags;
}

/// SUC's image-tag spelling of a tag: '+' becomes '-'.
std::string munged(std::string text) {
  text.replace(text.find('+'), 1, "-");
  return text;
}

/// Every pair of tags of one minor line that the fixture orders is in the same order in hoist, in both spellings.
/// Not ordered by the fixture: an rc and the release of the same counter (one commit, one date), and a tag marked
/// late against a tag of another patch release. Returns the number of pairs compared.
std::size_t check_release_order(const std::vector<Tag>& tags) {
  std::size_t compared = 0;
  for (std::size_t i = 0; i < tags.size(); ++i) {
    for (std::size_t j = i + 1; j < tags.size(); ++j) {
      const Tag& earlier = tags[i];
      const Tag& later = tags[j];
      if (earlier.minor_line != later.minor_line) {
        continue;  // backports: releases of 1.27.x and 1.28.x interleave in time
      }
      bool same_patch = earlier.patch_line == later.patch_line;
      if (same_patch && earlier.counter == later.counter && earlier.rc != later.rc) {
        continue;
      }
      if (!same_patch && (earlier.late || later.late)) {
        continue;
      }
      CAPTURE(earlier.text, later.text);
      CHECK(Version::parse(VersionScheme::k3s, earlier.text) < Version::parse(VersionScheme::k3s, later.text));
      CHECK(Version::parse(VersionScheme::k3s, munged(earlier.text)) <
            Version::parse(VersionScheme::k3s, munged(later.text)));
      ++compared;
    }
  }
  return compared;
}

}  // namespace

TEST_CASE("k3s: hoist orders RKE2's tags as RKE2 cut them, within each minor line", "[version][k3s]") {
  std::vector<Tag> tags = read_tags("rke2-tags.txt");
  CHECK(tags.size() == 1101);
  // Among them the fixes cut as an rc of the next counter after a release, e.g. v1.18.12-rc1+rke2r2.
  CHECK(check_release_order(tags) == 32819);
}

TEST_CASE("k3s: hoist orders k3s's tags as k3s cut them, within each minor line", "[version][k3s]") {
  std::vector<Tag> tags = read_tags("k3s-tags.txt");
  CHECK(tags.size() == 30);
  // v1.19.3+k3s1, then v1.19.3-rc1+k3s2, then v1.19.3+k3s2; the same for v1.18.10 and v1.17.13.
  CHECK(check_release_order(tags) == 93);
}
