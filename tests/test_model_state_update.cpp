#include <catch2/catch.hpp>

#include "hoist/model/state_update.hpp"
#include "hoist/util/error.hpp"

using hoist::ComponentState;
using hoist::record_switch;
using hoist::versions_to_collect;

namespace {

ComponentState with_versions(std::vector<std::string> versions, std::string current, std::string previous) {
  ComponentState state;
  state.component = "app";
  for (auto& v : versions) {
    state.versions.push_back({v, "2026-11-01T00:00:00Z"});
  }
  state.current = std::move(current);
  state.previous = std::move(previous);
  return state;
}

std::vector<std::string> names(const ComponentState& state) {
  std::vector<std::string> result;
  for (const auto& r : state.versions) {
    result.push_back(r.version);
  }
  return result;
}

}  // namespace

TEST_CASE("a switch makes the old current previous and appends the new version", "[state_update]") {
  auto state = with_versions({"1.0.0"}, "1.0.0", "");
  record_switch(state, "1.1.0", std::nullopt);
  CHECK(state.current == "1.1.0");
  CHECK(state.previous == "1.0.0");
  CHECK(names(state) == std::vector<std::string>{"1.0.0", "1.1.0"});
  // Going back to a kept version moves it to the end: it is the newest install.
  record_switch(state, "1.0.0", std::nullopt);
  CHECK(state.previous == "1.1.0");
  CHECK(names(state) == std::vector<std::string>{"1.1.0", "1.0.0"});
  // A repair of the current version keeps previous.
  record_switch(state, "1.0.0", std::nullopt);
  CHECK(state.previous == "1.1.0");
}

TEST_CASE("the pre-hoist file becomes previous on the first install", "[state_update]") {
  ComponentState state;
  record_switch(state, "v1.30.1+k3s1", std::string("pre-hoist"));
  CHECK(state.current == "v1.30.1+k3s1");
  CHECK(state.previous == "pre-hoist");
  CHECK(names(state) == std::vector<std::string>{"pre-hoist", "v1.30.1+k3s1"});
}

TEST_CASE("keeping N versions removes the oldest but never current or previous", "[state_update]") {
  auto state = with_versions({"1", "2", "3", "4", "5"}, "5", "4");
  CHECK(versions_to_collect(state, 3) == std::vector<std::string>{"1", "2"});
  CHECK(versions_to_collect(state, 1) == std::vector<std::string>{"1", "2", "3"});
  CHECK(versions_to_collect(state, 5).empty());
  // After a rollback the current one may be the oldest: it stays.
  auto rolled = with_versions({"1", "2", "3", "4"}, "1", "4");
  CHECK(versions_to_collect(rolled, 2) == std::vector<std::string>{"2", "3"});
}

namespace {

void quarantine(ComponentState& state, const std::string& version) {
  state.quarantined.push_back({version, "2026-11-01T00:00:00Z", "rolled back"});
}

}  // namespace

TEST_CASE("keep counts versions that are not quarantined, and quarantined ones go first", "[state_update]") {
  // 1.0.0 -> 1.1.0, rolled back (1.1.0 quarantined), then 1.2.0 and 1.3.0: 1.0.0 stays, 1.1.0 goes.
  auto state = with_versions({"1.0.0", "1.1.0", "1.2.0", "1.3.0"}, "1.3.0", "1.2.0");
  quarantine(state, "1.1.0");
  state.last_rollback = hoist::RollbackRecord{"1.1.0", "1.0.0", "2026-11-01T00:00:00Z", "", ""};
  CHECK(versions_to_collect(state, 3) == std::vector<std::string>{"1.1.0"});
  CHECK(versions_to_collect(state, 4).empty());
  // The version the last rollback landed on stays, even past --keep: here with current and previous, three.
  CHECK(versions_to_collect(state, 1) == std::vector<std::string>{"1.1.0"});
  state.last_rollback.reset();
  CHECK(versions_to_collect(state, 1) == std::vector<std::string>{"1.1.0", "1.0.0"});
  // A quarantined version stays while there is room: the versions not quarantined are what --keep counts.
  auto roomy = with_versions({"1", "2", "3"}, "3", "2");
  quarantine(roomy, "1");
  CHECK(versions_to_collect(roomy, 3).empty());
  CHECK(versions_to_collect(roomy, 2) == std::vector<std::string>{"1"});
  // Several quarantined: oldest first, all of them before any other.
  auto many = with_versions({"1", "2", "3", "4", "5"}, "5", "4");
  quarantine(many, "3");
  quarantine(many, "2");
  CHECK(versions_to_collect(many, 3) == std::vector<std::string>{"2", "3"});
  CHECK(versions_to_collect(many, 1) == std::vector<std::string>{"2", "3", "1"});
  // Right after a rollback, previous is the quarantined version left: the link names it, so it stays.
  auto after = with_versions({"1", "2", "3"}, "2", "3");
  quarantine(after, "3");
  CHECK(versions_to_collect(after, 1) == std::vector<std::string>{"1"});
}

TEST_CASE("a rollback walks back to the newest older version that is not quarantined", "[state_update]") {
  using hoist::walk_back_target;
  auto state = with_versions({"1.0.0", "1.1.0", "1.2.0"}, "1.2.0", "1.1.0");
  state.kind = "tree";
  state.version_scheme = "semver";
  CHECK(walk_back_target(state) == "1.1.0");
  // After that rollback previous is 1.2.0, quarantined: the next one goes further back, never forward.
  state.current = "1.1.0";
  state.previous = "1.2.0";
  quarantine(state, "1.2.0");
  CHECK(walk_back_target(state) == "1.0.0");
  state.current = "1.0.0";
  state.previous = "1.1.0";
  quarantine(state, "1.1.0");
  CHECK_THROWS_WITH(walk_back_target(state),
                    "component 'app' has no kept version older than 1.0.0 that is not quarantined to roll back to "
                    "(kept: 1.0.0, 1.1.0 (quarantined), 1.2.0 (quarantined)); --to VERSION names one");
  // Older by the scheme, not by the order of installation; a quarantined one is passed over.
  auto order = with_versions({"1.10.0", "1.2.0", "1.9.0", "1.3.0", "2.0.0"}, "2.0.0", "1.3.0");
  order.kind = "tree";
  order.version_scheme = "semver";
  CHECK(walk_back_target(order) == "1.10.0");
  quarantine(order, "1.10.0");
  CHECK(walk_back_target(order) == "1.9.0");
  // k3s: the munged and the tag spelling of one release are one version.
  auto k3s = with_versions({"v1.29.5-k3s1", "v1.30.1+k3s1"}, "v1.30.1-k3s1", "v1.29.5-k3s1");
  k3s.kind = "file";
  k3s.version_scheme = "k3s";
  CHECK(walk_back_target(k3s) == "v1.29.5-k3s1");
  // What was there before hoist is older than every version.
  auto adopted = with_versions({"pre-hoist", "1.0.0"}, "1.0.0", "pre-hoist");
  adopted.kind = "file";
  adopted.version_scheme = "semver";
  CHECK(walk_back_target(adopted) == "pre-hoist");
  adopted.current = "pre-hoist";
  CHECK_THROWS(walk_back_target(adopted));
}

TEST_CASE("a sync walks back to its one backup only when it is older and not quarantined", "[state_update]") {
  using hoist::walk_back_target;
  auto sync = with_versions({"1.0.0", "2.0.0"}, "2.0.0", "1.0.0");
  sync.kind = "sync";
  sync.version_scheme = "semver";
  CHECK(walk_back_target(sync) == "1.0.0");
  sync.previous.clear();
  CHECK_THROWS_WITH(walk_back_target(sync), "component 'app' has no previous version to roll back to");
  auto downgraded = with_versions({"2.0.0", "1.0.0"}, "1.0.0", "2.0.0");
  downgraded.kind = "sync";
  downgraded.version_scheme = "semver";
  CHECK_THROWS_WITH(walk_back_target(downgraded),
                    "cannot roll back app: a sync component keeps one backup, of "
                    "2.0.0, which is not older than 1.0.0 (--to 2.0.0 restores it)");
}

TEST_CASE("a switch the host shows passes on what its intent owes, and one it does not show is dropped",
          "[state_update]") {
  using hoist::reconcile_with_host;
  using hoist::Reconciled;
  const hoist::SwitchIntent intent{"1.1.0", "2026-11-01T00:00:00Z", {"k3s.service"}, {"unit:k3s"}};
  auto switched = with_versions({"1.0.0"}, "1.0.0", "");
  switched.owed_restarts = {"a.service", "k3s.service"};
  switched.switching = intent;
  CHECK(reconcile_with_host(switched, "1.1.0") == Reconciled::switched);
  CHECK(switched.current == "1.1.0");
  CHECK(switched.owed_restarts == std::vector<std::string>{"a.service", "k3s.service"});
  CHECK(switched.owed_health_checks == std::vector<std::string>{"unit:k3s"});
  CHECK_FALSE(switched.switching);

  // Killed before its switch (or undone): nothing is owed.
  auto stayed = with_versions({"1.0.0"}, "1.0.0", "");
  stayed.switching = intent;
  CHECK(reconcile_with_host(stayed, "1.0.0") == Reconciled::switch_gone);
  CHECK(stayed.owed_restarts.empty());
  CHECK_FALSE(stayed.switching);

  // A repair of the current version cannot be told apart: owed either way.
  auto repaired = with_versions({"1.1.0"}, "1.1.0", "");
  repaired.switching = intent;
  CHECK(reconcile_with_host(repaired, "1.1.0") == Reconciled::switched);
  CHECK(repaired.owed_restarts == std::vector<std::string>{"k3s.service"});

  // Recorded by the run itself: the intent goes with the record.
  auto recorded = with_versions({"1.0.0"}, "1.0.0", "");
  recorded.switching = intent;
  record_switch(recorded, "1.1.0", std::nullopt);
  CHECK_FALSE(recorded.switching);
}

TEST_CASE("a rollback found switched owes what its intent recorded", "[state_update]") {
  auto state = with_versions({"1.0.0", "1.1.0"}, "1.1.0", "1.0.0");
  state.kind = "tree";
  state.rollback =
      hoist::RollbackIntent{"1.1.0", "1.0.0", "2026-11-01T00:00:00Z", {"k3s.service"}, "", true, "p", "h1"};
  CHECK(hoist::reconcile_with_host(state, "1.0.0") == hoist::Reconciled::rolled_back);
  CHECK(state.current == "1.0.0");
  CHECK(state.owed_restarts == std::vector<std::string>{"k3s.service"});
  CHECK_FALSE(state.rollback);
  // The Plan that began it is recorded, so that its Job run again finds the rollback done.
  CHECK((state.last_rollback->from == "1.1.0" && state.last_rollback->to == "1.0.0"));
  CHECK(hoist::rolled_back_by_plan(state, "p", "h1"));
  CHECK_FALSE(hoist::rolled_back_by_plan(state, "p", "h2"));
  CHECK_FALSE(hoist::rolled_back_by_plan(state, "q", "h1"));
  CHECK_FALSE(hoist::rolled_back_by_plan(state, "", ""));
}

TEST_CASE("a component installed as another kind or at another destination is refused", "[state_update]") {
  hoist::ComponentSpec spec;
  spec.name = "app";
  spec.kind = hoist::ComponentKind::tree;
  spec.destination = "/opt/app";
  auto state = hoist::new_state(spec);
  CHECK_NOTHROW(hoist::check_identity(state, spec));
  spec.kind = hoist::ComponentKind::file;
  CHECK_THROWS_WITH(hoist::check_identity(state, spec),
                    "component 'app' is installed as kind tree at '/opt/app'; refusing to install it as kind file at "
                    "'/opt/app' (use another component name)");
}

TEST_CASE("a switch back with a reason is recorded for it, and a plain rollback as a rollback", "[state_update]") {
  auto state = with_versions({"1.0.0", "2.0.0"}, "2.0.0", "1.0.0");
  state.owed_health_checks = {"unit:k3s"};
  state.last_result = hoist::LastResult{"upgrade", "rolled-back", "2.0.0", "2026-11-25T00:00:00Z", "why; back"};
  auto plain = state;
  state.rollback =
      hoist::RollbackIntent{"2.0.0", "1.0.0", "2026-11-25T00:00:00Z", {}, "health check unit:k3s failed", true, "", ""};
  hoist::record_rollback(state);
  CHECK((state.current == "1.0.0" && state.previous == "2.0.0" && !state.rollback));
  REQUIRE(state.quarantined.size() == 1);
  CHECK(state.quarantined[0].version == "2.0.0");
  CHECK(state.quarantined[0].reason == "health check unit:k3s failed");
  CHECK(state.owed_health_checks.empty());  // owed by the version it left
  CHECK((state.last_result->command == "upgrade" && state.last_result->outcome == "rolled-back" &&
         state.last_result->message == "why; back"));

  plain.rollback = hoist::RollbackIntent{"2.0.0", "1.0.0", "2026-11-25T00:00:00Z", {}, "", true, "", ""};
  hoist::record_rollback(plain);
  CHECK(plain.quarantined.at(0).reason == "rolled back to 1.0.0");
  CHECK(plain.owed_health_checks.empty());
  CHECK((plain.last_result->command == "rollback" && plain.last_result->outcome == "succeeded" &&
         plain.last_result->version == "1.0.0"));
}

TEST_CASE("a switch back replaces the restarts the version it leaves owed, and may leave it out of quarantine",
          "[state_update]") {
  auto state = with_versions({"1.0.0", "2.0.0"}, "2.0.0", "1.0.0");
  state.owed_restarts = {"k3s.service", "other.service"};
  state.rollback =
      hoist::RollbackIntent{"2.0.0", "1.0.0", "2026-11-25T00:00:00Z", {"k3s.service"}, "no system bus", false, "", ""};
  hoist::record_rollback(state);
  CHECK(state.current == "1.0.0");
  CHECK(state.owed_restarts == std::vector<std::string>{"k3s.service"});
  CHECK(state.quarantined.empty());
  CHECK(state.rollbacks == 1);
}

TEST_CASE("the last change is the last result of a run that changed what runs, never of one that did not",
          "[state_update]") {
  hoist::ComponentState state;
  hoist::set_last_result(state, "upgrade", hoist::outcome::k_succeeded, "1.1.0");
  REQUIRE(state.last_change);
  CHECK(state.last_change == state.last_result);
  const auto change = *state.last_change;
  hoist::set_last_result(state, "upgrade", hoist::outcome::k_unchanged, "1.1.0");
  hoist::set_last_result(state, "upgrade", hoist::outcome::k_refused, "1.0.0", "refusing to downgrade");
  hoist::set_last_result(state, "stage", hoist::outcome::k_succeeded, "1.2.0", "staged");
  CHECK(state.last_change == change);
  CHECK(state.last_result->command == "stage");
  hoist::set_last_result(state, "upgrade", hoist::outcome::k_rolled_back, "1.2.0", "health check failed");
  CHECK(state.last_change->outcome == "rolled-back");
  hoist::set_last_result(state, "rollback", hoist::outcome::k_succeeded, "1.0.0");
  CHECK((state.last_change->command == "rollback" && state.last_change->version == "1.0.0"));
}
