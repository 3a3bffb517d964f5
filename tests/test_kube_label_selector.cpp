#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "hoist/kube/label_selector.hpp"
#include "hoist/util/error.hpp"

using hoist::LabelRequirement;
using hoist::Labels;
using hoist::LabelSelector;
using nlohmann::json;

namespace {

LabelSelector parse(const char* text) {
  return LabelSelector::from_json(json::parse(text), "sel");
}

}  // namespace

TEST_CASE("matchLabels requires each label with exactly that value", "[label_selector]") {
  const auto selector = parse(R"({"matchLabels": {"role": "server", "zone": "a"}})");
  CHECK(selector.matches(Labels{{"role", "server"}, {"zone", "a"}, {"other", "x"}}));
  CHECK_FALSE(selector.matches(Labels{{"role", "server"}}));
  CHECK_FALSE(selector.matches(Labels{{"role", "agent"}, {"zone", "a"}}));
}

TEST_CASE("In, NotIn, Exists and DoesNotExist follow Kubernetes semantics", "[label_selector]") {
  const auto in = parse(R"({"matchExpressions": [{"key": "k", "operator": "In", "values": ["a", "b"]}]})");
  CHECK(in.matches(Labels{{"k", "b"}}));
  CHECK_FALSE(in.matches(Labels{{"k", "c"}}));
  CHECK_FALSE(in.matches(Labels{}));

  // NotIn holds when the key is absent: that is how SUC's "NotIn disabled" lets
  // unlabeled nodes through.
  const auto not_in = parse(R"({"matchExpressions": [{"key": "k", "operator": "NotIn", "values": ["a"]}]})");
  CHECK(not_in.matches(Labels{}));
  CHECK(not_in.matches(Labels{{"k", "b"}}));
  CHECK_FALSE(not_in.matches(Labels{{"k", "a"}}));

  const auto exists = parse(R"({"matchExpressions": [{"key": "k", "operator": "Exists"}]})");
  CHECK(exists.matches(Labels{{"k", ""}}));
  CHECK_FALSE(exists.matches(Labels{}));

  const auto absent = parse(R"({"matchExpressions": [{"key": "k", "operator": "DoesNotExist", "values": []}]})");
  CHECK(absent.matches(Labels{}));
  CHECK_FALSE(absent.matches(Labels{{"k", "x"}}));
}

TEST_CASE("an absent selector selects nothing and an empty one everything", "[label_selector]") {
  const auto nothing = LabelSelector::from_json(json(), "sel");
  CHECK(nothing.selects_nothing());
  CHECK_FALSE(nothing.matches(Labels{}));
  CHECK_FALSE(nothing.to_query().has_value());
  // Adding to nothing stays nothing, as apimachinery's nothingSelector does.
  auto still_nothing = nothing;
  still_nothing.add(LabelRequirement{"k", LabelRequirement::Operator::exists, {}});
  CHECK(still_nothing.selects_nothing());

  const auto everything = parse("{}");
  CHECK(everything.matches(Labels{}));
  CHECK(everything.to_query() == std::optional<std::string>(""));
}

TEST_CASE("invalid selectors are refused with the place named", "[label_selector]") {
  CHECK_THROWS_WITH(parse(R"({"matchExpressions": [{"key": "k", "operator": "Gt", "values": ["1"]}]})"),
                    "sel.matchExpressions[0]: unknown operator 'Gt' (expected In, NotIn, Exists or DoesNotExist)");
  CHECK_THROWS_WITH(parse(R"({"matchExpressions": [{"key": "k", "operator": "In"}]})"),
                    "sel.matchExpressions[0]: operator on key 'k' needs at least one value");
  CHECK_THROWS_WITH(parse(R"({"matchExpressions": [{"key": "k", "operator": "Exists", "values": ["x"]}]})"),
                    "sel.matchExpressions[0]: operator on key 'k' takes no values");
  CHECK_THROWS_WITH(parse(R"({"matchExpressions": [{"operator": "Exists"}]})"),
                    "sel.matchExpressions[0].key: expected a string, got null");
  CHECK_THROWS_AS(parse(R"({"matchLabels": {"k": 1}})"), hoist::UsageError);
}

TEST_CASE("the query form is canonical: sorted by key, values sorted", "[label_selector]") {
  const auto selector = parse(R"({"matchLabels": {"zone": "a"},
    "matchExpressions": [{"key": "k3s-upgrade", "operator": "NotIn", "values": ["false", "disabled"]},
                         {"key": "k3s-upgrade", "operator": "Exists"},
                         {"key": "k3os.io/mode", "operator": "DoesNotExist"}]})");
  CHECK(selector.to_query() == "!k3os.io/mode,k3s-upgrade notin (disabled,false),k3s-upgrade,zone in (a)");
  CHECK(selector == parse(R"({"matchExpressions": [{"key": "k3os.io/mode", "operator": "DoesNotExist"},
    {"key": "k3s-upgrade", "operator": "NotIn", "values": ["disabled", "false"]},
    {"key": "k3s-upgrade", "operator": "Exists"}], "matchLabels": {"zone": "a"}})"));
}

TEST_CASE("a Plan's node selector adds hostname Exists and the disabled opt-out", "[label_selector]") {
  const auto plan = json::parse(R"({"metadata": {"name": "k3s-server"},
    "spec": {"nodeSelector": {"matchExpressions": [
      {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}]}}})");
  const auto selector = hoist::plan_node_selector(plan);
  CHECK(selector.to_query() ==
        "kubernetes.io/hostname,node-role.kubernetes.io/control-plane,plan.upgrade.cattle.io/k3s-server notin "
        "(disabled)");
  const Labels server{{"kubernetes.io/hostname", "s1"}, {"node-role.kubernetes.io/control-plane", "true"}};
  CHECK(selector.matches(server));
  Labels opted_out = server;
  opted_out["plan.upgrade.cattle.io/k3s-server"] = "disabled";
  CHECK_FALSE(selector.matches(opted_out));
  CHECK_FALSE(selector.matches(Labels{{"node-role.kubernetes.io/control-plane", "true"}}));

  // No nodeSelector: SUC applies the Plan to no node at all.
  CHECK(hoist::plan_node_selector(json::parse(R"({"metadata": {"name": "p"}, "spec": {}})")).selects_nothing());
}
