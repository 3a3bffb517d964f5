// The phases of `hoist upgrade` one at a time (UpgradeRun), on a scratch host root: what each one reads and
// writes, and what it leaves for the next, in real bytes, links and state files.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "hoist/host/health_check.hpp"
#include "hoist/model/context.hpp"
#include "hoist/model/state.hpp"
#include "hoist/run/upgrade_run.hpp"
#include "hoist/util/error.hpp"
#include "scoped_temp_dir.hpp"
#include "upgrade_phases.hpp"

using hoist::ComponentKind;
using hoist::ComponentSpec;
using hoist::Context;
using hoist::DryRun;
using hoist::ExitCode;
using hoist::GateDecision;
using hoist::HostRoot;
using hoist::StateStore;
using hoist::UpgradeItem;
using hoist::UpgradeOptions;
using hoist::UpgradeRun;
using hoist::VersionSources;
using hoist::test::read_text;
using hoist::test::ScopedTempDir;
using hoist::test::write_text;
namespace fs = std::filesystem;

namespace {

// A host root with a context to run in, and payload trees beside it.
struct Host {
  ScopedTempDir dir;
  fs::path host = dir / "host";
  fs::path payloads = dir / "payloads";
  Context context = [this] {
    fs::create_directories(host);
    Context made;
    made.host.emplace(std::move(HostRoot::open(host).value()));
    made.options.lock_timeout_seconds = 1;
    return made;
  }();
  UpgradeOptions options = [] {
    UpgradeOptions made;
    made.progress = hoist::ProgressStyle::none;
    return made;
  }();

  // A tree payload `name`: bin/app says `content` (with an mtime of its own), etc/conf and the directories are the
  // same in every version, mtimes included, so that a version's changes are bin/app's alone.
  fs::path payload(const std::string& name, const std::string& content) {
    const fs::path root = payloads / name;
    write_text(root / "bin/app", content);
    write_text(root / "etc/conf", "same\n");
    fs::last_write_time(root / "bin/app", fs::file_time_type(std::chrono::seconds(2000 + m_payloads++)));
    for (const char* same : {"etc/conf", "etc", "bin", ""}) {
      fs::last_write_time(root / same, fs::file_time_type(std::chrono::seconds(1000)));
    }
    return root;
  }
  int m_payloads = 0;

  // The tree component `app` at /opt/app, from `source`, at `version`.
  static UpgradeItem app(const fs::path& source, const std::string& version, const fs::path& sums = {}) {
    ComponentSpec spec;
    spec.name = "app";
    spec.kind = ComponentKind::tree;
    spec.source = source;
    spec.destination = "/opt/app";
    spec.sha256sums = sums;
    return hoist::resolve_item(std::move(spec), VersionSources{version, "", ""});
  }

  std::vector<UpgradeItem> items(UpgradeItem item) {
    std::vector<UpgradeItem> all;
    all.push_back(std::move(item));
    return all;
  }

  // A whole run that installs `version` of app with bin/app saying `content`.
  void install(const std::string& version, const std::string& content) {
    REQUIRE(hoist::run_upgrade(context, items(app(payload("v" + version, content), version)), options) == ExitCode::ok);
  }

  [[nodiscard]] hoist::ComponentState state() const { return state_of("app"); }

  [[nodiscard]] hoist::ComponentState state_of(const std::string& name) const {
    auto loaded = StateStore(context.root(), context.options.state_dir).load(name);
    REQUIRE(loaded.has_value());
    return *loaded;
  }

  // Every path under the host with what it is (a link's target, a file's bytes), to compare before and after.
  [[nodiscard]] std::map<std::string, std::string> snapshot() const {
    std::map<std::string, std::string> entries;
    for (const auto& entry : fs::recursive_directory_iterator(host)) {
      const std::string path = fs::relative(entry.path(), host).string();
      if (entry.is_symlink()) {
        entries[path] = "-> " + fs::read_symlink(entry.path()).string();
      } else if (entry.is_regular_file()) {
        entries[path] = read_text(entry.path());
      } else {
        entries[path] = "dir";
      }
    }
    return entries;
  }
};

// sha256sum of "one\n" and "same\n".
constexpr const char* k_sha_one = "2c8b08da5ce60398e1f19af0e5dccc744df274b826abe585eaba68c525434806";
constexpr const char* k_sha_same = "a6328afc76e9db71da297ebff4b0d3e7a7eb3b01d917c05a6573fef121b6ecb6";

std::string link_of(const fs::path& path) {
  REQUIRE(fs::is_symlink(path));
  return fs::read_symlink(path).string();
}

std::set<std::string> names_in(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    names.insert(entry.path().filename().string());
  }
  return names;
}

// The exit code and message of what `phase` throws (hoist::Error), for exact assertions.
template <typename Phase>
std::pair<ExitCode, std::string> error_of(Phase phase) {
  try {
    phase();
  } catch (const hoist::Error& e) {
    return {e.code(), e.what()};
  }
  FAIL("the phase threw nothing");
  return {};
}

// The phases before the switch, in the order a run takes them: the states read, the gate passed, the payload
// verified, what must be written remounted, the leftovers of an earlier run cleaned, the new version staged.
void run_to_staged(UpgradeRun& run) {
  run.read_states();
  REQUIRE(run.gate());
  run.verify();
  run.remount();
  run.clean_leftovers();
  run.stage();
}

}  // namespace

TEST_CASE("the gate refuses an older version with exit code 3, records it and changes nothing else", "[upgrade]") {
  Host h;
  h.install("2.0.0", "two\n");
  UpgradeRun run(h.context, h.items(Host::app(h.payload("v1", "one\n"), "1.0.0")), h.options, DryRun::no);
  run.read_states();
  const auto before = h.snapshot();
  const auto [code, message] = error_of([&] { run.gate(); });
  CHECK(code == ExitCode::refused);
  CHECK(message == "app: refusing to downgrade from 2.0.0 to 1.0.0 (--allow-downgrade allows it)");
  CHECK(run.works()[0].gate.decision == GateDecision::refused);
  const auto state = h.state();
  REQUIRE(state.last_result.has_value());
  CHECK(state.last_result->outcome == "refused");
  CHECK(state.last_result->message == message);
  CHECK(state.current == "2.0.0");
  auto after = h.snapshot();
  after.erase("var/lib/hoist/app/state.json");
  auto expected = before;
  expected.erase("var/lib/hoist/app/state.json");
  CHECK(after == expected);
  CHECK(link_of(h.host / "opt/app/current") == "2.0.0");
}

TEST_CASE("the gate passes a newer version and writes nothing", "[upgrade]") {
  Host h;
  h.install("1.0.0", "one\n");
  UpgradeRun run(h.context, h.items(Host::app(h.payload("v2", "two\n"), "2.0.0")), h.options, DryRun::no);
  run.read_states();
  const auto before = h.snapshot();
  CHECK(run.gate());
  CHECK(run.works()[0].gate.decision == GateDecision::install);
  CHECK(run.works()[0].gate.message == "app: 1.0.0 -> 2.0.0 (upgrade)");
  CHECK(h.snapshot() == before);
}

TEST_CASE("the gate finds nothing to do at the installed version, and the run records it as unchanged", "[upgrade]") {
  Host h;
  h.install("1.0.0", "one\n");
  hoist::RunSummary summary;
  h.options.summary = &summary;
  UpgradeRun run(h.context, h.items(Host::app(h.payload("again", "one\n"), "1.0.0")), h.options, DryRun::no);
  run.read_states();
  const auto before = h.snapshot();
  CHECK_FALSE(run.gate());
  CHECK(run.works()[0].gate.decision == GateDecision::unchanged);
  CHECK(summary.lines == std::vector<std::string>{"app: already at 1.0.0, nothing to do"});
  CHECK(h.snapshot() == before);
  run.finish_unchanged();
  CHECK(h.state().last_result->outcome == "unchanged");
  CHECK(h.state().current == "1.0.0");
  CHECK(names_in(h.host / "opt/app") == std::set<std::string>{"1.0.0", "current"});
  CHECK(read_text(h.host / "opt/app/current/bin/app") == "one\n");
}

TEST_CASE("verify refuses a payload whose sha256 does not match with exit code 5, before anything is written",
          "[upgrade]") {
  Host h;
  const fs::path v1 = h.payload("v1", "one\n");
  const std::string wrong(64, '0');
  write_text(h.dir / "SHA256SUMS", wrong + "  bin/app\n" + std::string(k_sha_same) + "  etc/conf\n");
  UpgradeRun run(h.context, h.items(Host::app(v1, "1.0.0", h.dir / "SHA256SUMS")), h.options, DryRun::no);
  run.read_states();
  REQUIRE(run.gate());
  const auto before = h.snapshot();
  const auto [code, message] = error_of([&] { run.verify(); });
  CHECK(code == ExitCode::verification);
  // The component, its payload and the sums file named before what differs.
  CHECK(message == "app: " + v1.string() + " does not verify against " + (h.dir / "SHA256SUMS").string() +
                       ": checksum mismatch for 'bin/app': expected " + wrong + ", got " + std::string(k_sha_one));
  // A first install: no state to record the failure in, no destination made.
  CHECK(h.snapshot() == before);
  CHECK_FALSE(fs::exists(h.host / "opt"));
  CHECK_FALSE(fs::exists(h.host / "var/lib/hoist/app"));
}

TEST_CASE("verify passes a payload that matches its SHA256SUMS and keeps the sums for the staged copy", "[upgrade]") {
  Host h;
  const fs::path v1 = h.payload("v1", "one\n");
  write_text(h.dir / "SHA256SUMS", std::string(k_sha_one) + "  bin/app\n" + std::string(k_sha_same) + "  etc/conf\n");
  UpgradeRun run(h.context, h.items(Host::app(v1, "1.0.0", h.dir / "SHA256SUMS")), h.options, DryRun::no);
  run.read_states();
  REQUIRE(run.gate());
  const auto before = h.snapshot();
  run.verify();
  CHECK(run.works()[0].sums.has_value());
  CHECK(h.snapshot() == before);
}

TEST_CASE("stage puts the new version beside the old one and leaves the link and the state alone", "[upgrade]") {
  Host h;
  h.install("1.0.0", "one\n");
  const std::string state_before = read_text(h.host / "var/lib/hoist/app/state.json");
  UpgradeRun run(h.context, h.items(Host::app(h.payload("v2", "two\n"), "2.0.0")), h.options, DryRun::no);
  run_to_staged(run);
  CHECK(names_in(h.host / "opt/app") == std::set<std::string>{"1.0.0", "2.0.0", "current"});
  CHECK(read_text(h.host / "opt/app/2.0.0/bin/app") == "two\n");
  CHECK(read_text(h.host / "opt/app/2.0.0/etc/conf") == "same\n");
  CHECK(read_text(h.host / "opt/app/1.0.0/bin/app") == "one\n");
  CHECK(link_of(h.host / "opt/app/current") == "1.0.0");
  CHECK(read_text(h.host / "var/lib/hoist/app/state.json") == state_before);
  CHECK(run.works()[0].stats.files_changed == 1);
  CHECK(run.works()[0].stats.files_unchanged == 3);
}

TEST_CASE("switch saves the intent first, then moves the link by a rename, and the record is still to come",
          "[upgrade]") {
  Host h;
  h.install("1.0.0", "one\n");
  h.options.health.checks.push_back(hoist::parse_health_check("exec:/bin/true"));
  UpgradeRun run(h.context, h.items(Host::app(h.payload("v2", "two\n"), "2.0.0")), h.options, DryRun::no);
  run_to_staged(run);
  const struct stat old_link = [&] {
    struct stat st {};
    REQUIRE(::lstat((h.host / "opt/app/current").c_str(), &st) == 0);
    return st;
  }();
  run.switch_over();
  CHECK(link_of(h.host / "opt/app/current") == "2.0.0");
  CHECK(link_of(h.host / "opt/app/previous") == "1.0.0");
  CHECK(read_text(h.host / "opt/app/current/bin/app") == "two\n");
  // Replaced by a rename of a new link, not rewritten in place; no temporary link is left beside it.
  struct stat new_link {};
  REQUIRE(::lstat((h.host / "opt/app/current").c_str(), &new_link) == 0);
  CHECK(new_link.st_ino != old_link.st_ino);
  CHECK(names_in(h.host / "opt/app") == std::set<std::string>{"1.0.0", "2.0.0", "current", "previous"});
  // On disk: the intent, with what the switch owes; the state still names the old version as current.
  const auto state = h.state();
  CHECK(state.current == "1.0.0");
  REQUIRE(state.switching.has_value());
  CHECK(state.switching->to == "2.0.0");
  CHECK(state.switching->owed_health_checks == std::vector<std::string>{"exec:/bin/true"});
  CHECK(state.switching->owed_restarts.empty());
  CHECK(state.owed_health_checks.empty());
}

TEST_CASE("a failure after the switch is undone: the link goes back and the staged version is removed", "[upgrade]") {
  Host h;
  h.install("1.0.0", "one\n");
  UpgradeRun run(h.context, h.items(Host::app(h.payload("v2", "two\n"), "2.0.0")), h.options, DryRun::no);
  run_to_staged(run);
  run.switch_over();
  run.undo(hoist::Failure("disk on fire"));
  CHECK(link_of(h.host / "opt/app/current") == "1.0.0");
  CHECK(names_in(h.host / "opt/app") == std::set<std::string>{"1.0.0", "current"});
  const auto state = h.state();
  CHECK(state.current == "1.0.0");
  REQUIRE(state.last_result.has_value());
  CHECK(state.last_result->outcome == "failed");
  CHECK(state.last_result->message == "disk on fire");
}

TEST_CASE("record writes the switch into state.json with what it owes, and drops the intent", "[upgrade]") {
  Host h;
  h.install("1.0.0", "one\n");
  h.options.health.checks.push_back(hoist::parse_health_check("exec:/bin/true"));
  UpgradeRun run(h.context, h.items(Host::app(h.payload("v2", "two\n"), "2.0.0")), h.options, DryRun::no);
  run_to_staged(run);
  run.switch_over();
  run.record();
  const auto state = h.state();
  CHECK(state.current == "2.0.0");
  CHECK(state.previous == "1.0.0");
  CHECK_FALSE(state.switching.has_value());
  CHECK(state.owed_health_checks == std::vector<std::string>{"exec:/bin/true"});
  REQUIRE(state.last_result.has_value());
  CHECK(state.last_result->outcome == "succeeded");
  CHECK(state.last_result->version == "2.0.0");
  std::vector<std::string> kept;
  for (const auto& record : state.versions) {
    kept.push_back(record.version);
  }
  CHECK(kept == std::vector<std::string>{"1.0.0", "2.0.0"});
  // What was read back is the file's own text.
  CHECK(read_text(h.host / "var/lib/hoist/app/state.json") == hoist::to_json_text(state));
  CHECK(link_of(h.host / "opt/app/current") == "2.0.0");
}

TEST_CASE("a first install is recorded with a state made for it", "[upgrade]") {
  Host h;
  UpgradeRun run(h.context, h.items(Host::app(h.payload("v1", "one\n"), "1.0.0")), h.options, DryRun::no);
  run_to_staged(run);
  run.switch_over();
  CHECK_FALSE(fs::exists(h.host / "var/lib/hoist/app/state.json"));  // no state to carry an intent yet
  CHECK(link_of(h.host / "opt/app/current") == "1.0.0");
  run.record();
  const auto state = h.state();
  CHECK(state.current == "1.0.0");
  CHECK(state.previous.empty());
  CHECK(state.kind == "tree");
  CHECK(state.destination == "/opt/app");
  CHECK(state.last_result->outcome == "succeeded");
}

TEST_CASE("a dry run returns what each switch would change and the checks it would owe, writing nothing", "[upgrade]") {
  Host h;
  h.install("1.0.0", "one\n");
  fs::remove_all(h.host / "run/hoist");
  h.options.health.checks.push_back(hoist::parse_health_check("exec:/bin/true"));
  h.options.health.settle = std::chrono::seconds(7);
  const auto before = h.snapshot();
  const hoist::UpgradePreview preview =
      hoist::preview_upgrade(h.context, h.items(Host::app(h.payload("v2", "two!\n"), "2.0.0")), h.options);
  CHECK(h.snapshot() == before);  // not even the lock file
  REQUIRE(preview.components.size() == 1);
  const hoist::ComponentPreview& app = preview.components[0];
  CHECK(app.name == "app");
  CHECK(app.kind == ComponentKind::tree);
  CHECK(app.destination == "/opt/app");
  CHECK(app.gate == "app: 1.0.0 -> 2.0.0 (upgrade)");
  REQUIRE(app.changes.has_value());
  CHECK(app.changes->files_changed == 1);
  CHECK(app.changes->bytes_changed == 5);
  CHECK(app.changes->files_unchanged == 3);
  CHECK(app.changes->files_added == 0);
  CHECK(app.changes->files_removed == 0);
  REQUIRE(app.checks.size() == 1);
  CHECK(app.checks[0].spec == "exec:/bin/true");
  CHECK(preview.health_settle == std::chrono::seconds(7));
  CHECK(preview.changes_host());

  const hoist::UpgradePreview same =
      hoist::preview_upgrade(h.context, h.items(Host::app(h.payload("again", "one\n"), "1.0.0")), h.options);
  REQUIRE(same.components.size() == 1);
  CHECK(same.components[0].gate == "app: already at 1.0.0, nothing to do");
  CHECK_FALSE(same.components[0].changes.has_value());
  CHECK(same.components[0].checks.empty());
  CHECK_FALSE(same.changes_host());
  CHECK(h.snapshot() == before);
}

TEST_CASE("a file component is staged under the state directory and switched by the link at its destination",
          "[upgrade]") {
  Host h;
  auto tool = [&](const std::string& version, const std::string& content) {
    write_text(h.payloads / ("tool-" + version), content);
    ComponentSpec spec;
    spec.name = "tool";
    spec.kind = ComponentKind::file;
    spec.source = h.payloads / ("tool-" + version);
    spec.destination = "/usr/local/bin/tool";
    return hoist::resolve_item(std::move(spec), VersionSources{version, "", ""});
  };
  REQUIRE(hoist::run_upgrade(h.context, h.items(tool("1.0.0", "tool one\n")), h.options) == ExitCode::ok);
  CHECK(link_of(h.host / "usr/local/bin/tool") == "/var/lib/hoist/tool/1.0.0/tool");

  UpgradeRun run(h.context, h.items(tool("2.0.0", "tool two\n")), h.options, DryRun::no);
  run_to_staged(run);
  CHECK(read_text(h.host / "var/lib/hoist/tool/2.0.0/tool") == "tool two\n");
  CHECK(link_of(h.host / "usr/local/bin/tool") == "/var/lib/hoist/tool/1.0.0/tool");
  run.switch_over();
  CHECK(link_of(h.host / "usr/local/bin/tool") == "/var/lib/hoist/tool/2.0.0/tool");
  // The link is absolute, a path in the host: what it names is read under the host root.
  CHECK(read_text(h.host / fs::path(link_of(h.host / "usr/local/bin/tool")).relative_path()) == "tool two\n");
  CHECK(read_text(h.host / "var/lib/hoist/tool/1.0.0/tool") == "tool one\n");
  CHECK(names_in(h.host / "usr/local/bin") == std::set<std::string>{"tool"});
  REQUIRE(h.state_of("tool").switching.has_value());
  CHECK(h.state_of("tool").switching->to == "2.0.0");
  run.record();
  CHECK(h.state_of("tool").current == "2.0.0");
  CHECK(h.state_of("tool").previous == "1.0.0");
  CHECK_FALSE(h.state_of("tool").switching.has_value());
}

namespace {

ino_t inode_of(const fs::path& path) {
  struct stat st {};
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st.st_ino;
}

}  // namespace

TEST_CASE("stage puts the new version beside the current one, records it as staged and switches nothing",
          "[upgrade][stage]") {
  Host h;
  h.install("1.0.0", "one\n");
  h.context.suc.plan_name = "os";
  h.context.suc.plan_latest_hash = "abc";
  REQUIRE(hoist::run_stage(h.context, h.items(Host::app(h.payload("v2", "two\n"), "2.0.0")), h.options) ==
          ExitCode::ok);
  CHECK(names_in(h.host / "opt/app") == std::set<std::string>{"1.0.0", "2.0.0", "current"});
  CHECK(read_text(h.host / "opt/app/2.0.0/bin/app") == "two\n");
  CHECK(link_of(h.host / "opt/app/current") == "1.0.0");
  const auto state = h.state();
  CHECK(state.current == "1.0.0");
  // Never current, never kept: a record of its own.
  CHECK(state.versions.size() == 1);
  REQUIRE(state.staged.has_value());
  CHECK(state.staged->version == "2.0.0");
  CHECK(state.staged->plan == "os");
  CHECK(state.staged->plan_hash == "abc");
  REQUIRE(state.last_result.has_value());
  CHECK(state.last_result->command == "stage");
  CHECK(state.last_result->outcome == "succeeded");
  CHECK(state.last_result->message == "staged beside 1.0.0, not switched to: the upgrade switches to it");
  CHECK(fs::exists(h.host / "var/lib/hoist/app/.index/2.0.0"));
}

TEST_CASE("the upgrade after a stage switches to the staged version as it is and clears the record",
          "[upgrade][stage]") {
  Host h;
  h.install("1.0.0", "one\n");
  const fs::path v2 = h.payload("v2", "two\n");
  REQUIRE(hoist::run_stage(h.context, h.items(Host::app(v2, "2.0.0")), h.options) == ExitCode::ok);
  const ino_t staged = inode_of(h.host / "opt/app/2.0.0/bin/app");
  UpgradeRun run(h.context, h.items(Host::app(v2, "2.0.0")), h.options, DryRun::no);
  run.read_states();
  CHECK(run.works()[0].staged_ahead);
  REQUIRE(run.gate());
  run.verify();
  run.remount();
  run.clean_leftovers();
  run.stage();
  // Nothing written: the staged tree is the one switched to.
  CHECK(run.works()[0].stats.files_added + run.works()[0].stats.files_changed + run.works()[0].stats.files_removed ==
        0);
  run.switch_over();
  run.record();
  CHECK(inode_of(h.host / "opt/app/2.0.0/bin/app") == staged);
  CHECK(link_of(h.host / "opt/app/current") == "2.0.0");
  const auto state = h.state();
  CHECK(state.current == "2.0.0");
  CHECK_FALSE(state.staged.has_value());
  CHECK(state.last_result->command == "upgrade");
}

TEST_CASE(
    "with SHA256SUMS, the switch after a stage checks the staged copy through its index, reading no payload "
    "file",
    "[upgrade][stage]") {
  Host h;
  h.install("1.0.0", "one\n");
  const fs::path v2 = h.payload("v2", "two\n");
  write_text(h.dir / "SHA256SUMS", "27dd8ed44a83ff94d557f9fd0412ed5a8cbca69ea04922d88c01184a07300a5a  bin/app\n" +
                                       std::string(k_sha_same) + "  etc/conf\n");
  REQUIRE(hoist::run_stage(h.context, h.items(Host::app(v2, "2.0.0", h.dir / "SHA256SUMS")), h.options) ==
          ExitCode::ok);
  // Other bytes of the same size and mtime in the payload: read, they would fail the sums (exit 5). The staged copy
  // was verified when it was staged; its index vouches for it and the sums say what it must hold.
  const auto mtime = fs::last_write_time(v2 / "bin/app");
  write_text(v2 / "bin/app", "tw0\n");
  fs::last_write_time(v2 / "bin/app", mtime);
  REQUIRE(hoist::run_upgrade(h.context, h.items(Host::app(v2, "2.0.0", h.dir / "SHA256SUMS")), h.options) ==
          ExitCode::ok);
  CHECK(link_of(h.host / "opt/app/current") == "2.0.0");
  CHECK(read_text(h.host / "opt/app/current/bin/app") == "two\n");
  // Without a stage, the same payload is read and refused.
  Host fresh;
  fresh.install("1.0.0", "one\n");
  const auto [code, message] = error_of([&] {
    hoist::run_upgrade(fresh.context, fresh.items(Host::app(v2, "2.0.0", h.dir / "SHA256SUMS")), fresh.options);
  });
  CHECK(code == ExitCode::verification);
}

TEST_CASE("a staged version that no longer holds the payload is staged again before the switch", "[upgrade][stage]") {
  Host h;
  h.install("1.0.0", "one\n");
  const fs::path v2 = h.payload("v2", "two\n");
  REQUIRE(hoist::run_stage(h.context, h.items(Host::app(v2, "2.0.0")), h.options) == ExitCode::ok);
  // Changed on the host after the stage: its index no longer vouches for it, and its bytes differ.
  write_text(h.host / "opt/app/2.0.0/bin/app", "tampered\n");
  REQUIRE(hoist::run_upgrade(h.context, h.items(Host::app(v2, "2.0.0")), h.options) == ExitCode::ok);
  CHECK(read_text(h.host / "opt/app/current/bin/app") == "two\n");
  CHECK_FALSE(h.state().staged.has_value());
}

TEST_CASE("stage refuses what the upgrade would refuse, recorded for the stage command, and stages nothing",
          "[upgrade][stage]") {
  Host h;
  h.install("2.0.0", "two\n");
  const auto before = h.snapshot();
  const auto [code, message] =
      error_of([&] { hoist::run_stage(h.context, h.items(Host::app(h.payload("v1", "one\n"), "1.0.0")), h.options); });
  CHECK(code == ExitCode::refused);
  CHECK(message == "app: refusing to downgrade from 2.0.0 to 1.0.0 (--allow-downgrade allows it)");
  const auto state = h.state();
  CHECK(state.last_result->command == "stage");
  CHECK(state.last_result->outcome == "refused");
  CHECK_FALSE(state.staged.has_value());
  auto after = h.snapshot();
  after.erase("var/lib/hoist/app/state.json");
  auto expected = before;
  expected.erase("var/lib/hoist/app/state.json");
  CHECK(after == expected);
}

TEST_CASE("stage refuses a destination the switch could not take, before it stages", "[upgrade][stage]") {
  Host h;
  h.install("1.0.0", "one\n");
  fs::remove(h.host / "opt/app/current");
  fs::create_directory(h.host / "opt/app/current");
  const auto [code, message] =
      error_of([&] { hoist::run_stage(h.context, h.items(Host::app(h.payload("v2", "two\n"), "2.0.0")), h.options); });
  CHECK(code == ExitCode::failed);
  CHECK(message == "'" + (h.host / "opt/app/current").string() + "' is not a symlink; hoist manages it as one");
  CHECK(names_in(h.host / "opt/app") == std::set<std::string>{"1.0.0", "current"});
  CHECK_FALSE(h.state().staged.has_value());
}

TEST_CASE("staging another version removes the one staged before, and a kept version is never removed",
          "[upgrade][stage]") {
  Host h;
  h.install("1.0.0", "one\n");
  REQUIRE(hoist::run_stage(h.context, h.items(Host::app(h.payload("v2", "two\n"), "2.0.0")), h.options) ==
          ExitCode::ok);
  REQUIRE(hoist::run_stage(h.context, h.items(Host::app(h.payload("v3", "three\n"), "3.0.0")), h.options) ==
          ExitCode::ok);
  CHECK(names_in(h.host / "opt/app") == std::set<std::string>{"1.0.0", "3.0.0", "current"});
  CHECK_FALSE(fs::exists(h.host / "var/lib/hoist/app/.index/2.0.0"));
  CHECK(h.state().staged->version == "3.0.0");
}

TEST_CASE("the retention of an upgrade to another version removes what was staged for it", "[upgrade][stage]") {
  Host h;
  h.install("1.0.0", "one\n");
  REQUIRE(hoist::run_stage(h.context, h.items(Host::app(h.payload("v2", "two\n"), "2.0.0")), h.options) ==
          ExitCode::ok);
  h.install("3.0.0", "three\n");
  CHECK(names_in(h.host / "opt/app") == std::set<std::string>{"1.0.0", "3.0.0", "current", "previous"});
  CHECK_FALSE(h.state().staged.has_value());
  // And a run that finds its target installed drops a stale one too.
  REQUIRE(hoist::run_stage(h.context, h.items(Host::app(h.payload("v4", "four\n"), "4.0.0")), h.options) ==
          ExitCode::ok);
  h.install("3.0.0", "three\n");
  CHECK_FALSE(fs::exists(h.host / "opt/app/4.0.0"));
  CHECK_FALSE(h.state().staged.has_value());
}

TEST_CASE("a dry run names the staged version and what the switch would do with it", "[upgrade][stage]") {
  Host h;
  h.install("1.0.0", "one\n");
  const fs::path v2 = h.payload("v2", "two\n");
  REQUIRE(hoist::run_stage(h.context, h.items(Host::app(v2, "2.0.0")), h.options) == ExitCode::ok);
  const auto before = h.snapshot();
  const hoist::UpgradePreview preview = hoist::preview_upgrade(h.context, h.items(Host::app(v2, "2.0.0")), h.options);
  CHECK(h.snapshot() == before);
  REQUIRE(preview.components.size() == 1);
  CHECK(preview.components[0].staged == "2.0.0");
  CHECK(preview.components[0].staged_is_target);
  CHECK(preview.components[0].staged_holds);
  CHECK(preview.components[0].staged_at == h.state().staged->started_at);
}
