#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "hoist/kube/list_pager.hpp"

using hoist::KubeError;
using hoist::list_pages;
using hoist::ObjectList;
using nlohmann::json;

namespace {

using Kind = KubeError::Kind;

/// A server's pages by continue token, and what it answered, in order.
struct FakePages {
  std::map<std::string, ObjectList> pages;
  int expire = 0;  // answer this many continued requests 410 Expired
  std::vector<std::string> asked;

  ObjectList fetch(const std::string& token) {
    asked.push_back(token);
    if (!token.empty() && expire > 0) {
      --expire;
      throw KubeError(Kind::gone, 410, "failed to list nodes on 'https://api.test:6443': 410 Gone: too old");
    }
    return pages.at(token);
  }
};

ObjectList page(std::vector<std::string> names, std::string next, std::string version = "42") {
  ObjectList list;
  list.resource_version = std::move(version);
  list.continue_token = std::move(next);
  for (auto& name : names) {
    list.items.push_back(json{{"metadata", {{"name", name}}}});
  }
  return list;
}

FakePages three_pages() {
  FakePages server;
  server.pages[""] = page({"a", "b"}, "t1");
  server.pages["t1"] = page({"c", "d"}, "t2");
  server.pages["t2"] = page({"e"}, "");
  return server;
}

struct Collected {
  std::vector<std::string> names;
  std::vector<std::string> restarts;
};

std::string run(FakePages& server, Collected& out) {
  return list_pages([&](const std::string& token) { return server.fetch(token); },
                    [&](std::vector<json>&& items) {
                      for (const auto& item : items) {
                        out.names.push_back(item["metadata"]["name"]);
                      }
                    },
                    [&](const KubeError& expired) {
                      out.names.clear();
                      out.restarts.emplace_back(expired.what());
                    },
                    "failed to list nodes");
}

}  // namespace

TEST_CASE("a paged LIST follows each continue token to the last page", "[kube]") {
  FakePages server = three_pages();
  Collected out;
  CHECK(run(server, out) == "42");
  CHECK(server.asked == std::vector<std::string>{"", "t1", "t2"});
  CHECK(out.names == std::vector<std::string>{"a", "b", "c", "d", "e"});
  CHECK(out.restarts.empty());
}

TEST_CASE("a whole list (no continue token) is one request", "[kube]") {
  FakePages server;
  server.pages[""] = page({"a"}, "", "7");
  Collected out;
  CHECK(run(server, out) == "7");
  CHECK(server.asked == std::vector<std::string>{""});
  CHECK(out.names == std::vector<std::string>{"a"});
}

TEST_CASE("an expired continue token starts the list over from its first page", "[kube]") {
  FakePages server = three_pages();
  server.expire = 1;
  Collected out;
  CHECK(run(server, out) == "42");
  CHECK(server.asked == std::vector<std::string>{"", "t1", "", "t1", "t2"});
  // The items of the abandoned pass were dropped: each object once.
  CHECK(out.names == std::vector<std::string>{"a", "b", "c", "d", "e"});
  REQUIRE(out.restarts.size() == 1);
  CHECK_THAT(out.restarts[0], Catch::Contains("410 Gone: too old"));
}

TEST_CASE("continue tokens that keep expiring give up with the 410 after three restarts", "[kube]") {
  FakePages server = three_pages();
  server.expire = 4;
  Collected out;
  try {
    run(server, out);
    FAIL("no KubeError");
  } catch (const KubeError& error) {
    CHECK(error.kind() == Kind::gone);
    CHECK(error.status() == 410);
  }
  CHECK(out.restarts.size() == static_cast<std::size_t>(hoist::k_max_list_restarts));
  CHECK(server.asked == std::vector<std::string>{"", "t1", "", "t1", "", "t1", "", "t1"});
}

TEST_CASE("a 410 on the first page and other errors are not retried by the pager", "[kube]") {
  Collected out;
  for (const Kind kind : {Kind::gone, Kind::unreachable, Kind::forbidden}) {
    int calls = 0;
    const auto fetch = [&](const std::string&) -> ObjectList {
      ++calls;
      throw KubeError(kind, 0, "failed");
    };
    CHECK_THROWS_AS(list_pages(
                        fetch, [](std::vector<json>&&) {}, [](const KubeError&) {}, "failed to list nodes"),
                    KubeError);
    CHECK(calls == 1);
  }
  // After the first page, an error other than 410 is not a restart either.
  FakePages server = three_pages();
  server.pages.erase("t2");
  CHECK_THROWS_AS(run(server, out), std::out_of_range);
  CHECK(out.restarts.empty());
}

TEST_CASE("a continue token that repeats itself is a bad response, not an endless list", "[kube]") {
  FakePages server;
  server.pages[""] = page({"a"}, "same");
  server.pages["same"] = page({"b"}, "same");
  Collected out;
  try {
    run(server, out);
    FAIL("no KubeError");
  } catch (const KubeError& error) {
    CHECK(error.kind() == Kind::bad_response);
    CHECK(std::string(error.what()) ==
          "failed to list nodes: the server answered continue token 'same' with the same token");
  }
  CHECK(server.asked == std::vector<std::string>{"", "same"});
}

TEST_CASE("a LIST body is decoded to its items, resourceVersion and continue token", "[kube]") {
  const ObjectList list = hoist::decode_list(
      R"({"kind":"NodeList","metadata":{"resourceVersion":"12","continue":"c1","remainingItemCount":3},
          "items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}}]})",
      "failed to list nodes");
  CHECK(list.resource_version == "12");
  CHECK(list.continue_token == "c1");
  REQUIRE(list.items.size() == 2);
  CHECK(list.items[1]["metadata"]["name"] == "b");
  CHECK(hoist::decode_list(R"({"items":null})", "failed to list nodes").items.empty());

  // Fields of another type are a bad response, not nlohmann's type_error.
  for (const auto& [body, message] : std::vector<std::pair<std::string, std::string>>{
           {R"({"metadata":{"resourceVersion":12},"items":[]})",
            "failed to list nodes: metadata.resourceVersion of the list is not a string"},
           {R"({"metadata":{"continue":["x"]},"items":[]})",
            "failed to list nodes: metadata.continue of the list is not a string"},
           {R"({"metadata":{},"items":{}})", "failed to list nodes: the response is not a list"},
           {"[1,2]", "failed to list nodes: the response is not a list"}}) {
    try {
      (void)hoist::decode_list(body, "failed to list nodes");
      FAIL("no KubeError for " << body);
    } catch (const KubeError& error) {
      CHECK(error.kind() == Kind::bad_response);
      CHECK(std::string(error.what()) == message);
    }
  }
}
