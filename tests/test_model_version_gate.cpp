#include <catch2/catch.hpp>
#include <optional>

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

TEST_CASE("the same version, intact, is nothing to do; damaged, it is repaired", "[gate]") {
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
