// etcd's member list and a member's status as its JSON gateway answers them.

#include "hoist/kube/etcd_members.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "hoist/util/error.hpp"

using hoist::parse_etcd_member_list;

TEST_CASE("etcd's member list is read as its gateway writes it, members not started and learners included", "[etcd]") {
  // The shape of etcd 3.4's answer (its header trimmed): IDs as decimal strings, a member added but not started
  // with no name and no client URLs.
  const std::string body =
      R"({"header":{"cluster_id":"14841639068965178418","member_id":"10276657743932975437","raft_term":"2"},)"
      R"("members":[{"ID":"10276657743932975437","name":"server-1","peerURLs":["https://10.0.0.1:2380"],)"
      R"("clientURLs":["https://10.0.0.1:2379"]},{"ID":"2","peerURLs":["https://10.0.0.2:2380"]},)"
      R"({"ID":3,"name":"server-3","isLearner":true}]})";
  const auto members = parse_etcd_member_list(body, "etcd at https://127.0.0.1:2379");
  REQUIRE(members.size() == 3);
  CHECK(members[0].id == "10276657743932975437");
  CHECK(members[0].name == "server-1");
  CHECK_FALSE(members[0].learner);
  CHECK(members[1].id == "2");
  CHECK(members[1].name.empty());
  CHECK(members[2].id == "3");
  CHECK(members[2].learner);
}

TEST_CASE("an answer that is not a member list is refused naming where it came from", "[etcd]") {
  const std::string source = "etcd at https://127.0.0.1:2379";
  CHECK_THROWS_WITH(parse_etcd_member_list("404 page not found", source),
                    "etcd at https://127.0.0.1:2379 did not answer with a JSON object");
  CHECK_THROWS_WITH(parse_etcd_member_list(R"({"header":{}})", source),
                    "etcd at https://127.0.0.1:2379 answered without a 'members' array");
  CHECK_THROWS_WITH(parse_etcd_member_list(R"({"members":{"ID":"1"}})", source),
                    "etcd at https://127.0.0.1:2379 answered without a 'members' array");
  CHECK_THROWS_WITH(parse_etcd_member_list(R"({"members":["server-1"]})", source),
                    "etcd at https://127.0.0.1:2379 listed a member that is not an object");
  CHECK_THROWS_AS(parse_etcd_member_list("[]", source), hoist::Failure);
}

TEST_CASE("a member's client URLs are read from the member list", "[etcd]") {
  const auto members = parse_etcd_member_list(
      R"({"members":[{"ID":"1","name":"a","clientURLs":["https://10.0.0.1:2379","https://127.0.0.1:2379"]},)"
      R"({"ID":"2","clientURLs":[]}]})",
      "etcd");
  REQUIRE(members.size() == 2);
  CHECK(members[0].client_urls == std::vector<std::string>{"https://10.0.0.1:2379", "https://127.0.0.1:2379"});
  CHECK(members[1].client_urls.empty());
}

TEST_CASE("a member's status is read as etcd's gateway writes it, its alarms and a missing leader as errors",
          "[etcd]") {
  using hoist::parse_etcd_status;
  // etcd 3.4's answer to POST /v3/maintenance/status (uint64s as decimal strings).
  const auto healthy = parse_etcd_status(
      R"({"header":{"cluster_id":"14841639068965178418","member_id":"10276657743932975437","revision":"5",)"
      R"("raft_term":"2"},"version":"3.4.23","dbSize":"20480","leader":"10276657743932975437","raftIndex":"9",)"
      R"("raftTerm":"2","raftAppliedIndex":"9","dbSizeInUse":"16384"})",
      "etcd at https://127.0.0.1:2379");
  CHECK(healthy.member_id == "10276657743932975437");
  CHECK(healthy.version == "3.4.23");
  CHECK(healthy.leader == "10276657743932975437");
  CHECK(healthy.errors.empty());
  const auto alarmed = parse_etcd_status(R"({"version":"3.5.13","leader":"7","errors":["NOSPACE"]})", "etcd");
  CHECK(alarmed.errors == std::vector<std::string>{"NOSPACE"});
  const auto lost = parse_etcd_status(R"({"version":"3.5.13","leader":"0"})", "etcd");
  CHECK(lost.errors == std::vector<std::string>{"no leader"});
  CHECK_THROWS_WITH(parse_etcd_status(R"({"header":{}})", "etcd at https://10.0.0.2:2379"),
                    "etcd at https://10.0.0.2:2379 answered without its version: not an etcd status");
  CHECK_THROWS_WITH(parse_etcd_status("upstream connect error", "etcd at https://10.0.0.2:2379"),
                    "etcd at https://10.0.0.2:2379 did not answer with a JSON object");
}
