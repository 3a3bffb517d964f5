#include <algorithm>
#include <catch2/catch.hpp>
#include <compare>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "hoist/model/version.hpp"
#include "hoist/util/error.hpp"

namespace Catch {
template <>
struct StringMaker<hoist::Version> {
  static std::string convert(const hoist::Version& version) { return "'" + version.text() + "'"; }
};
}  // namespace Catch

namespace {

using hoist::Version;
using hoist::VersionScheme;

Version semver(std::string_view text) {
  return Version::parse(VersionScheme::semver, text);
}
Version k3s(std::string_view text) {
  return Version::parse(VersionScheme::k3s, text);
}
Version systemd(std::string_view text) {
  return Version::parse(VersionScheme::systemd, text);
}

template <typename Ordering>
std::string order_name(Ordering order) {
  if (std::is_lt(order)) {
    return "less";
  }
  return std::is_gt(order) ? "greater" : "equal";
}

std::vector<Version> parse_all(VersionScheme scheme, const std::vector<std::string_view>& texts) {
  std::vector<Version> versions;
  versions.reserve(texts.size());
  for (std::string_view text : texts) {
    versions.push_back(Version::parse(scheme, text));
  }
  return versions;
}

/// Each adjacent pair of `texts` (ascending) is ordered, and every pair agrees with the list order.
void check_ascending(VersionScheme scheme, const std::vector<std::string_view>& texts) {
  std::vector<Version> versions = parse_all(scheme, texts);
  for (std::size_t i = 0; i < versions.size(); ++i) {
    for (std::size_t j = i + 1; j < versions.size(); ++j) {
      CAPTURE(versions[i], versions[j]);
      CHECK(order_name(versions[i] <=> versions[j]) == "less");
      CHECK(order_name(versions[j] <=> versions[i]) == "greater");
      CHECK(versions[i] != versions[j]);
    }
  }
}

/// Shuffles `texts` (ascending) with several fixed seeds and checks that std::sort puts them back.
void check_sorts_into(VersionScheme scheme, const std::vector<std::string_view>& texts) {
  std::vector<Version> expected = parse_all(scheme, texts);
  for (unsigned seed = 1; seed <= 20; ++seed) {
    std::vector<Version> shuffled = expected;
    std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(seed));
    std::sort(shuffled.begin(), shuffled.end());
    CAPTURE(seed);
    CHECK(std::equal(shuffled.begin(), shuffled.end(), expected.begin(), expected.end(),
                     [](const Version& lhs, const Version& rhs) { return lhs.text() == rhs.text(); }));
  }
}

/// The laws of a total order over all pairs and triples of `texts`; returns the violations, so that a failure
/// names them instead of adding thousands of assertions.
std::vector<std::string> total_order_violations(VersionScheme scheme, const std::vector<std::string_view>& texts) {
  std::vector<Version> versions = parse_all(scheme, texts);
  std::vector<std::string> violations;
  auto describe = [](const Version& lhs, const Version& rhs, std::string_view law) {
    return "'" + lhs.text() + "' vs '" + rhs.text() + "': " + std::string(law);
  };
  for (const Version& a : versions) {
    const Version& same = a;
    if (!(a == same) || std::is_neq(a <=> same)) {
      violations.push_back(describe(a, a, "not equal to itself"));
    }
    for (const Version& b : versions) {
      std::strong_ordering ab = a <=> b;
      std::strong_ordering ba = b <=> a;
      if ((std::is_lt(ab) && !std::is_gt(ba)) || (std::is_gt(ab) && !std::is_lt(ba)) ||
          (std::is_eq(ab) && !std::is_eq(ba))) {
        violations.push_back(describe(a, b, "not antisymmetric"));
      }
      if ((a == b) != std::is_eq(ab) || (a != b) != std::is_neq(ab) || (a < b) != std::is_lt(ab) ||
          (a >= b) != std::is_gteq(ab)) {
        violations.push_back(describe(a, b, "operators disagree with <=>"));
      }
      for (const Version& c : versions) {
        if (std::is_lteq(ab) && std::is_lteq(b <=> c) && std::is_gt(a <=> c)) {
          violations.push_back(describe(a, c, "<= not transitive through '" + b.text() + "'"));
        }
        if (a == b && b == c && a != c) {
          violations.push_back(describe(a, c, "== not transitive through '" + b.text() + "'"));
        }
      }
    }
  }
  return violations;
}

/// About 40 versions per scheme for the order laws: real releases, the edges of each rule, and distinct
/// spellings of one version.
const std::vector<std::string_view> k_semver_samples = {
    // semver.org's precedence example and numeric pre-release identifiers
    "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1",
    "1.0.0", "1.0.0-0", "1.0.0-0.0", "1.0.0-1", "1.0.0-2", "1.0.0-10", "1.0.0-0a", "1.0.0-RC.1", "1.0.0-a-b",
    // build metadata and the leading v: equal precedence, ordered by the build, v ignored
    "1.0.0-rc.1+build.1", "1.0.0-rc.1+build.2", "v1.0.0", "1.0.0+0", "1.0.0+build", "v1.0.0+build", "1.0.0+build.10",
    "1.0.0+build.9", "1.0.0-alpha+001", "1.0.0-alpha.0valid", "1.2.3----RC-SNAPSHOT.12.9.1--.12+788",
    // numbers
    "0.0.0", "0.0.1", "0.1.0", "1.0.1", "1.1.0", "1.2.3", "v1.2.3", "1.2.3-x.7.z.92", "1.9.0", "1.10.0", "2.0.0",
    "2.0.0-rc.1", "10.0.0", "18446744073709551616.0.0"};
const std::vector<std::string_view> k_k3s_samples = {
    // k3s, in both spellings
    "v1.26.15+k3s1", "v1.27.4+k3s1", "v1.27.4-k3s1", "1.27.4+k3s1", "v1.27.4+k3s2", "v1.27.4-k3s2", "v1.27.5+k3s1",
    "v1.27.10+k3s1", "v1.27.16+k3s1", "v1.28.2+k3s1", "v1.28.2-k3s1", "v1.28.2+k3s2", "v1.29.0+k3s1", "v1.29.1+k3s2",
    "v1.29.15+k3s1", "v1.30.0+k3s1", "v1.30.1+k3s1", "v1.30.1-k3s1", "v1.31.0+k3s1", "v1.31.4+k3s1", "v1.32.0+k3s1",
    // release candidates
    "v1.28.2-rc1+k3s1", "v1.28.2-rc1-k3s1", "v1.28.2-rc2+k3s1", "v1.28.2-rc10+k3s1", "v1.29.0-rc1+rke2r1",
    "v1.30.0-rc1+k3s1", "v1.32.0-rc2+k3s1",
    // RKE2, next to the k3s builds of the same Kubernetes release
    "v1.28.2+rke2r1", "v1.28.2-rke2r1", "v1.29.0+rke2r1", "v1.29.0+rke2r2", "v1.30.1+rke2r1", "v1.30.1+rke2r3",
    "1.30.1-rke2r1",
    // numbers
    "v0.0.0+k3s0", "v1.9.9+k3s9", "v1.10.0+k3s1", "v2.0.0+k3s1", "v1.100.0+k3s1"};
const std::vector<std::string_view> k_systemd_samples = {
    // systemd's own ordered test list
    "~1", "ab", "abb", "abc", "0001", "002", "12", "122", "122.9", "123~rc1", "123", "123-a", "123-a.1", "123-a1",
    "123-a1.1", "123-3", "123-3.1", "123^patch1", "123^1", "123.a-1", "123.1-1", "123a-1", "124",
    // ~ end - ^ . and letters
    "1.0~rc1", "1.0~rc1~git123", "1~", "1~_", "1.0", "1.0-1", "1.0^post", "1.0.1", "A", "a",
    // equivalent to systemd, ordered by their bytes
    "1.01", "1.1", "1_1", "1+1", "1,1", "10.0001", "10.1",
    // systemd's own versions
    "257~rc2", "257", "257.1", "v257"};

/// Runs `parse` and returns the UsageError it throws (failing the test when it throws none).
template <typename Parse>
hoist::UsageError usage_error_of(Parse parse) {
  try {
    parse();
  } catch (const hoist::UsageError& error) {
    return error;
  }
  FAIL("no UsageError thrown");
  throw std::logic_error("unreachable");
}

}  // namespace

// ---- scheme names -------------------------------------------------------------------------------------------

TEST_CASE("each scheme name parses to its scheme and prints back", "[version]") {
  for (VersionScheme scheme : {VersionScheme::semver, VersionScheme::k3s, VersionScheme::systemd}) {
    CHECK(hoist::parse_version_scheme(hoist::to_string(scheme)) == scheme);
  }
  CHECK(hoist::to_string(VersionScheme::semver) == "semver");
  CHECK(hoist::to_string(VersionScheme::k3s) == "k3s");
  CHECK(hoist::to_string(VersionScheme::systemd) == "systemd");
}

TEST_CASE("an unknown scheme name is a usage error that names it", "[version]") {
  REQUIRE_THROWS_WITH(hoist::parse_version_scheme("SemVer"),
                      "unknown version scheme 'SemVer': expected semver, k3s or systemd");
  REQUIRE_THROWS_WITH(hoist::parse_version_scheme(""), "unknown version scheme '': expected semver, k3s or systemd");
  hoist::UsageError error = usage_error_of([] { hoist::parse_version_scheme("rpm"); });
  CHECK(error.code() == hoist::ExitCode::usage);
}

TEST_CASE("comparing versions of two schemes is a logic error", "[version]") {
  Version a = semver("1.27.4");
  Version b = k3s("v1.27.4+k3s1");
  REQUIRE_THROWS_AS(a < b, std::logic_error);
  REQUIRE_THROWS_AS(a == b, std::logic_error);
  REQUIRE_THROWS_WITH(a <=> b, "cannot compare semver version '1.27.4' with k3s version 'v1.27.4+k3s1'");
  REQUIRE_THROWS_AS(systemd("1.27.4") != a, std::logic_error);
}

// ---- k3s ----------------------------------------------------------------------------------------------------

TEST_CASE("k3s: real release tags parse, keep their text, and canonical() is the '+' spelling", "[version][k3s]") {
  struct Case {
    std::string_view text;
    std::string_view canonical;
  };
  const Case cases[] = {
      {"v1.27.4+k3s1", "v1.27.4+k3s1"},
      {"v1.27.4-k3s1", "v1.27.4+k3s1"},
      {"1.27.4+k3s1", "v1.27.4+k3s1"},
      {"1.27.4-k3s1", "v1.27.4+k3s1"},
      {"v1.27.4+k3s2", "v1.27.4+k3s2"},
      {"v1.28.2-rc1+k3s1", "v1.28.2-rc1+k3s1"},
      {"v1.28.2-rc1-k3s1", "v1.28.2-rc1+k3s1"},
      {"v1.29.0+rke2r1", "v1.29.0+rke2r1"},
      {"v1.29.0-rke2r1", "v1.29.0+rke2r1"},
      {"v1.30.1+k3s1", "v1.30.1+k3s1"},
      {"v1.26.15+k3s1", "v1.26.15+k3s1"},
      {"v1.31.0-rc2+rke2r1", "v1.31.0-rc2+rke2r1"},
      {"v1.31.0-rc2-rke2r1", "v1.31.0-rc2+rke2r1"},
      {"v1.32.1+k3s1", "v1.32.1+k3s1"},
      {"v0.0.0+k3s0", "v0.0.0+k3s0"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    Version version = k3s(c.text);
    CHECK(version.scheme() == VersionScheme::k3s);
    CHECK(version.text() == c.text);
    CHECK(version.canonical() == c.canonical);
  }
}

TEST_CASE("k3s: the spellings of one release are equal", "[version][k3s]") {
  const std::vector<std::vector<std::string_view>> groups = {
      {"v1.27.4+k3s1", "v1.27.4-k3s1", "1.27.4+k3s1", "1.27.4-k3s1"},
      {"v1.28.2-rc1+k3s1", "v1.28.2-rc1-k3s1", "1.28.2-rc1+k3s1"},
      {"v1.29.0+rke2r1", "v1.29.0-rke2r1"},
  };
  for (const auto& group : groups) {
    for (std::string_view lhs : group) {
      for (std::string_view rhs : group) {
        CAPTURE(lhs, rhs);
        CHECK(k3s(lhs) == k3s(rhs));
        CHECK(order_name(k3s(lhs) <=> k3s(rhs)) == "equal");
      }
    }
  }
}

TEST_CASE("k3s: the k3sN suffix is a release counter that ranks below patch and above rc", "[version][k3s]") {
  struct Case {
    std::string_view lower;
    std::string_view higher;
  };
  const Case cases[] = {
      {"v1.27.4+k3s1", "v1.27.4+k3s2"},
      {"v1.27.4+k3s2", "v1.27.5+k3s1"},
      {"v1.27.4-k3s2", "v1.27.5+k3s1"},
      {"v1.27.4+k3s9", "v1.27.4+k3s10"},
      {"v1.27.9+k3s1", "v1.27.10+k3s1"},
      {"v1.9.0+k3s1", "v1.10.0+k3s1"},
      {"v1.28.2-rc1+k3s1", "v1.28.2-rc2+k3s1"},
      {"v1.28.2-rc2+k3s1", "v1.28.2+k3s1"},
      {"v1.28.2-rc1-k3s1", "v1.28.2-k3s1"},
      {"v1.28.2-rc2+k3s1", "v1.28.2-rc1+k3s2"},
      {"v1.28.2-rc9+k3s1", "v1.28.2-rc10+k3s1"},
      {"v1.28.2-rc3+k3s1", "v1.28.2+k3s1"},
      {"v1.27.16+k3s1", "v1.28.2-rc1+k3s1"},
      {"v1.29.0+k3s1", "v1.29.0+rke2r1"},
      {"v1.29.0+rke2r1", "v1.29.0+k3s2"},
      {"v1.29.0+rke2r2", "v1.29.1+k3s1"},
      {"v1.29.0+rke2r1", "v1.29.0+rke2r2"},
      {"v1.29.0-rc1+rke2r1", "v1.29.0+k3s1"},
      {"v1.30.1+k3s1", "v2.0.0+k3s1"},
      // A fix of a release is cut as an rc of the next counter after it, in every spelling.
      {"v1.19.3+k3s1", "v1.19.3-rc1+k3s2"},
      {"v1.19.3-k3s1", "v1.19.3-rc1-k3s2"},
      {"v1.19.3-rc1-k3s2", "v1.19.3+k3s2"},
      {"v1.19.3+k3s2", "v1.19.3-rc1+k3s3"},
      {"v1.18.12+rke2r1", "v1.18.12-rc1+rke2r2"},
      {"v1.19.3-rc9+k3s1", "v1.19.3-rc1+k3s2"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.lower, c.higher);
    CHECK(k3s(c.lower) < k3s(c.higher));
    CHECK(k3s(c.higher) > k3s(c.lower));
    CHECK(k3s(c.lower) != k3s(c.higher));
    CHECK(order_name(k3s(c.lower) <=> k3s(c.higher)) == "less");
  }
}

TEST_CASE("k3s: a shuffled list of releases sorts into release order", "[version][k3s]") {
  check_sorts_into(
      VersionScheme::k3s,
      {
          "v1.26.15+k3s1",    "v1.27.4+k3s1",       "v1.27.4+k3s2",  "v1.27.5+k3s1",   "v1.27.16+k3s1",
          "v1.28.2-rc1+k3s1", "v1.28.2-rc2-k3s1",   "v1.28.2+k3s1",  "v1.28.2+rke2r1", "v1.28.2-rc1+k3s2",
          "v1.28.2+k3s2",     "v1.29.0-rc1+rke2r1", "v1.29.0+k3s1",  "v1.29.0+rke2r1", "v1.29.0-rc1-rke2r2",
          "v1.29.0+rke2r2",   "v1.30.1-k3s1",       "v1.30.10+k3s1", "v1.31.0+k3s1",
      });
}

TEST_CASE("k3s: two versions are equal exactly when their canonical spellings are", "[version][k3s]") {
  const std::vector<std::string_view> texts = {"v1.27.4+k3s1",     "v1.27.4-k3s1",     "1.27.4+k3s1",  "v1.27.4+k3s2",
                                               "v1.28.2-rc1+k3s1", "v1.28.2-rc1-k3s1", "v1.28.2+k3s1", "v1.29.0+rke2r1",
                                               "v1.29.0-rke2r1",   "v1.29.0+k3s1"};
  for (std::string_view lhs : texts) {
    for (std::string_view rhs : texts) {
      CAPTURE(lhs, rhs);
      CHECK((k3s(lhs) == k3s(rhs)) == (k3s(lhs).canonical() == k3s(rhs).canonical()));
    }
  }
}

TEST_CASE("k3s: anything but a k3s or RKE2 release tag is a usage error", "[version][k3s]") {
  const std::string_view rejected[] = {
      "",
      "v1.27",
      "v1.27.4",
      "v1.27.4-rc1",
      "v1.27.4+k3s",
      "v1.27.4+k3s01",
      "1.27.4+k3s1x",
      "v1.27.4+k3s1 ",
      " v1.27.4+k3s1",
      "v1.27.4+k3s1\n",
      "V1.27.4+k3s1",
      "v1.27.4+K3S1",
      "v1.27.4_k3s1",
      "v1.27.4+k3s-1",
      "v1.27.4++k3s1",
      "v1.27.4+k3s1+k3s1",
      "v01.27.4+k3s1",
      "v1.027.4+k3s1",
      "v1.27.04+k3s1",
      "v1.27.4.1+k3s1",
      "vv1.27.4+k3s1",
      "v1..4+k3s1",
      "v-1.27.4+k3s1",
      "v1.27.4-rc+k3s1",
      "v1.27.4-rc01+k3s1",
      "v1.27.4+rc1+k3s1",
      "v1.27.4-RC1+k3s1",
      "v1.27.4-beta1+k3s1",
      "v1.27.4+rke2",
      "v1.27.4+rke2r",
      "v1.27.4+rke21",
      "v1.27.4+k3sr1",
      "v1.27.4+k0s1",
      "1.27.4",
  };
  for (std::string_view text : rejected) {
    CAPTURE(text);
    CHECK_THROWS_AS(k3s(text), hoist::UsageError);
  }
}

TEST_CASE("k3s: a parse error names the input and the scheme and says what is wrong", "[version][k3s]") {
  REQUIRE_THROWS_WITH(k3s("v1.27"), "invalid k3s version 'v1.27': expected vMAJOR.MINOR.PATCH[-rcN](+|-)(k3s|rke2r)N");
  REQUIRE_THROWS_WITH(k3s("v1.27.4"),
                      "invalid k3s version 'v1.27.4': expected vMAJOR.MINOR.PATCH[-rcN](+|-)(k3s|rke2r)N");
  REQUIRE_THROWS_WITH(k3s("v1.27.4+k3s01"), "invalid k3s version 'v1.27.4+k3s01': leading zero in '01'");
  REQUIRE_THROWS_WITH(k3s(""), "invalid k3s version '': the version is empty");
  CHECK(usage_error_of([] { k3s("v1.27"); }).code() == hoist::ExitCode::usage);
}

// ---- semver -------------------------------------------------------------------------------------------------

TEST_CASE("semver: the precedence example of semver.org section 11 holds", "[version][semver]") {
  check_ascending(VersionScheme::semver, {"1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta",
                                          "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0"});
  check_ascending(VersionScheme::semver, {"1.0.0", "2.0.0", "2.1.0", "2.1.1"});
}

TEST_CASE("semver: numbers compare numerically, at any size", "[version][semver]") {
  check_ascending(VersionScheme::semver,
                  {"0.0.0", "0.0.1", "0.1.0", "1.2.9", "1.2.10", "1.9.0", "1.10.0", "9.0.0", "10.0.0",
                   "18446744073709551615.0.0", "18446744073709551616.0.0", "99999999999999999999999.0.0"});
}

TEST_CASE("semver: numeric pre-release identifiers compare numerically and rank below alphanumeric ones",
          "[version][semver]") {
  check_ascending(VersionScheme::semver, {"1.0.0-0", "1.0.0-2", "1.0.0-10", "1.0.0-999", "1.0.0-0a", "1.0.0-A",
                                          "1.0.0-RC.1", "1.0.0-a", "1.0.0-a.0", "1.0.0-a.b", "1.0.0-a-b", "1.0.0-rc.9",
                                          "1.0.0-rc.10", "1.0.0-rc.a", "1.0.0-x.7.z.92", "1.0.0"});
}

TEST_CASE("semver: a leading v is accepted and ignored", "[version][semver]") {
  CHECK(semver("v1.2.3") == semver("1.2.3"));
  CHECK(semver("v1.2.3-rc.1+b.7") == semver("1.2.3-rc.1+b.7"));
  CHECK(semver("v1.2.3").text() == "v1.2.3");
  CHECK(semver("v1.2.3").canonical() == "v1.2.3");
  CHECK(semver("v1.2.3") < semver("1.2.4"));
}

TEST_CASE("semver: build metadata does not change precedence and orders equal versions bytewise", "[version][semver]") {
  // Precedence first: the build never lifts a version over one of higher precedence.
  check_ascending(VersionScheme::semver, {"1.0.0-alpha+zzz", "1.0.0-beta+001", "1.0.0+0", "1.0.1+0"});
  // Equal precedence: no build first, then the build strings bytewise ('1' < '9', '2' < 'e', 'B' < 'b').
  check_ascending(VersionScheme::semver, {"1.0.0", "1.0.0+20130313144700", "1.0.0+21AF26D3----117B344092BD",
                                          "1.0.0+build.10", "1.0.0+build.9", "1.0.0+exp.sha.5114f85"});
  check_ascending(VersionScheme::semver, {"1.0.0-alpha", "1.0.0-alpha+001", "1.0.0-alpha+01", "1.0.0-alpha+1"});
  CHECK(semver("1.0.0+abc") == semver("v1.0.0+abc"));
  CHECK(semver("1.0.0+abc") != semver("1.0.0+abd"));
}

TEST_CASE("semver: the valid examples of semver.org's grammar parse", "[version][semver]") {
  const std::string_view accepted[] = {
      "0.0.4",
      "1.2.3",
      "10.20.30",
      "1.1.2-prerelease+meta",
      "1.1.2+meta",
      "1.1.2+meta-valid",
      "1.0.0-alpha",
      "1.0.0-beta",
      "1.0.0-alpha.beta",
      "1.0.0-alpha.beta.1",
      "1.0.0-alpha.1",
      "1.0.0-alpha0.valid",
      "1.0.0-alpha.0valid",
      "1.0.0-alpha-a.b-c-somethinglong+build.1-aef.1-its-okay",
      "1.0.0-rc.1+build.1",
      "2.0.0-rc.1+build.123",
      "1.2.3-beta",
      "10.2.3-DEV-SNAPSHOT",
      "1.2.3-SNAPSHOT-123",
      "2.0.0+build.1848",
      "2.0.1-alpha.1227",
      "1.0.0-alpha+beta",
      "1.2.3----RC-SNAPSHOT.12.9.1--.12+788",
      "1.2.3----R-S.12.9.1--.12+meta",
      "1.2.3----RC-SNAPSHOT.12.9.1--.12",
      "1.0.0+0.build.1-rc.10000aaa-kk-0.1",
      "99999999999999999999999.999999999999999999.99999999999999999",
      "1.0.0-0A.is.legal",
      "1.2.3-01a",
      "1.0.0+01",
      "v0.1.0",
  };
  for (std::string_view text : accepted) {
    CAPTURE(text);
    CHECK(semver(text).text() == text);
  }
}

TEST_CASE("semver: the invalid examples of semver.org's grammar are usage errors", "[version][semver]") {
  const std::string_view rejected[] = {
      "",
      "1",
      "1.2",
      "1.2.3-0123",
      "1.2.3-0123.0123",
      "1.1.2+.123",
      "+invalid",
      "-invalid",
      "-invalid+invalid",
      "-invalid.01",
      "alpha",
      "alpha.beta",
      "alpha.beta.1",
      "alpha.1",
      "alpha+beta",
      "alpha_beta",
      "alpha.",
      "alpha..",
      "beta",
      "1.0.0-alpha_beta",
      "-alpha.",
      "1.0.0-alpha..",
      "1.0.0-alpha..1",
      "1.0.0-alpha...1",
      "1.0.0-alpha....1",
      "1.0.0-alpha.....1",
      "1.0.0-alpha......1",
      "1.0.0-alpha.......1",
      "01.1.1",
      "1.01.1",
      "1.1.01",
      "1.2",
      "1.2.3.DEV",
      "1.2-SNAPSHOT",
      "1.2.31.2.3----RC-SNAPSHOT.12.09.1--..12+788",
      "1.2-RC-SNAPSHOT",
      "-1.0.3-gamma+b7718",
      "+justmeta",
      "9.8.7+meta+meta",
      "9.8.7-whatever+meta+meta",
      "1.2.3-",
      "1.2.3-01",
      "1.2.3+",
      "1.2.3-+build",
      "1.2.3-rc.1.",
      "1.2.3+a..b",
      "1.2.3.4",
      "V1.2.3",
      "v",
      "vv1.2.3",
      " 1.2.3",
      "1.2.3 ",
      "1.2.3\n",
      "1.2.3-\xc3\xa9",
  };
  for (std::string_view text : rejected) {
    CAPTURE(text);
    CHECK_THROWS_AS(semver(text), hoist::UsageError);
  }
}

TEST_CASE("semver: a parse error names the input and the scheme and says what is wrong", "[version][semver]") {
  REQUIRE_THROWS_WITH(semver("1.2"),
                      "invalid semver version '1.2': expected [v]MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD]");
  REQUIRE_THROWS_WITH(semver("01.2.3"), "invalid semver version '01.2.3': leading zero in numeric identifier '01'");
  REQUIRE_THROWS_WITH(semver("1.2.3-rc.01"),
                      "invalid semver version '1.2.3-rc.01': leading zero in numeric identifier '01'");
  REQUIRE_THROWS_WITH(semver("1.2.3-"), "invalid semver version '1.2.3-': empty pre-release identifier");
  REQUIRE_THROWS_WITH(semver("1.2.3+a..b"), "invalid semver version '1.2.3+a..b': empty build identifier");
  REQUIRE_THROWS_WITH(semver("1.2.3-a_b"),
                      "invalid semver version '1.2.3-a_b': pre-release identifier 'a_b' has a character outside "
                      "[0-9A-Za-z-]");
  // Bytes that would garble a log line are escaped, and the quote itself cannot end the quoted text early.
  REQUIRE_THROWS_WITH(semver("1.2.3-'\x1b[2J"),
                      "invalid semver version '1.2.3-\\x27\\x1b[2J': pre-release identifier '\\x27\\x1b[2J' has a "
                      "character outside [0-9A-Za-z-]");
}

TEST_CASE("a version longer than 255 bytes is refused by every scheme, and the message repeats only its start",
          "[version]") {
  std::string longest = "1.2." + std::string(Version::k_max_length - 4, '9');
  CHECK(semver(longest).text() == longest);
  CHECK(systemd(longest).text() == longest);
  std::string too_long = longest + "9";
  std::string shown = "'" + too_long.substr(0, 64) + "...'";
  REQUIRE_THROWS_WITH(semver(too_long), "invalid semver version " + shown + ": longer than 255 bytes");
  REQUIRE_THROWS_WITH(systemd(too_long), "invalid systemd version " + shown + ": longer than 255 bytes");
  std::string too_long_k3s = "v1.27." + std::string(250, '9') + "+k3s1";
  CHECK_THROWS_AS(k3s(too_long_k3s), hoist::UsageError);
}

// ---- systemd ------------------------------------------------------------------------------------------------

TEST_CASE("systemd: ~ sorts before the end of the string, which sorts before - ^ . and alphanumerics",
          "[version][systemd]") {
  check_ascending(VersionScheme::systemd, {"1~1", "1", "1-1", "1^1", "1.1", "1a", "11"});
  check_ascending(VersionScheme::systemd, {"1.0~rc1", "1.0", "1.0-1", "1.0^post", "1.0.1"});
  check_ascending(VersionScheme::systemd, {"1.0~rc1~git123", "1.0~rc1", "1.0~rc1^git1", "1.0~rc2", "1.0"});
}

TEST_CASE("systemd: runs of digits compare numerically, above runs of letters", "[version][systemd]") {
  check_ascending(VersionScheme::systemd, {"21", "122"});
  check_ascending(VersionScheme::systemd, {"1.9", "1.10"});
  check_ascending(VersionScheme::systemd, {"4.999.9", "5.0", "5.5p1", "5.5p2", "5.5p10", "5.6p1", "6.5p1"});
  check_ascending(VersionScheme::systemd, {"xyz.4", "2", "8"});
  check_ascending(VersionScheme::systemd, {"1.0a", "1.0aa", "1.01"});
  check_ascending(VersionScheme::systemd, {"A", "Z", "a", "z", "0"});
  check_ascending(VersionScheme::systemd, {"10a1", "10a2", "10b2"});
  check_ascending(VersionScheme::systemd, {"v256", "v257", "255", "256.7", "257~rc2", "257", "257.1"});
}

TEST_CASE("systemd: the ordered list of systemd's own strverscmp_improved test holds", "[version][systemd]") {
  // test-string-util.c lists these from older to newer, with "" after "~1"; the empty string is not a valid
  // version here, and the raw comparison test below covers it.
  check_ascending(VersionScheme::systemd,
                  {"~1",      "ab",         "abb",   "abc",     "0001",    "002",    "12",       "122",
                   "122.9",   "123~rc1",    "123",   "123-a",   "123-a.1", "123-a1", "123-a1.1", "123-3",
                   "123-3.1", "123^patch1", "123^1", "123.a-1", "123.1-1", "123a-1", "124"});
}

TEST_CASE("systemd: the older/newer pairs of systemd's own strverscmp_improved test hold", "[version][systemd]") {
  struct Case {
    std::string_view older;
    std::string_view newer;
  };
  const Case cases[] = {
      {"123.45-67.88", "123.45-67.89"},
      {"123.45-67.89", "123.45-67.89a"},
      {"123.45-67.ab", "123.45-67.89"},
      {"123.45-67.9", "123.45-67.89"},
      {"123.45-67", "123.45-67.89"},
      {"123.45-66.89", "123.45-67.89"},
      {"123.45-9.99", "123.45-67.89"},
      {"123.42-99.99", "123.45-67.89"},
      {"123-99.99", "123.45-67.89"},
      {"123~rc1-99.99", "123.45-67.89"},
      {"123~rc1-99.99", "123-45.67.89"},
      {"123~rc1-99.99", "123~rc2-67.89"},
      {"123~rc1-99.99", "123^aa2-67.89"},
      {"123~rc1-99.99", "123aa2-67.89"},
      {"123-99.99", "123^aa2-67.89"},
      {"123-99.99", "123aa2-67.89"},
      {"123^45-67.89", "123.45-67.89"},
      {"123^aa1-99.99", "123^aa2-67.89"},
      {"123^aa2-67.89", "123aa2-67.89"},
      {"123.aa2-67.89", "123aa2-67.89"},
      {"123.aa2-67.89", "123.ab2-67.89"},
      // From rpm's rpmvercmp tests as systemd runs them, including where systemd deliberately differs from rpm.
      {"1.0", "1.0^"},
      {"1.0^git1", "1.0^git2"},
      {"1.0^git1", "1.01"},
      {"1.0^20160101", "1.0.1"},
      {"1.0^20160101^git1", "1.0^20160102"},
      {"1.0^git1~pre", "1.0^git1"},
      {"10.1xyz", "10xyz"},
      {"2.0", "2_0"},
      {"1.fc17", "1b.fc17"},
      {"xyz10", "xyz10.1"},
      {"6.0", "6.0.rc1"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.older, c.newer);
    CHECK(order_name(hoist::strverscmp_improved(c.older, c.newer)) == "less");
    CHECK(order_name(hoist::strverscmp_improved(c.newer, c.older)) == "greater");
    CHECK(systemd(c.older) < systemd(c.newer));
  }
}

TEST_CASE("systemd: strverscmp_improved skips other characters, so distinct strings can be equivalent",
          "[version][systemd]") {
  struct Case {
    std::string_view lhs;
    std::string_view rhs;
    std::string_view order;
  };
  const Case cases[] = {
      {"123_aa2-67.89", "123aa+2-67.89", "equal"},
      {"10.0001", "10.1", "equal"},
      {"1.01", "1.1", "equal"},
      {"0_", "0", "equal"},
      {"_0_", "0", "equal"},
      {"0", "0___", "equal"},
      {"1+", "1", "equal"},
      {"+a", "_a", "equal"},
      {"", "_", "equal"},
      {"", "~", "greater"},
      {"~1", "", "less"},
      {"~", "~", "equal"},
      {"123.", "123", "greater"},
      {"12_3", "123", "less"},
      {"12_3", "12", "greater"},
      {"12_3", "12.3", "greater"},
      {"123.0", "123", "greater"},
      {"123_0", "123", "greater"},
      {"123..0", "123.0", "less"},
      {"1.1.\xce\xb1", "1.1.\xce\xb2\xce\xb2", "equal"},
      // After a '~' the rest is not skipped again before the end-of-string check, in systemd as here.
      {"1~_", "1~", "greater"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.lhs, c.rhs);
    CHECK(order_name(hoist::strverscmp_improved(c.lhs, c.rhs)) == c.order);
  }
}

TEST_CASE("systemd: versions equivalent to systemd are ordered by their bytes, so == means the same text",
          "[version][systemd]") {
  check_ascending(VersionScheme::systemd, {"1.01", "1.1"});
  check_ascending(VersionScheme::systemd, {"10.0001", "10.01", "10.1"});
  check_ascending(VersionScheme::systemd, {"1", "1+", "1_"});
  check_ascending(VersionScheme::systemd, {"1+2", "1,2", "1_2"});
  CHECK(systemd("1.1") == systemd("1.1"));
  CHECK(systemd("1.1").canonical() == "1.1");
}

TEST_CASE("systemd: a shuffled list of versions sorts into version order", "[version][systemd]") {
  check_sorts_into(VersionScheme::systemd,
                   {"0.9", "1.0~rc1", "1.0~rc2", "1.0", "1.0-1", "1.0-2", "1.0^20240101", "1.0^20240102", "1.0.1",
                    "1.2", "1.10", "1.10a", "2", "10", "255.4", "256~rc1", "256", "256.1", "257"});
}

TEST_CASE("systemd: a version is 1 to 255 bytes of letters, digits and .~^_,+- with a letter or digit",
          "[version][systemd]") {
  const std::string_view accepted[] = {"1", "A", "v257", "257.1", "1.0~rc1", "1.0^post", "1_2,3+4-5", "~1", "_1_"};
  for (std::string_view text : accepted) {
    CAPTURE(text);
    CHECK(systemd(text).text() == text);
  }
  const std::string_view rejected[] = {"",      " ",       "1.0 ",  " 1.0", "1.0\t", "1.0\n", "1/2",
                                       "1:2.3", "1.0\x7f", "1\xfc", "1\\2", "1'2",   "1*",    "1.0;rm",
                                       "~",     "_",       "-.^",   "~~",   ",+"};
  for (std::string_view text : rejected) {
    CAPTURE(text);
    CHECK_THROWS_AS(systemd(text), hoist::UsageError);
  }
  const std::string with_nul = {'1', '\0', '2'};
  CHECK_THROWS_AS(systemd(with_nul), hoist::UsageError);
}

TEST_CASE("systemd: a parse error names the input and the scheme and says what is wrong", "[version][systemd]") {
  REQUIRE_THROWS_WITH(systemd("1.0 beta"),
                      "invalid systemd version '1.0 beta': byte 0x20 at offset 3 is not one of [0-9A-Za-z.~^_,+-]");
  REQUIRE_THROWS_WITH(systemd("1.0\n"),
                      "invalid systemd version '1.0\\x0a': byte 0x0a at offset 3 is not one of [0-9A-Za-z.~^_,+-]");
  REQUIRE_THROWS_WITH(systemd("257/1"),
                      "invalid systemd version '257/1': byte 0x2f at offset 3 is not one of [0-9A-Za-z.~^_,+-]");
  REQUIRE_THROWS_WITH(systemd(""), "invalid systemd version '': the version is empty");
  REQUIRE_THROWS_WITH(systemd("~"), "invalid systemd version '~': contains no letter or digit");
}

TEST_CASE("systemd: the order is total on every short string over its alphabet", "[version][systemd]") {
  // Exhaustive over all strings of up to three bytes of a representative alphabet: after sorting, every pair
  // agrees with the positions (a strict total order), and strverscmp_improved() alone agrees with the blocks of
  // equivalent neighbours (a total preorder, which the byte tie-break refines without breaking transitivity).
  const std::string alphabet = "0a1B.-^~_";
  std::vector<std::string> texts;
  std::vector<std::string> shorter = {""};
  for (int length = 1; length <= 3; ++length) {
    std::vector<std::string> longer;
    for (const std::string& prefix : shorter) {
      for (char c : alphabet) {
        longer.push_back(prefix + c);
      }
    }
    texts.insert(texts.end(), longer.begin(), longer.end());
    shorter = longer;
  }
  std::vector<Version> versions;
  for (const std::string& text : texts) {
    if (text.find_first_of("0a1B") != std::string::npos) {
      versions.push_back(systemd(text));
    }
  }
  std::stable_sort(versions.begin(), versions.end());
  std::vector<int> block(versions.size(), 0);
  for (std::size_t i = 1; i < versions.size(); ++i) {
    bool newer = std::is_lt(hoist::strverscmp_improved(versions[i - 1].text(), versions[i].text()));
    block[i] = block[i - 1] + (newer ? 1 : 0);
  }
  std::vector<std::string> violations;
  for (std::size_t i = 0; i < versions.size(); ++i) {
    for (std::size_t j = 0; j < versions.size(); ++j) {
      if ((versions[i] <=> versions[j]) != (i <=> j)) {
        violations.push_back("'" + versions[i].text() + "' vs '" + versions[j].text() + "': order");
      }
      if (hoist::strverscmp_improved(versions[i].text(), versions[j].text()) != (block[i] <=> block[j])) {
        violations.push_back("'" + versions[i].text() + "' vs '" + versions[j].text() + "': equivalence");
      }
    }
  }
  CHECK(versions.size() == 664);  // 9 + 81 + 729 strings, less the 5 + 25 + 125 without a letter or digit
  CHECK(violations == std::vector<std::string>{});
}

// ---- order laws ---------------------------------------------------------------------------------------------

TEST_CASE("every scheme's <=> is a total order consistent with ==, over a fixed set of versions", "[version]") {
  SECTION("semver") {
    CHECK(total_order_violations(VersionScheme::semver, k_semver_samples) == std::vector<std::string>{});
  }
  SECTION("k3s") {
    CHECK(total_order_violations(VersionScheme::k3s, k_k3s_samples) == std::vector<std::string>{});
  }
  SECTION("systemd") {
    CHECK(total_order_violations(VersionScheme::systemd, k_systemd_samples) == std::vector<std::string>{});
  }
}
