#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "hoist/model/component.hpp"
#include "hoist/model/state.hpp"
#include "hoist/util/error.hpp"
#include "scoped_temp_dir.hpp"

using hoist::ComponentState;
using hoist::HostRoot;
using hoist::StateStore;
using hoist::test::read_text;
using hoist::test::ScopedTempDir;
using hoist::test::write_text;
namespace fs = std::filesystem;

namespace {

ComponentState sample() {
  ComponentState s;
  s.component = "k3s";
  s.kind = "file";
  s.destination = "/usr/local/bin/k3s";
  s.version_scheme = "k3s";
  s.current = "v1.30.1+k3s1";
  s.previous = "v1.29.5+k3s1";
  s.versions = {{"v1.29.5+k3s1", "2026-11-01T10:00:00Z"}, {"v1.30.1+k3s1", "2026-11-21T10:00:00Z"}};
  s.last_result = hoist::LastResult{"upgrade", "unchanged", "v1.30.1+k3s1", "2026-11-22T10:00:00Z", ""};
  s.last_change = hoist::LastResult{"upgrade", "succeeded", "v1.30.1+k3s1", "2026-11-21T10:00:00Z", ""};
  s.boot_id = "0b1c2d3e-0000-4000-8000-000000000000";
  s.pending_reboot = hoist::PendingReboot{"v1.30.1+k3s1", s.boot_id, "2026-11-21T10:00:01Z"};
  s.rollbacks = 2;
  s.rollback = hoist::RollbackIntent{"v1.30.1+k3s1", "v1.29.5+k3s1", "2026-11-21T10:00:02Z", {"k3s.service"}, "", true,
                                     "k3s-rollback", "4a1f"};
  s.last_rollback =
      hoist::RollbackRecord{"v1.30.2+k3s1", "v1.30.1+k3s1", "2026-11-20T10:00:00Z", "k3s-rollback", "39c0"};
  s.switching = hoist::SwitchIntent{"v1.30.2+k3s1", "2026-11-21T10:00:03Z", {"k3s.service"}, {"unit:k3s"}};
  s.staged = hoist::StagedVersion{"v1.30.3+k3s1", "2026-11-21T09:00:00Z", "k3s-server", "7d2e"};
  return s;
}

}  // namespace

TEST_CASE("a saved state loads back field for field", "[state]") {
  ScopedTempDir dir;
  auto root = HostRoot::open(dir.path());
  const StateStore store(*root, "/var/lib/hoist");
  store.save(sample());
  auto loaded = store.load("k3s");
  REQUIRE(loaded.has_value());
  CHECK(hoist::to_json_text(*loaded) == hoist::to_json_text(sample()));
  CHECK(loaded->rollbacks == 2);
  CHECK((loaded->last_change == sample().last_change && loaded->last_change != loaded->last_result));
  CHECK(loaded->rollback->owed_restarts == std::vector<std::string>{"k3s.service"});
  CHECK((loaded->rollback->plan == "k3s-rollback" && loaded->rollback->plan_hash == "4a1f"));
  CHECK((loaded->last_rollback->to == "v1.30.1+k3s1" && loaded->last_rollback->plan_hash == "39c0"));
  CHECK(loaded->switching->owed_health_checks == std::vector<std::string>{"unit:k3s"});
  CHECK((loaded->staged->version == "v1.30.3+k3s1" && loaded->staged->plan == "k3s-server"));
  CHECK(store.components() == std::vector<std::string>{"k3s"});
  CHECK((fs::status(dir / "var/lib/hoist/k3s/state.json").permissions() & fs::perms::all) ==
        (fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read));
}

TEST_CASE("a host without state has no components", "[state]") {
  ScopedTempDir dir;
  auto root = HostRoot::open(dir.path());
  const StateStore store(*root, "/var/lib/hoist");
  CHECK(store.components().empty());
  CHECK_FALSE(store.load("k3s").has_value());
}

TEST_CASE("saving replaces the file atomically and removes stale temporaries", "[state]") {
  ScopedTempDir dir;
  auto root = HostRoot::open(dir.path());
  const StateStore store(*root, "/var/lib/hoist");
  store.save(sample());
  write_text(dir / "var/lib/hoist/k3s/.hoist-tmp.state.json.deadbeef0000", "half-written");
  auto next = sample();
  next.current = "v1.30.2+k3s1";
  store.save(next);
  CHECK(store.load("k3s")->current == "v1.30.2+k3s1");
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir / "var/lib/hoist/k3s")) {
    names.push_back(entry.path().filename().string());
  }
  CHECK(names == std::vector<std::string>{"state.json"});
}

TEST_CASE("a corrupt state file is refused with its path and the reason", "[state]") {
  ScopedTempDir dir;
  auto root = HostRoot::open(dir.path());
  const StateStore store(*root, "/var/lib/hoist");
  const auto path = (dir / "var/lib/hoist/k3s/state.json").string();

  write_text(path, "{\"schema\": 1, \"component\": \"k3s\"");
  CHECK_THROWS_WITH(store.load("k3s"), "corrupt state file '" + path +
                                           "': parse error at line 1, column 33: syntax error while parsing object - "
                                           "unexpected end of input; expected '}'");

  write_text(path, "{\"schema\": 1, \"schema\": 1}");
  CHECK_THROWS_WITH(store.load("k3s"), "corrupt state file '" + path + "': $.schema: duplicate key");

  write_text(path, "{\"schema\": 1e400, \"component\": \"k3s\"}");
  CHECK_THROWS_WITH(store.load("k3s"), "corrupt state file '" + path + "': a number is out of range");

  write_text(path, "{\"schema\": 1, \"component\": 7}");
  CHECK_THROWS_WITH(store.load("k3s"), "corrupt state file '" + path + "': field 'component' must be a string");

  auto other = sample();
  other.component = "rke2";
  write_text(path, hoist::to_json_text(other));
  CHECK_THROWS_WITH(store.load("k3s"), "corrupt state file '" + path + "': it names component 'rke2'");
}

TEST_CASE("a state file from a newer hoist is refused, not overwritten", "[state]") {
  ScopedTempDir dir;
  auto root = HostRoot::open(dir.path());
  const StateStore store(*root, "/var/lib/hoist");
  const auto path = (dir / "var/lib/hoist/k3s/state.json").string();
  write_text(path, "{\"schema\": 2, \"component\": \"k3s\"}");
  CHECK_THROWS_WITH(store.load("k3s"), "state file '" + path +
                                           "' was written by a newer hoist (schema 2, this hoist reads up to 1); "
                                           "refusing to touch it");
  CHECK(read_text(path) == "{\"schema\": 2, \"component\": \"k3s\"}");
  // A schema past int's range is still newer, not wrapped into an older one (found by test_faults.py).
  for (const std::string schema : {"4294967296", "1099511627776", "18446744073709551615"}) {
    write_text(path, "{\"schema\": " + schema + ", \"component\": \"k3s\"}");
    CHECK_THROWS_WITH(store.load("k3s"), "state file '" + path + "' was written by a newer hoist (schema " + schema +
                                             ", this hoist reads up to 1); refusing to touch it");
  }
  for (const std::string schema : {"0", "-1", "-4294967295"}) {
    write_text(path, "{\"schema\": " + schema + ", \"component\": \"k3s\"}");
    CHECK_THROWS_WITH(store.load("k3s"), "corrupt state file '" + path + "': field 'schema' must be at least 1");
  }
}

TEST_CASE("component names are directory-safe", "[state]") {
  for (const char* good : {"k3s", "rke2-server", "sysext.docker", "a", "k3s_agent"}) {
    CHECK_NOTHROW(hoist::validate_component_name(good));
  }
  for (const char* bad : {"", "..", ".hidden", "K3S", "a/b", "-x", "with space"}) {
    CHECK_THROWS_AS(hoist::validate_component_name(bad), hoist::UsageError);
  }
  CHECK_THROWS_WITH(hoist::validate_component_name("a/b"),
                    "invalid component name 'a/b': expected [a-z0-9][a-z0-9._-]*, at most 63 characters");
}

TEST_CASE("the state directory is resolved inside the host root", "[state]") {
  ScopedTempDir dir;
  fs::create_directories(dir / "data/hoist");
  fs::create_directories(dir / "var/lib");
  fs::create_symlink("/data/hoist", dir / "var/lib/hoist");
  auto root = HostRoot::open(dir.path());
  const StateStore store(*root, "/var/lib/hoist");
  store.save(sample());
  CHECK(fs::is_regular_file(dir / "data/hoist/k3s/state.json"));
}

TEST_CASE("a state from before rollbacks were counted reads 0, and a negative count is refused", "[state]") {
  std::string text = hoist::to_json_text(sample());
  const std::string field = ",\n  \"rollbacks\": 2";
  const auto at = text.find(field);
  REQUIRE(at != std::string::npos);
  CHECK(hoist::parse_state(std::string(text).erase(at, field.size()), "s").rollbacks == 0);
  std::string negative = text;
  negative.replace(negative.find("\"rollbacks\": 2"), 14, "\"rollbacks\": -1");
  CHECK_THROWS_WITH(hoist::parse_state(negative, "s"),
                    "corrupt state file 's': field 'rollbacks' must be a non-negative integer");
}

TEST_CASE("the recorded SELinux label loads back, is written only when there is one, and must be a context",
          "[state]") {
  ScopedTempDir dir;
  auto root = HostRoot::open(dir.path());
  const StateStore store(*root, "/var/lib/hoist");
  const auto path = (dir / "var/lib/hoist/k3s/state.json").string();
  auto labelled = sample();
  labelled.selinux_label = "system_u:object_r:container_runtime_exec_t:s0";
  store.save(labelled);
  auto loaded = store.load("k3s");
  REQUIRE(loaded.has_value());
  CHECK(loaded->selinux_label == labelled.selinux_label);
  CHECK(hoist::to_json_text(sample()).find("selinux_label") == std::string::npos);

  std::string text = hoist::to_json_text(labelled);
  text.replace(text.find("system_u"), 8, "system_u\\n");
  write_text(path, text);
  CHECK_THROWS_WITH(store.load("k3s"),
                    "corrupt state file '" + path + "': field 'selinux_label' must be an SELinux context");
}

TEST_CASE("a rollback intent keeps its reason, and one without a reason writes none", "[state]") {
  auto state = sample();
  state.last_rollback.reset();
  state.rollback =
      hoist::RollbackIntent{"v1.30.1+k3s1", "v1.29.5+k3s1", "2026-11-25T00:00:00Z", {}, "health check", true, "", ""};
  const std::string text = hoist::to_json_text(state);
  CHECK(text.find("\"reason\": \"health check\"") != std::string::npos);
  CHECK(hoist::parse_state(text, "s").rollback->reason == "health check");
  state.rollback->reason.clear();
  const std::string plain = hoist::to_json_text(state);
  CHECK(plain.find("\"reason\"") == std::string::npos);
  const auto loaded = hoist::parse_state(plain, "s");
  CHECK((loaded.rollback->from == "v1.30.1+k3s1" && loaded.rollback->reason.empty()));
  // The intent writes no plan of its own when it has none (last_rollback and staged write theirs).
  CHECK_FALSE(nlohmann::json::parse(plain).at("rollback").contains("plan"));
}

TEST_CASE("a state from before the last change was recorded has none, and writes none", "[state]") {
  auto state = sample();
  state.last_change.reset();
  const std::string text = hoist::to_json_text(state);
  CHECK(text.find("last_change") == std::string::npos);
  CHECK_FALSE(hoist::parse_state(text, "s").last_change);
  state.last_change = hoist::LastResult{"upgrade", "succeeded", "1", "2026-11-25T00:00:00Z", ""};
  auto bad = nlohmann::json::parse(hoist::to_json_text(state));
  bad["last_change"].erase("outcome");
  CHECK_THROWS_WITH(hoist::parse_state(bad.dump(), "s"),
                    Catch::Contains("corrupt state file 's' in 'last_change': field 'outcome' must be a string"));
}

TEST_CASE("a state from before rollbacks were recorded has no last rollback", "[state]") {
  auto state = sample();
  state.last_rollback.reset();
  std::string text = hoist::to_json_text(state);
  CHECK(text.find("\"last_rollback\": null") != std::string::npos);
  const std::string key = "  \"last_rollback\": null,\n";
  REQUIRE(text.find(key) != std::string::npos);
  text.erase(text.find(key), key.size());
  CHECK_FALSE(hoist::parse_state(text, "s").last_rollback);
  state.last_rollback = hoist::RollbackRecord{"2", "1", "2026-11-25T00:00:00Z", "", ""};
  CHECK(hoist::parse_state(hoist::to_json_text(state), "s").last_rollback->from == "2");
}

TEST_CASE("a rollback intent that leaves its version out of quarantine says so, and one from before quarantines",
          "[state]") {
  auto state = sample();
  state.rollback =
      hoist::RollbackIntent{"v1.30.1+k3s1", "v1.29.5+k3s1", "2026-11-25T00:00:00Z", {}, "no bus", false, "", ""};
  const std::string text = hoist::to_json_text(state);
  CHECK(text.find("\"quarantine\": false") != std::string::npos);
  CHECK_FALSE(hoist::parse_state(text, "s").rollback->quarantine);
  state.rollback->quarantine = true;
  const std::string plain = hoist::to_json_text(state);
  CHECK(plain.find("\"quarantine\"") == std::string::npos);
  CHECK(hoist::parse_state(plain, "s").rollback->quarantine);
  std::string wrong = text;
  wrong.replace(wrong.find("\"quarantine\": false"), 19, "\"quarantine\": \"no\"");
  CHECK_THROWS_WITH(hoist::parse_state(wrong, "s"),
                    Catch::Contains("in 'rollback': field 'quarantine' must be true or false"));
}

TEST_CASE("a staged record names a version's own name, or the state is corrupt", "[state]") {
  for (const char* version : {"", "../etc", ".hidden", "current", "pre-hoist", "a/b"}) {
    ComponentState state = sample();
    state.staged = hoist::StagedVersion{version, "2026-11-21T09:00:00Z", "", ""};
    INFO(version);
    CHECK_THROWS_WITH(hoist::parse_state(hoist::to_json_text(state), "s.json"),
                      "corrupt state file 's.json' in 'staged': field 'version' must be a version's name");
  }
  ComponentState before = sample();
  before.staged.reset();
  CHECK_FALSE(hoist::parse_state(hoist::to_json_text(before), "s.json").staged.has_value());
}
