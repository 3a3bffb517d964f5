#include <catch2/catch.hpp>
#include <chrono>
#include <nlohmann/json.hpp>

#include "hoist/kube/kured_lock.hpp"
#include "hoist/util/error.hpp"

using hoist::kured_lock_expired;
using hoist::kured_lock_text;
using hoist::KuredLockHolder;
using hoist::parse_kured_lock;

namespace {

std::chrono::system_clock::time_point at(std::time_t seconds) {
  return std::chrono::system_clock::from_time_t(seconds);
}

}  // namespace

TEST_CASE("kured's single lock reads as one holder and writes back in kured's field order", "[kured]") {
  const auto value = parse_kured_lock(
      R"({"nodeID":"node-3","metadata":{"unschedulable":false},"created":"2026-12-06T10:00:00.123456789Z","TTL":0})",
      "ds");
  REQUIRE(value.holders.size() == 1);
  CHECK(value.max_owners == 0);
  CHECK((value.holders[0].node == "node-3" && !value.holders[0].unschedulable && value.holders[0].ttl_ns == 0));
  CHECK(kured_lock_text(value) ==
        R"({"nodeID":"node-3","metadata":{"unschedulable":false},"created":"2026-12-06T10:00:00.123456789Z","TTL":0})");
  // kured before its metadata field wrote none: the node was not cordoned by it.
  CHECK_FALSE(
      parse_kured_lock(R"({"nodeID":"a","created":"2026-12-06T10:00:00Z","TTL":0})", "ds").holders[0].unschedulable);
}

TEST_CASE("kured's multiple lock keeps its places and its holders in order", "[kured]") {
  const std::string text =
      R"({"maxOwners":3,"locks":[{"nodeID":"a","metadata":{"unschedulable":true},"created":"2026-12-06T10:00:00Z","TTL":0},)"
      R"({"nodeID":"b","metadata":{"unschedulable":false},"created":"2026-12-06T11:00:00Z","TTL":60000000000}]})";
  const auto value = parse_kured_lock(text, "ds");
  CHECK(value.max_owners == 3);
  REQUIRE(value.holders.size() == 2);
  CHECK((value.holders[0].unschedulable && value.holders[1].ttl_ns == 60'000'000'000));
  CHECK(kured_lock_text(value) == text);
  // A multiple lock with no holder left: kured writes "locks":null.
  CHECK(parse_kured_lock(R"({"maxOwners":2,"locks":null})", "ds").holders.empty());
}

TEST_CASE("a lock that is not kured's is refused naming where it was read", "[kured]") {
  CHECK_THROWS_WITH(parse_kured_lock("not json", "ds kube-system/kured"),
                    Catch::StartsWith("ds kube-system/kured: not kured's lock ("));
  CHECK_THROWS_WITH(parse_kured_lock(R"({"created":"x"})", "ds"), "ds: a lock without its nodeID");
  CHECK_THROWS_WITH(parse_kured_lock(R"({"locks":[]})", "ds"), "ds: a list of locks without its maxOwners");
  CHECK_THROWS_WITH(parse_kured_lock(R"({"maxOwners":1,"locks":{}})", "ds"), "ds: its locks are not a list");
}

TEST_CASE("a holder expires once its TTL has passed since it was created, and never with a TTL of 0", "[kured]") {
  // 2026-12-06T10:00:00Z is 1796551200 seconds after the epoch.
  KuredLockHolder holder{"a", "2026-12-06T10:00:00Z", 60'000'000'000, false};
  CHECK_FALSE(kured_lock_expired(holder, at(1796551200 + 59)));
  CHECK(kured_lock_expired(holder, at(1796551200 + 60)));
  // The same instant in another zone, and with a fraction.
  holder.created = "2026-12-06T11:00:00.5+01:00";
  CHECK_FALSE(kured_lock_expired(holder, at(1796551200 + 59)));
  CHECK(kured_lock_expired(holder, at(1796551200 + 61)));
  holder.ttl_ns = 0;
  CHECK_FALSE(kured_lock_expired(holder, at(1796551200 + 10'000'000)));
  // A time that does not parse never expires: the lock is kept, as a held lock is safe.
  holder = KuredLockHolder{"a", "yesterday", 1, false};
  CHECK_FALSE(kured_lock_expired(holder, at(1796551200)));
}
