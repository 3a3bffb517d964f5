// hoist's version orders against the real peers: the systemd scheme against systemd 252's strverscmp_improved(),
// which the static libsystemd.a that hoist links carries under the name scripts/deps gives systemd's internal
// symbols, and the semver scheme against node's semver package (tests/tools/semver_order.js).
#include <algorithm>
#include <catch2/catch.hpp>
#include <compare>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "hoist/model/version.hpp"
#include "hoist/util/error.hpp"
#include "scoped_temp_dir.hpp"

extern "C" int hoist_sd__strverscmp_improved(const char* a, const char* b);

namespace {

/// -1, 0 or 1, as systemd's CMP() returns.
int sign(std::weak_ordering order) {
  if (std::is_lt(order)) {
    return -1;
  }
  return std::is_gt(order) ? 1 : 0;
}

int systemd_order(const std::string& lhs, const std::string& rhs) {
  int result = hoist_sd__strverscmp_improved(lhs.c_str(), rhs.c_str());
  return (result > 0) - (result < 0);
}

/// Every string of 0 to `max_length` bytes over `alphabet`.
std::vector<std::string> all_strings(std::string_view alphabet, std::size_t max_length) {
  std::vector<std::string> strings = {""};
  for (std::size_t begin = 0, length = 1; length <= max_length; ++length) {
    std::size_t end = strings.size();
    for (std::size_t i = begin; i < end; ++i) {
      for (char c : alphabet) {
        strings.push_back(strings[i] + c);
      }
    }
    begin = end;
  }
  return strings;
}

/// The seed of a randomized test: HOIST_TEST_SEED when set, so that a failure can be replayed, else a fresh one;
/// printed either way.
unsigned test_seed(const char* test) {
  const char* given = std::getenv("HOIST_TEST_SEED");
  unsigned seed = given != nullptr ? static_cast<unsigned>(std::strtoul(given, nullptr, 10)) : std::random_device{}();
  std::fprintf(stderr, "%s: HOIST_TEST_SEED=%u\n", test, seed);
  return seed;
}

// Every byte strverscmp_improved treats differently: the separators, both cases, digits (with a leading 0), and
// bytes it skips.
constexpr std::string_view k_alphabet = "09aZz.-^~_+";

}  // namespace

TEST_CASE("systemd: every pair of strings up to 3 bytes orders as systemd 252 orders it", "[version][systemd]") {
  std::vector<std::string> strings = all_strings(k_alphabet, 3);
  REQUIRE(strings.size() == 1 + 11 + 121 + 1331);
  std::size_t disagreements = 0;
  for (const std::string& lhs : strings) {
    for (const std::string& rhs : strings) {
      int expected = systemd_order(lhs, rhs);
      if (sign(hoist::strverscmp_improved(lhs, rhs)) != expected) {
        CAPTURE(lhs, rhs, expected);
        FAIL_CHECK("hoist and systemd disagree");
        if (++disagreements == 10) {
          return;
        }
      }
    }
  }
}

TEST_CASE("systemd: every string up to 4 bytes sorts into systemd 252's order", "[version][systemd]") {
  // 16105 strings; all 259 million pairs would take minutes, so hoist sorts them and systemd checks the sorted
  // list: each string equal to its neighbour within a run hoist calls equal, and below the next run. Both orders
  // being weak orders, that is the same order on every pair.
  std::vector<std::string> strings = all_strings(k_alphabet, 4);
  REQUIRE(strings.size() == 16105);
  std::stable_sort(strings.begin(), strings.end(), [](const std::string& lhs, const std::string& rhs) {
    return std::is_lt(hoist::strverscmp_improved(lhs, rhs));
  });
  std::size_t classes = 1;
  for (std::size_t i = 0; i + 1 < strings.size(); ++i) {
    int hoist_step = sign(hoist::strverscmp_improved(strings[i], strings[i + 1]));
    REQUIRE(hoist_step <= 0);
    CAPTURE(strings[i], strings[i + 1]);
    REQUIRE(systemd_order(strings[i], strings[i + 1]) == hoist_step);
    classes += hoist_step < 0 ? 1 : 0;
  }
  // The order is not trivial: "0", "00" and "000" are one version, and so are "1_" and "1".
  CHECK(classes < strings.size());
  CHECK(classes > 1000);
}

TEST_CASE("systemd: after a '~' at the end, the next byte compares as a C char", "[version][systemd]") {
  // Found by the random differential below: hoist took any byte left there as newer than the end.
  for (const char* text : {"1~\xe9", "1~\x80x", "1~_", "1~!", "1~a"}) {
    CAPTURE(text);
    CHECK(sign(hoist::strverscmp_improved(text, "1~")) == systemd_order(text, "1~"));
    CHECK(sign(hoist::strverscmp_improved("1~", text)) == systemd_order("1~", text));
  }
  if (std::is_signed_v<char>) {
    CHECK(sign(hoist::strverscmp_improved("1~\xe9", "1~")) == -1);
  }
}

TEST_CASE("systemd: random strings of any bytes order as systemd 252 orders them", "[version][systemd]") {
  unsigned seed = test_seed("systemd random differential");
  CAPTURE(seed);
  std::mt19937 random(seed);
  // Mostly bytes that matter, with any other byte but NUL (where C ends the string) mixed in.
  constexpr std::string_view k_common = "0123456789abczABCZ.-^~_+,";
  std::uniform_int_distribution<int> length(0, 12);
  std::uniform_int_distribution<std::size_t> pick(0, k_common.size() - 1);
  std::uniform_int_distribution<int> any_byte(1, 255);
  std::uniform_int_distribution<int> coin(0, 9);
  auto random_string = [&] {
    std::string text;
    for (int n = length(random); n > 0; --n) {
      text += coin(random) == 0 ? static_cast<char>(any_byte(random)) : k_common[pick(random)];
    }
    return text;
  };
  for (int i = 0; i < 1000000; ++i) {
    std::string lhs = random_string();
    // Half the pairs share a prefix, where the interesting steps happen.
    std::string rhs = coin(random) < 5 ? lhs.substr(0, lhs.size() / 2) + random_string() : random_string();
    int expected = systemd_order(lhs, rhs);
    if (sign(hoist::strverscmp_improved(lhs, rhs)) != expected) {
      CAPTURE(lhs, rhs, expected);
      FAIL("hoist and systemd disagree");
    }
  }
}

namespace {

/// A random string that is a semver version or nearly one: the parts of the grammar, each sometimes spelled
/// wrong (leading zeros, empty identifiers, a missing or extra core number, a stray byte). Numbers stay below
/// 2^53, where node's numbers are exact; no whitespace or newline (the file holds one version a line).
std::string random_semver(std::mt19937& random) {
  auto chance = [&](int percent) { return std::uniform_int_distribution<int>(0, 99)(random) < percent; };
  auto one_of = [&](const std::vector<std::string_view>& choices) {
    return std::string(choices[std::uniform_int_distribution<std::size_t>(0, choices.size() - 1)(random)]);
  };
  const std::vector<std::string_view> numbers = {"0", "1", "2", "9", "10", "11", "01", "00", "123456789", ""};
  const std::vector<std::string_view> identifiers = {"alpha", "beta", "rc", "0", "1", "2",  "10",  "01", "a-b", "-",
                                                     "0a",    "a0",   "Z",  "z", "",  "11", "x-1", "--", "A"};
  std::string text = chance(20) ? one_of({"v", "V", "=", "vv"}) : "";
  int core = chance(90) ? 3 : one_of({"2", "4"})[0] - '0';
  for (int i = 0; i < core; ++i) {
    text += (i > 0 ? "." : "") + (chance(85) ? one_of({"0", "1", "2", "10"}) : one_of(numbers));
  }
  for (char separator : {'-', '+'}) {
    if (chance(50)) {
      text += separator;
      for (int n = std::uniform_int_distribution<int>(1, 3)(random), i = 0; i < n; ++i) {
        text +=
            (i > 0 ? "." : "") + (chance(80) ? one_of({"alpha", "beta", "rc", "1", "2", "10"}) : one_of(identifiers));
      }
    }
  }
  if (chance(5)) {
    std::size_t at = std::uniform_int_distribution<std::size_t>(0, text.size())(random);
    text.insert(at, 1, one_of({"_", "~", "!", "+", "-", ".", "\x7f"})[0]);
  }
  return text;
}

/// Runs tests/tools/semver_order.js on `texts`: for each, -1 when semver refuses it, else its precedence rank.
std::vector<long> semver_ranks(const std::vector<std::string>& texts) {
  hoist::test::ScopedTempDir dir;
  std::string input = (dir.path() / "versions").string();
  {
    std::ofstream out(input, std::ios::binary);
    for (const std::string& text : texts) {
      out << text << '\n';
    }
  }
  // Debian's node modules live in /usr/share/nodejs, which only Debian's own node searches by itself.
  std::string command =
      "NODE_PATH=/usr/share/nodejs node " + std::string(HOIST_TEST_DIR) + "/tools/semver_order.js " + input;
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  REQUIRE(pipe != nullptr);
  std::vector<long> ranks;
  char line[64];
  while (std::fgets(line, sizeof line, pipe.get()) != nullptr) {
    ranks.push_back(line[0] == '-' ? -1 : std::strtol(line, nullptr, 10));
  }
  // node and Debian's node-semver are test tools (scripts/apt-packages); without them the output is short.
  INFO("'" << command << "' failed: are node and node-semver installed?");
  REQUIRE(ranks.size() == texts.size());
  return ranks;
}

/// The build metadata of a valid version, empty when it has none.
std::string_view build_of(std::string_view text) {
  std::size_t plus = text.find('+');
  return plus == std::string_view::npos ? std::string_view() : text.substr(plus + 1);
}

}  // namespace

TEST_CASE("semver: validity and order agree with node's semver on random versions", "[version][semver]") {
  unsigned seed = test_seed("semver random differential");
  CAPTURE(seed);
  std::mt19937 random(seed);
  std::vector<std::string> texts;
  for (int i = 0; i < 4000; ++i) {
    texts.push_back(random_semver(random));
  }
  std::vector<long> ranks = semver_ranks(texts);
  std::vector<std::size_t> valid;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    bool hoist_valid = true;
    try {
      hoist::Version::parse(hoist::VersionScheme::semver, texts[i]);
    } catch (const hoist::UsageError&) {
      hoist_valid = false;
    }
    CAPTURE(texts[i], ranks[i]);
    CHECK(hoist_valid == (ranks[i] >= 0));
    if (hoist_valid && ranks[i] >= 0) {
      valid.push_back(i);
    }
  }
  CHECK(valid.size() > 1000);
  // Different precedence: the same direction. Equal precedence: hoist breaks the tie by the build metadata,
  // compared bytewise (no build first), so that == means the same version.
  // Each version parsed once: parsing inside the pair loop made it millions of parses, over the test's timeout
  // under ASan on a loaded machine.
  std::vector<hoist::Version> parsed;
  parsed.reserve(valid.size());
  for (std::size_t a : valid) {
    parsed.push_back(hoist::Version::parse(hoist::VersionScheme::semver, texts[a]));
  }
  for (std::size_t i = 0; i < valid.size(); ++i) {
    const std::size_t a = valid[i];
    for (std::size_t j = 0; j < valid.size(); ++j) {
      const std::size_t b = valid[j];
      std::strong_ordering order = parsed[i] <=> parsed[j];
      std::strong_ordering expected =
          ranks[a] != ranks[b] ? ranks[a] <=> ranks[b] : build_of(texts[a]) <=> build_of(texts[b]);
      if (order != expected) {
        CAPTURE(texts[a], texts[b], ranks[a], ranks[b]);
        FAIL("hoist and node's semver disagree");
      }
    }
  }
}
