// The installers on scratch host roots: staging, the switch, leftovers of
// killed runs, undo, rollback checks and garbage collection.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <catch2/catch.hpp>
#include <filesystem>
#include <map>

#include "hoist/install/installer.hpp"
#include "hoist/util/error.hpp"
#include "scoped_temp_dir.hpp"

using hoist::ComponentKind;
using hoist::Durability;
using hoist::HostRoot;
using hoist::InstallTarget;
using hoist::Integrity;
using hoist::Payload;
using hoist::test::read_text;
using hoist::test::ScopedTempDir;
using hoist::test::write_text;
namespace fs = std::filesystem;

namespace {

struct Scratch {
  ScopedTempDir dir;
  fs::path host = dir / "host";
  fs::path payloads = dir / "payloads";
  HostRoot root = [this] {
    fs::create_directories(host);
    return std::move(HostRoot::open(host).value());
  }();

  // A payload directory `name` with `files` (path -> content), distinct mtimes.
  fs::path payload(const std::string& name, const std::map<std::string, std::string>& files) {
    int second = 1000;
    for (const auto& [path, content] : files) {
      write_text(payloads / name / path, content);
      fs::last_write_time(payloads / name / path, fs::file_time_type(std::chrono::seconds(second++)));
    }
    return payloads / name;
  }
};

std::string link_of(const fs::path& path) {
  return fs::read_symlink(path).string();
}

}  // namespace

TEST_CASE("a tree is staged beside the current one and switched by its link", "[installer]") {
  Scratch s;
  auto v1 = Payload::open(s.payload("v1", {{"bin/app", "one"}, {"etc/conf", "same"}}));
  auto installer = hoist::make_tree_installer(
      s.root, InstallTarget{"app", ComponentKind::tree, "/opt/app", "/var/lib/hoist"}, Durability::syncfs);
  installer->stage(v1, "1.0.0", {});
  CHECK(fs::is_directory(s.host / "opt/app/1.0.0"));
  CHECK_FALSE(fs::exists(s.host / "opt/app/current"));
  CHECK(installer->integrity("1.0.0", nullptr) == Integrity::damaged);
  installer->commit(v1, "1.0.0", "", {});
  CHECK(link_of(s.host / "opt/app/current") == "1.0.0");
  CHECK_FALSE(fs::is_symlink(s.host / "opt/app/previous"));
  CHECK(installer->integrity("1.0.0", nullptr) == Integrity::intact);

  auto v2 = Payload::open(s.payload("v2", {{"bin/app", "two!"}}));
  auto second = hoist::make_tree_installer(
      s.root, InstallTarget{"app", ComponentKind::tree, "/opt/app", "/var/lib/hoist"}, Durability::per_file_fsync);
  second->stage(v2, "1.1.0", {});
  second->commit(v2, "1.1.0", "1.0.0", {});
  CHECK(link_of(s.host / "opt/app/current") == "1.1.0");
  CHECK(link_of(s.host / "opt/app/previous") == "1.0.0");
  CHECK(read_text(s.host / "opt/app/current/bin/app") == "two!");

  // A later component failed: the switch is undone and the staged version removed.
  second->undo_commit();
  second->discard_staged();
  CHECK(link_of(s.host / "opt/app/current") == "1.0.0");
  CHECK_FALSE(fs::exists(s.host / "opt/app/1.1.0"));
}

TEST_CASE("leftovers of a killed run are removed and a complete staging is reused", "[installer]") {
  Scratch s;
  auto v1 = Payload::open(s.payload("v1", {{"a", "one"}}));
  auto installer = hoist::make_tree_installer(
      s.root, InstallTarget{"app", ComponentKind::tree, "/opt/app", "/var/lib/hoist"}, Durability::syncfs);
  installer->stage(v1, "1.0.0", {});
  installer->commit(v1, "1.0.0", "", {});
  write_text(s.host / "opt/app/.1.1.0.partial/a", "half");
  fs::create_symlink("1.1.0", s.host / "opt/app/.hoist-tmp.current.abc123");
  write_text(s.host / "opt/app/.hoist-tmp.1.0.0.gc/x", "trash");
  installer->clean_leftovers(nullptr);
  CHECK_FALSE(fs::exists(s.host / "opt/app/.1.1.0.partial"));
  CHECK_FALSE(fs::is_symlink(s.host / "opt/app/.hoist-tmp.current.abc123"));
  CHECK_FALSE(fs::exists(s.host / "opt/app/.hoist-tmp.1.0.0.gc"));
  CHECK(link_of(s.host / "opt/app/current") == "1.0.0");

  // Killed after the rename, before the switch: the complete version is reused when it holds the payload.
  auto v2 = Payload::open(s.payload("v2", {{"a", "two"}}));
  auto first = hoist::make_tree_installer(
      s.root, InstallTarget{"app", ComponentKind::tree, "/opt/app", "/var/lib/hoist"}, Durability::syncfs);
  first->stage(v2, "1.1.0", {});
  struct stat before {};
  REQUIRE(::stat((s.host / "opt/app/1.1.0/a").c_str(), &before) == 0);
  const auto reused = installer->stage(v2, "1.1.0", {});
  CHECK(reused.files_added + reused.files_changed == 0);
  struct stat after {};
  REQUIRE(::stat((s.host / "opt/app/1.1.0/a").c_str(), &after) == 0);
  CHECK(after.st_ino == before.st_ino);

  // One with other bytes (an image re-tagged, or a payload that changed since) is staged again.
  write_text(s.host / "opt/app/1.1.0/a", "owt");
  ::utimensat(AT_FDCWD, (s.host / "opt/app/1.1.0/a").c_str(), std::array{before.st_atim, before.st_mtim}.data(), 0);
  const auto restaged = installer->stage(v2, "1.1.0", {});
  CHECK(restaged.files_changed == 1);  // against 1.0.0, the version it is staged beside
  CHECK(read_text(s.host / "opt/app/1.1.0/a") == "two");
}

TEST_CASE("rollback refuses a missing or incomplete version, naming it", "[installer]") {
  Scratch s;
  auto installer = hoist::make_tree_installer(
      s.root, InstallTarget{"app", ComponentKind::tree, "/opt/app", "/var/lib/hoist"}, Durability::syncfs);
  fs::create_directories(s.host / "opt/app/.0.9.0.partial");
  fs::create_directories(s.host / "opt/app/0.8.0");
  CHECK_NOTHROW(installer->check_rollback("0.8.0", "1.0.0"));
  CHECK_THROWS_WITH(installer->check_rollback("0.9.0", "1.0.0"),
                    "cannot roll back app to 0.9.0: it is incomplete (only '" +
                        (s.host / "opt/app/.0.9.0.partial").string() + "' exists)");
  CHECK_THROWS_WITH(installer->check_rollback("0.7.0", "1.0.0"),
                    "cannot roll back app to 0.7.0: '" + (s.host / "opt/app/0.7.0").string() + "' does not exist");
}

TEST_CASE("a version removed by --keep leaves no directory under its name", "[installer]") {
  Scratch s;
  auto installer = hoist::make_tree_installer(
      s.root, InstallTarget{"app", ComponentKind::tree, "/opt/app", "/var/lib/hoist"}, Durability::syncfs);
  write_text(s.host / "opt/app/0.8.0/deep/file", "x");
  fs::permissions(s.host / "opt/app/0.8.0/deep", fs::perms::owner_read | fs::perms::owner_exec);
  installer->remove_version("0.8.0");
  CHECK_FALSE(fs::exists(s.host / "opt/app/0.8.0"));
  CHECK(fs::is_empty(s.host / "opt/app"));
}

TEST_CASE("a file is installed as a link to its copy under the state dir, keeping the file that was there",
          "[installer]") {
  Scratch s;
  write_text(s.host / "usr/local/bin/k3s", "installer's k3s");
  fs::permissions(s.host / "usr/local/bin/k3s", fs::perms::owner_all);
  write_text(s.payloads / "k3s-v2", "hoist's k3s");
  fs::permissions(s.payloads / "k3s-v2", fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec);
  auto payload = Payload::open(s.payloads / "k3s-v2");
  const InstallTarget target{"k3s", ComponentKind::file, "/usr/local/bin/k3s", "/var/lib/hoist"};
  auto installer = hoist::make_file_installer(s.root, target, Durability::syncfs);
  const auto stats = installer->stage(payload, "v1.30.1+k3s1", {});
  CHECK(stats.bytes_written == 11);
  CHECK(installer->adopted_version() == std::optional<std::string>("pre-hoist"));
  CHECK(read_text(s.host / "var/lib/hoist/k3s/pre-hoist/k3s") == "installer's k3s");
  CHECK(read_text(s.host / "var/lib/hoist/k3s/v1.30.1+k3s1/k3s") == "hoist's k3s");
  CHECK((fs::status(s.host / "var/lib/hoist/k3s/v1.30.1+k3s1/k3s").permissions() & fs::perms::all) ==
        (fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec));
  // Until the switch the host still runs the old file.
  CHECK(fs::is_regular_file(fs::symlink_status(s.host / "usr/local/bin/k3s")));
  installer->commit(payload, "v1.30.1+k3s1", "", {});
  CHECK(link_of(s.host / "usr/local/bin/k3s") == "/var/lib/hoist/k3s/v1.30.1+k3s1/k3s");
  CHECK(installer->integrity("v1.30.1+k3s1", nullptr) == Integrity::intact);
  installer->rollback("pre-hoist", "v1.30.1+k3s1");
  CHECK(link_of(s.host / "usr/local/bin/k3s") == "/var/lib/hoist/k3s/pre-hoist/k3s");
  CHECK_THROWS_WITH(installer->check_rollback("v1.29.0+k3s1", "pre-hoist"),
                    "cannot roll back k3s to v1.29.0+k3s1: '" +
                        (s.host / "var/lib/hoist/k3s/v1.29.0+k3s1/k3s").string() + "' does not exist");
  installer->remove_version("pre-hoist");
  CHECK_FALSE(fs::exists(s.host / "var/lib/hoist/k3s/pre-hoist"));
}

TEST_CASE("a sync keeps a backup that undoes it, and a killed sync is undone by the next run", "[installer]") {
  Scratch s;
  write_text(s.host / "etc/app/keep", "old keep");
  write_text(s.host / "etc/app/gone", "old gone");
  auto v2 = Payload::open(s.payload("v2", {{"keep", "new keep"}, {"added", "new"}}));
  const InstallTarget target{"conf", ComponentKind::sync, "/etc/app", "/var/lib/hoist"};
  auto installer = hoist::make_sync_installer(s.root, target, Durability::syncfs);
  CHECK(installer->integrity("2", &v2) == Integrity::damaged);
  installer->commit(v2, "2", "1", {});
  installer->finish();
  CHECK(read_text(s.host / "etc/app/keep") == "new keep");
  CHECK(read_text(s.host / "etc/app/added") == "new");
  CHECK_FALSE(fs::exists(s.host / "etc/app/gone"));
  CHECK(fs::is_directory(s.host / "etc/.app.hoist-sync/undo.2@1"));
  CHECK(installer->integrity("2", &v2) == Integrity::intact);

  CHECK_NOTHROW(installer->check_rollback("1", "2"));
  installer->rollback("1", "2");
  CHECK(read_text(s.host / "etc/app/keep") == "old keep");
  CHECK(read_text(s.host / "etc/app/gone") == "old gone");
  CHECK_FALSE(fs::exists(s.host / "etc/app/added"));
  CHECK_THROWS_WITH(installer->check_rollback("1", "2"), "cannot roll back conf to 1: the backup of the sync to 2 ('" +
                                                             (s.host / "etc/.app.hoist-sync/undo.2@1").string() +
                                                             "') does not exist");
}
