#include <catch2/catch.hpp>
#include <optional>
#include <string>
#include <vector>

#include "hoist/model/component.hpp"
#include "hoist/model/version_gate.hpp"
#include "hoist/util/error.hpp"

using hoist::AllowDowngrade;
using hoist::decide_gate;
using hoist::GateDecision;
using hoist::Integrity;
using hoist::Version;
using hoist::VersionScheme;
using hoist::VersionSources;

namespace {

Version k3s(const char* text) {
  return Version::parse(VersionScheme::k3s, text);
}

std::string disagreement(VersionScheme scheme, const VersionSources& sources) {
  try {
    hoist::agree_on_version(scheme, sources, "k3s");
  } catch (const hoist::UsageError& e) {
    return e.what();
  }
  return "(agreed)";
}

}  // namespace

TEST_CASE("the gate installs when nothing is installed or the target is newer", "[gate]") {
  auto first = decide_gate("k3s", std::nullopt, Integrity::damaged, k3s("v1.30.1+k3s1"), AllowDowngrade::no);
  CHECK(first.decision == GateDecision::install);
  CHECK(first.message == "k3s: nothing installed -> v1.30.1+k3s1 (first install)");
  auto upgrade = decide_gate("k3s", k3s("v1.30.1+k3s1"), Integrity::intact, k3s("v1.30.1+k3s2"), AllowDowngrade::no);
  CHECK(upgrade.decision == GateDecision::install);
  CHECK(upgrade.message == "k3s: v1.30.1+k3s1 -> v1.30.1+k3s2 (upgrade)");
  CHECK(upgrade.changes_host());
}

TEST_CASE("the same version is nothing to do when intact and is repaired when damaged", "[gate]") {
  auto same = decide_gate("k3s", k3s("v1.30.1-k3s1"), Integrity::intact, k3s("v1.30.1+k3s1"), AllowDowngrade::no);
  CHECK(same.decision == GateDecision::unchanged);
  CHECK(same.message == "k3s: already at v1.30.1+k3s1, nothing to do");
  CHECK_FALSE(same.changes_host());
  auto damaged = decide_gate("k3s", k3s("v1.30.1+k3s1"), Integrity::damaged, k3s("v1.30.1+k3s1"), AllowDowngrade::no);
  CHECK(damaged.decision == GateDecision::repair);
  CHECK(damaged.changes_host());
}

TEST_CASE("a downgrade is refused unless allowed", "[gate]") {
  auto refused = decide_gate("k3s", k3s("v1.30.1+k3s1"), Integrity::intact, k3s("v1.29.5+k3s1"), AllowDowngrade::no);
  CHECK(refused.decision == GateDecision::refused);
  CHECK(refused.message ==
        "k3s: refusing to downgrade from v1.30.1+k3s1 to v1.29.5+k3s1 (--allow-downgrade allows it)");
  CHECK_FALSE(refused.changes_host());
  auto allowed = decide_gate("k3s", k3s("v1.30.1+k3s1"), Integrity::intact, k3s("v1.29.5+k3s1"), AllowDowngrade::yes);
  CHECK(allowed.decision == GateDecision::downgrade);
  CHECK(allowed.changes_host());
  // A release candidate is older than its release.
  CHECK(decide_gate("k3s", k3s("v1.28.2+k3s1"), Integrity::intact, k3s("v1.28.2-rc1+k3s1"), AllowDowngrade::no)
            .decision == GateDecision::refused);
}

TEST_CASE("versions from the flag, the SUC env and the payload agree through SUC's munging", "[gate]") {
  auto v = hoist::agree_on_version(VersionScheme::k3s, {"v1.27.4+k3s1", "v1.27.4-k3s1", "v1.27.4+k3s1"}, "k3s");
  CHECK(v.text() == "v1.27.4+k3s1");
  // The env alone gives the canonical (unmunged) k3s spelling, which is the directory name.
  CHECK(hoist::agree_on_version(VersionScheme::k3s, {"", "v1.27.4-k3s1", ""}, "k3s").text() == "v1.27.4+k3s1");
  // semver: the munged env matches the flag's build metadata only through the munging itself.
  CHECK(hoist::agree_on_version(VersionScheme::semver, {"1.2.3+build.5", "1.2.3-build.5", ""}, "k3s").text() ==
        "1.2.3+build.5");
  CHECK(hoist::agree_on_version(VersionScheme::semver, {"v1.2.3", "", ""}, "k3s").text() == "v1.2.3");
}

TEST_CASE("disagreeing or missing versions are usage errors naming the sources", "[gate]") {
  CHECK(disagreement(VersionScheme::k3s, {"v1.27.4+k3s1", "v1.27.5-k3s1", ""}) ==
        "versions disagree for component 'k3s': 'v1.27.4+k3s1' from --version but 'v1.27.5-k3s1' from "
        "SYSTEM_UPGRADE_PLAN_LATEST_VERSION");
  CHECK(disagreement(VersionScheme::semver, {"1.2.3", "", "1.2.4"}) ==
        "versions disagree for component 'k3s': '1.2.4' from the payload's manifest but '1.2.3' from --version");
  CHECK(disagreement(VersionScheme::semver, {"", "", ""}) ==
        "no version for component 'k3s': give --version, or run from a SUC Plan (SYSTEM_UPGRADE_PLAN_LATEST_VERSION)");
  CHECK(disagreement(VersionScheme::semver, {"1.2", "", ""}).ends_with("(--version)"));
  CHECK(disagreement(VersionScheme::systemd, {"previous", "", ""}) ==
        "version 'previous' cannot be used: hoist uses that name on the host");
}

TEST_CASE("under the k3s scheme an upgrade may not skip a Kubernetes minor version unless allowed", "[gate]") {
  using hoist::AllowMinorSkip;
  const auto gate = [](const char* from, const char* to, AllowMinorSkip allow) {
    return decide_gate("k3s", k3s(from), Integrity::intact, k3s(to), AllowDowngrade::no, allow).decision;
  };
  CHECK(gate("v1.29.3+k3s1", "v1.30.0+k3s1", AllowMinorSkip::no) == GateDecision::install);
  CHECK(gate("v1.29.3+k3s1", "v1.29.10+k3s2", AllowMinorSkip::no) == GateDecision::install);
  CHECK(gate("v1.29.3+k3s1", "v1.31.0-rc1+k3s1", AllowMinorSkip::no) == GateDecision::refused);
  CHECK(gate("1.29.3-k3s1", "v1.31.2-k3s1", AllowMinorSkip::no) == GateDecision::refused);
  CHECK(gate("v1.31.2+k3s1", "v2.0.0+k3s1", AllowMinorSkip::no) == GateDecision::refused);
  CHECK(gate("v1.29.3+k3s1", "v1.31.2+k3s1", AllowMinorSkip::yes) == GateDecision::install);
  const auto refused = decide_gate("k3s", k3s("v1.29.3+k3s1"), Integrity::intact, k3s("v1.31.2+k3s1"),
                                   AllowDowngrade::no, AllowMinorSkip::no, "what 'k3s --version' says");
  CHECK(refused.message ==
        "k3s: refusing to skip a minor version from v1.29.3+k3s1 (what 'k3s --version' says) to v1.31.2+k3s1: "
        "Kubernetes upgrades one minor version at a time (--allow-minor-skip allows it)");
  // Other schemes know no minor versions of Kubernetes.
  const Version from = Version::parse(VersionScheme::semver, "1.29.0");
  const Version to = Version::parse(VersionScheme::semver, "1.31.0");
  CHECK(decide_gate("app", from, Integrity::intact, to, AllowDowngrade::no).decision == GateDecision::install);
}

TEST_CASE("the installed version is the first token of a program's output that parses under the scheme", "[gate]") {
  using hoist::first_version_in;
  CHECK(first_version_in("k3s version v1.31.2+k3s1 (6da14b51)\ngo version go1.22.8\n", VersionScheme::k3s)->text() ==
        "v1.31.2+k3s1");
  CHECK(first_version_in("rke2 version v1.30.4+rke2r1 (abc)\n", VersionScheme::k3s)->text() == "v1.30.4+rke2r1");
  CHECK(first_version_in("tool\t1.2.3\r\n", VersionScheme::semver)->text() == "1.2.3");
  CHECK_FALSE(first_version_in("k3s version unknown\n", VersionScheme::k3s));
  CHECK_FALSE(first_version_in("", VersionScheme::k3s));
}

TEST_CASE("the installed-version source takes exec:ARGS or node and nothing else", "[gate]") {
  using hoist::parse_installed_version_from;
  CHECK(parse_installed_version_from("exec:--version").exec_args == std::vector<std::string>{"--version"});
  CHECK_FALSE(parse_installed_version_from("exec:--version").node);
  const auto node = parse_installed_version_from("node");
  CHECK(node.node);
  CHECK(node.given());
  CHECK(node.exec_args.empty());
  CHECK(parse_installed_version_from("exec:version  --short").exec_args ==
        std::vector<std::string>{"version", "--short"});
  CHECK_THROWS_WITH(parse_installed_version_from("exec:"),
                    "invalid installed-version source 'exec:': exec: needs the arguments that make the program print "
                    "its version (e.g. exec:--version)");
  CHECK_THROWS_WITH(parse_installed_version_from("nodes"),
                    "invalid installed-version source 'nodes': expected exec:ARGS (the destination's file run with "
                    "ARGS, e.g. exec:--version) or node (the kubeletVersion of the Node this Job runs on)");
  CHECK_THROWS_WITH(parse_installed_version_from("node:n1"),
                    "invalid installed-version source 'node:n1': expected exec:ARGS (the destination's file run with "
                    "ARGS, e.g. exec:--version) or node (the kubeletVersion of the Node this Job runs on)");
  CHECK_THROWS_WITH(parse_installed_version_from("exec:--version\n"),
                    "invalid installed-version source 'exec:--version\\n': it contains control characters");
}

TEST_CASE("a component with its own version takes only the payload's, and the release's must agree", "[version]") {
  hoist::ComponentSpec own;
  own.name = "config";
  own.payload_version = "7";
  own.version_owner = hoist::VersionOwner::component;
  // --version and the SUC env name the release, not this component: they are not even parsed with its scheme.
  const VersionSources from_own = hoist::version_sources(own, "v1.30.1+k3s1", "v1.30.1-k3s1");
  CHECK(from_own.flag.empty());
  CHECK(from_own.env.empty());
  CHECK(from_own.payload == "7");
  CHECK(hoist::agree_on_version(VersionScheme::systemd, from_own, "config").text() == "7");

  hoist::ComponentSpec release;
  release.name = "k3s";
  release.payload_version = "v1.30.1+k3s1";
  const VersionSources from_release = hoist::version_sources(release, "v1.30.2+k3s1", "v1.30.1-k3s1");
  CHECK(from_release.flag == "v1.30.2+k3s1");
  CHECK(from_release.env == "v1.30.1-k3s1");
  CHECK(from_release.payload == "v1.30.1+k3s1");
  CHECK(disagreement(VersionScheme::k3s, from_release) ==
        "versions disagree for component 'k3s': 'v1.30.1+k3s1' from the payload's manifest but 'v1.30.2+k3s1' from "
        "--version");

  // The command line's component (no manifest) has no payload statement: the flag and the env agree alone.
  hoist::ComponentSpec flags;
  flags.name = "k3s";
  const VersionSources from_flags = hoist::version_sources(flags, "v1.30.1+k3s1", "");
  CHECK(hoist::agree_on_version(VersionScheme::k3s, from_flags, "k3s").text() == "v1.30.1+k3s1");
}
