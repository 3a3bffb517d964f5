#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <set>
#include <string>
#include <vector>

#include "hoist/kube/kube_client.hpp"
#include "hoist/kube/plan_progress.hpp"

using hoist::KubeError;
using hoist::KubeResource;
using hoist::WatchDecoder;
using hoist::WatchEvent;
using nlohmann::json;

namespace {

const std::string k_body = R"({"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"1"}}})"
                           "\n\r\n"
                           R"({"type":"MODIFIED","object":{"metadata":{"name":"b"}}})"
                           "\n"
                           R"({"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"7"}}})"
                           "\n"
                           R"({"type":"DELETED","object":{"metadata":{"name":"a"}}})"
                           "\n";

std::vector<WatchEvent> decode(const std::string& body, size_t chunk) {
  WatchDecoder decoder(KubeResource::nodes(), "https://api.test:6443");
  std::vector<WatchEvent> events;
  for (size_t at = 0; at < body.size(); at += chunk) {
    decoder.feed(std::string_view(body).substr(at, chunk), [&](WatchEvent&& event) { events.push_back(event); });
  }
  return events;
}

KubeError refusal(const std::string& body) {
  try {
    decode(body, body.size());
  } catch (const KubeError& error) {
    return error;
  }
  FAIL("no KubeError for " << body);
  return {KubeError::Kind::unreachable, 0, ""};
}

}  // namespace

TEST_CASE("watch events are decoded the same wherever the chunks are cut", "[kube]") {
  for (size_t chunk = 1; chunk <= k_body.size(); ++chunk) {
    const std::vector<WatchEvent> events = decode(k_body, chunk);
    REQUIRE(events.size() == 4);
    CHECK(events[0].type == WatchEvent::Type::added);
    CHECK(events[0].object["metadata"]["name"] == "a");
    CHECK(events[1].type == WatchEvent::Type::modified);
    CHECK(events[2].type == WatchEvent::Type::bookmark);
    CHECK(events[2].object["metadata"]["resourceVersion"] == "7");
    CHECK(events[3].type == WatchEvent::Type::deleted);
  }
  // An event whose newline has not come yet is held back.
  CHECK(decode(k_body.substr(0, k_body.size() - 1), 5).size() == 3);
}

TEST_CASE("a line that is not a watch event is a bad response naming the watch", "[kube]") {
  for (const std::string line : {"not json", "[1,2]", R"({"type":"ADDED"})", R"({"type":7,"object":{}})"}) {
    const KubeError error = refusal(line + "\n");
    CHECK(error.kind() == KubeError::Kind::bad_response);
    CHECK(error.retryable());
    CHECK_THAT(error.what(), Catch::Contains("watch nodes") && Catch::Contains("https://api.test:6443") &&
                                 Catch::Contains("malformed watch event"));
  }
}

TEST_CASE("an ERROR event becomes the API's error, whatever types its status fields have", "[kube]") {
  const KubeError gone =
      refusal(R"j({"type":"ERROR","object":{"kind":"Status","code":410,"message":"too old resource version: 1 (5)"}})j"
              "\n");
  CHECK(gone.kind() == KubeError::Kind::gone);
  CHECK(gone.status() == 410);
  CHECK_THAT(gone.what(), Catch::Contains("too old resource version"));
  // A code of the wrong type or out of range, a message that is not a string: a 500, not a JSON type error.
  for (const std::string object : {R"({"code":"410","message":5})", R"({"code":1e300})", R"({"code":-1})", "[]",
                                   R"("text")", R"({"code":99999999999999999999})"}) {
    const KubeError error = refusal(R"({"type":"ERROR","object":)" + object + "}\n");
    CHECK(error.kind() == KubeError::Kind::unreachable);
    CHECK(error.status() == 500);
  }
}

TEST_CASE("trim_node keeps only the labels a Plan reads when given their keys", "[kube]") {
  const json full = json::parse(R"({"metadata":{"name":"n1","labels":{"kubernetes.io/hostname":"n1",
    "kubernetes.io/os":"linux","topology.kubernetes.io/zone":"z1","plan.upgrade.cattle.io/server":"h2"}},
    "status":{"nodeInfo":{"kubeletVersion":"v1.30.1+k3s1"}}})");
  hoist::LabelSelector selector = hoist::LabelSelector::everything();
  selector.add({"kubernetes.io/hostname", hoist::LabelRequirement::Operator::exists, {}});
  selector.add({"node-role.kubernetes.io/control-plane", hoist::LabelRequirement::Operator::exists, {}});
  const std::set<std::string> keys = hoist::node_label_keys(selector, "server");
  CHECK(keys == std::set<std::string>{"kubernetes.io/hostname", "node-role.kubernetes.io/control-plane",
                                      "plan.upgrade.cattle.io/server"});
  CHECK(hoist::trim_node(json(full), &keys) ==
        json::parse(R"({"metadata":{"name":"n1","labels":{"kubernetes.io/hostname":"n1",
          "plan.upgrade.cattle.io/server":"h2"}},"status":{"nodeInfo":{"kubeletVersion":"v1.30.1+k3s1"}}})"));
  // Labels of another type than an object are left out with keys as without them.
  CHECK(hoist::trim_node(json::parse(R"({"metadata":{"name":"n2","labels":[1]}})"), &keys) ==
        json::parse(R"({"metadata":{"name":"n2"},"status":{"nodeInfo":{"kubeletVersion":""}}})"));
}

TEST_CASE("trim_node takes any JSON value and keeps only what prepare reads", "[kube]") {
  const json full = json::parse(R"({"metadata":{"name":"n1","labels":{"a":"b"},"annotations":{"x":"y"}},
    "status":{"nodeInfo":{"kubeletVersion":"v1.30.1+k3s1","osImage":"Debian"},"images":[{"names":["big"]}]}})");
  const json trimmed = hoist::trim_node(json(full));
  CHECK(trimmed == json::parse(R"({"metadata":{"name":"n1","labels":{"a":"b"}},
    "status":{"nodeInfo":{"kubeletVersion":"v1.30.1+k3s1"}}})"));
  const hoist::NodeView view = hoist::NodeView::from_json(trimmed);
  CHECK(view.name == "n1");
  CHECK(view.labels.at("a") == "b");
  CHECK(view.kubelet_version == "v1.30.1+k3s1");

  // Wrong types anywhere: no exception from the trim, and a node without a name is refused by from_json.
  for (const std::string text :
       {"[]", "null", R"("node")", R"({"metadata":"n1"})", R"({"metadata":{"name":5,"labels":[1]}})",
        R"({"metadata":{"name":"n2","labels":"x"},"status":{"nodeInfo":[]}})", R"({"status":7})"}) {
    json node = json::parse(text);
    json out;
    REQUIRE_NOTHROW(out = hoist::trim_node(std::move(node)));
    if (text.find("n2") != std::string::npos) {
      const hoist::NodeView named = hoist::NodeView::from_json(out);
      CHECK(named.name == "n2");
      CHECK(named.labels.empty());
      CHECK(named.kubelet_version.empty());
    } else {
      CHECK_THROWS_AS(hoist::NodeView::from_json(out), hoist::Failure);
    }
  }
}
