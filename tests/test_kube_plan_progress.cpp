#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "hoist/kube/plan_progress.hpp"

using hoist::evaluate_plan;
using hoist::NodeMap;
using hoist::NodeView;
using hoist::PlanProgress;
using nlohmann::json;
using State = PlanProgress::State;
using Names = std::vector<std::string>;

namespace {

json server_plan(const json& status) {
  json plan = json::parse(R"({"metadata": {"name": "server"}, "spec": {"version": "v1.30.1+k3s1",
    "nodeSelector": {"matchLabels": {"role": "server"}}}})");
  plan["status"] = status;
  return plan;
}

NodeView node(const std::string& name, const std::string& role, const std::string& hash = "",
              const std::string& kubelet = "v1.30.1+k3s1") {
  NodeView view{name, {{"kubernetes.io/hostname", name}, {"role", role}}, kubelet};
  if (!hash.empty()) {
    view.labels["plan.upgrade.cattle.io/server"] = hash;
  }
  return view;
}

NodeMap nodes(std::initializer_list<NodeView> list) {
  NodeMap map;
  for (const auto& view : list) {
    map.emplace(view.name, view);
  }
  return map;
}

const json k_resolved = json::parse(R"({"latestHash": "h2", "latestVersion": "v1.30.1-k3s1"})");
const json k_resolved_plan = server_plan(k_resolved);

}  // namespace

TEST_CASE("a missing Plan means wait", "[plan_progress]") {
  const auto progress = evaluate_plan("server", nullptr, {}, std::nullopt);
  CHECK(progress.state == State::missing);
  CHECK(progress.summary("server") == "plan 'server' does not exist yet; waiting for it to be created");
}

TEST_CASE("a Plan without latestHash, or whose status lags its spec, is not complete", "[plan_progress]") {
  const auto all_done = nodes({node("s1", "server", "h1")});
  const json unresolved = server_plan(json::object());
  const auto fresh = evaluate_plan("server", &unresolved, all_done, {});
  CHECK(fresh.state == State::unresolved);
  CHECK(fresh.summary("server") ==
        "plan 'server' is not resolved by system-upgrade-controller yet (no status.latestHash yet)");

  // The spec moved to a new version but SUC has not rehashed: every node still
  // carries the old hash, which must not read as done.
  const json stale = json::parse(R"({"latestHash": "h1", "latestVersion": "v1.29.0-k3s1"})");
  const json stale_plan = server_plan(stale);
  const auto lagging = evaluate_plan("server", &stale_plan, all_done, {});
  CHECK(lagging.state == State::unresolved);
  CHECK(lagging.detail == "status.latestVersion 'v1.29.0-k3s1' does not match spec.version 'v1.30.1+k3s1' yet");
}

TEST_CASE("applying nodes and lagging labels keep the Plan waiting", "[plan_progress]") {
  json status = k_resolved;
  status["applying"] = {"s2"};
  const auto map =
      nodes({node("s1", "server", "h2"), node("s2", "server", "h1"), node("s3", "server"), node("a1", "agent")});
  const json applying_plan = server_plan(status);
  const auto applying = evaluate_plan("server", &applying_plan, map, {});
  CHECK(applying.state == State::waiting);
  CHECK(applying.done == Names{"s1"});
  CHECK(applying.pending == Names{"s2", "s3"});
  CHECK(applying.summary("server") == "plan 'server': 1/3 nodes done; applying: s2; waiting for: s2, s3");

  // applying drained to empty while the labels have not caught up yet
  const auto drained = evaluate_plan("server", &k_resolved_plan, map, {});
  CHECK(drained.state == State::waiting);
  CHECK(drained.summary("server") == "plan 'server': 1/3 nodes done; waiting for: s2, s3");

  const auto labeled =
      nodes({node("s1", "server", "h2"), node("s2", "server", "h2"), node("s3", "server", "h2"), node("a1", "agent")});
  const auto complete = evaluate_plan("server", &k_resolved_plan, labeled, {});
  CHECK(complete.complete());
  CHECK(complete.summary("server") == "plan 'server': 3/3 nodes done at hash h2; complete");

  // A label in place is not enough while SUC still lists the node as applying.
  json still_applying = k_resolved;
  still_applying["applying"] = {"s3"};
  const json still_applying_plan = server_plan(still_applying);
  CHECK(evaluate_plan("server", &still_applying_plan, labeled, {}).state == State::waiting);
}

TEST_CASE("a node opted out with 'disabled' is not waited for", "[plan_progress]") {
  const auto progress = evaluate_plan("server", &k_resolved_plan,
                                      nodes({node("s1", "server", "h2"), node("s2", "server", "disabled")}), {});
  CHECK(progress.complete());
  CHECK(progress.done == Names{"s1"});
}

TEST_CASE("nodes without the hostname label are not selected", "[plan_progress]") {
  auto no_hostname = node("s2", "server");
  no_hostname.labels.erase("kubernetes.io/hostname");
  CHECK(evaluate_plan("server", &k_resolved_plan, nodes({node("s1", "server", "h2"), no_hostname}), {}).complete());
}

TEST_CASE("with --node-version, munged kubelet versions are compared", "[plan_progress]") {
  const auto map = nodes({node("s1", "server", "h2", "v1.30.1+k3s1"), node("s2", "server", "h2", "v1.29.0+k3s1")});
  const auto progress = evaluate_plan("server", &k_resolved_plan, map, std::string("v1.30.1-k3s1"));
  CHECK(progress.state == State::waiting);
  CHECK(progress.done == Names{"s1"});
  CHECK(progress.wrong_version == Names{"s2"});
  CHECK(progress.summary("server") ==
        "plan 'server': 1/2 nodes done; waiting for: s2; labeled but on another kubelet version: s2");
  CHECK(evaluate_plan("server", &k_resolved_plan, map, std::nullopt).complete());
}

TEST_CASE("a Plan that selects no node is complete once resolved", "[plan_progress]") {
  json plan = server_plan(k_resolved);
  plan["spec"].erase("nodeSelector");
  CHECK(evaluate_plan("server", &plan, nodes({node("s1", "server")}), {}).complete());
}

TEST_CASE("an invalid node selector is reported and waited on", "[plan_progress]") {
  json plan = server_plan(k_resolved);
  plan["spec"]["nodeSelector"] = json::parse(R"({"matchExpressions": [{"key": "k", "operator": "Gt"}]})");
  const auto progress = evaluate_plan("server", &plan, {}, {});
  CHECK(progress.state == State::invalid);
  CHECK(progress.detail ==
        "plan 'server' spec.nodeSelector.matchExpressions[0]: unknown operator 'Gt' (expected In, NotIn, Exists or "
        "DoesNotExist)");
}

TEST_CASE("a Node object is read with labels and kubelet version", "[plan_progress]") {
  const auto view = NodeView::from_json(json::parse(
      R"({"metadata": {"name": "n1", "labels": {"a": "b"}}, "status": {"nodeInfo": {"kubeletVersion": "v1"}}})"));
  CHECK(view.name == "n1");
  CHECK(view.labels == hoist::Labels{{"a", "b"}});
  CHECK(view.kubelet_version == "v1");
  CHECK_THROWS_WITH(NodeView::from_json(json::parse(R"({"metadata": {}})")),
                    "a node from the API has no metadata.name");
}

TEST_CASE("a Plan object of the wrong shape is judged, never an escaped JSON error", "[plan]") {
  // Found by fuzz/watch_events: a Plan without metadata threw nlohmann's out_of_range.
  const json no_metadata = json::parse(R"({"spec": {"nodeSelector": {"matchLabels": {"role": "server"}}},
    "status": {"latestHash": "h2"}})");
  PlanProgress progress;
  REQUIRE_NOTHROW(progress = evaluate_plan("server", &no_metadata, nodes({node("a", "server", "h2")}), std::nullopt));
  CHECK(progress.state == State::complete);
  for (const std::string text : {"[]", "7", R"("plan")", "null"}) {
    const json plan = json::parse(text);
    REQUIRE_NOTHROW(progress = evaluate_plan("server", &plan, {}, std::nullopt));
    CHECK(progress.state == State::invalid);
    CHECK_THAT(progress.detail, Catch::Contains("not a JSON object"));
  }
}

TEST_CASE("a progress line names at most ten nodes a list, and how many more there are", "[plan_progress]") {
  NodeMap map;
  for (int i = 0; i < 25; ++i) {
    const std::string name = "n" + std::string(i < 10 ? "0" : "") + std::to_string(i);
    map.emplace(name, node(name, "server", i < 3 ? "h2" : ""));
  }
  const auto progress = evaluate_plan("server", &k_resolved_plan, map, {});
  CHECK(progress.pending.size() == 22);
  CHECK(progress.summary("server") ==
        "plan 'server': 3/25 nodes done; waiting for: n03, n04, n05, n06, n07, n08, n09, n10, n11, n12 and 12 more");
}

TEST_CASE("a Plan whose Job failed has failed, with system-upgrade-controller's message", "[plan_progress]") {
  // As SUC's handle_batch.go writes it when a Job's Failed condition is true.
  json status = k_resolved;
  status["applying"] = json::array({"s1"});
  status["conditions"] = json::parse(R"([
    {"type": "LatestResolved", "status": "True", "reason": "Version"},
    {"type": "Complete", "status": "False", "reason": "JobFailed", "lastUpdateTime": "2026-11-20T10:00:00Z",
     "message": "Job system-upgrade/apply-server-on-s1-with-h2 failed on Node s1: DeadlineExceeded: Job was active longer than specified deadline"}])");
  const json plan = server_plan(status);
  const auto progress = evaluate_plan("server", &plan, nodes({node("s1", "server"), node("s2", "server", "h2")}), {});
  CHECK(progress.state == State::failed);
  CHECK_FALSE(progress.complete());
  CHECK(progress.detail ==
        "Job system-upgrade/apply-server-on-s1-with-h2 failed on Node s1: DeadlineExceeded: Job was active longer "
        "than specified deadline");
  CHECK(progress.pending == Names{"s1"});
  CHECK(progress.summary("server") ==
        "plan 'server' has failed: system-upgrade-controller says: Job system-upgrade/apply-server-on-s1-with-h2 "
        "failed on Node s1: DeadlineExceeded: Job was active longer than specified deadline (nodes not done: s1)");
}

TEST_CASE("a Complete condition that is not a failed Job is no failure", "[plan_progress]") {
  for (const char* condition :
       {R"({"type": "Complete", "status": "False", "reason": "SyncJob", "message": ""})",
        R"({"type": "Complete", "status": "False", "reason": "Resolved"})",
        R"({"type": "Complete", "status": "Unknown", "reason": "JobFailed"})",
        R"({"type": "Validated", "status": "False", "reason": "JobFailed"})", R"({"type": 7, "status": []})", "7"}) {
    json status = k_resolved;
    status["applying"] = json::array({"s1"});
    status["conditions"] = json::array({json::parse(condition)});
    const json plan = server_plan(status);
    CHECK(evaluate_plan("server", &plan, nodes({node("s1", "server")}), {}).state == State::waiting);
  }
  // A failure recorded before the spec moved on is not the new version's: the Plan is not resolved yet.
  json stale = json::parse(R"({"latestHash": "h1", "latestVersion": "v1.30.0-k3s1", "conditions": [
    {"type": "Complete", "status": "False", "reason": "JobFailed", "message": "Job x failed"}]})");
  const json plan = server_plan(stale);
  CHECK(evaluate_plan("server", &plan, {}, {}).state == State::unresolved);
}
