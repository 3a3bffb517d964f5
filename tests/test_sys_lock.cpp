#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>

#include "hoist/sys/lock.hpp"
#include "scoped_temp_dir.hpp"

using hoist::HostRoot;
using hoist::Lock;
using hoist::test::ScopedTempDir;
using namespace std::chrono_literals;

namespace {

// A real second process that takes the lock, tells the parent, and holds it
// for `hold` (or until killed).
pid_t spawn_holder(const std::filesystem::path& root_dir, std::chrono::milliseconds hold) {
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(ready[0]);
    auto root = HostRoot::open(root_dir);
    auto lock = Lock::acquire(*root, "/run/hoist/hoist.lock", 0ms);
    const char ok = lock.has_value() ? '1' : '0';
    if (::write(ready[1], &ok, 1) != 1) {
      ::_exit(1);  // the parent's read sees no byte and fails the test
    }
    ::usleep(static_cast<useconds_t>(hold.count() * 1000));
    ::_exit(0);
  }
  ::close(ready[1]);
  char ok = 0;
  REQUIRE(::read(ready[0], &ok, 1) == 1);
  ::close(ready[0]);
  REQUIRE(ok == '1');
  return pid;
}

void reap(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
}

}  // namespace

TEST_CASE("a second process gives up after the timeout with a message naming the lock file", "[lock]") {
  ScopedTempDir dir;
  auto root = HostRoot::open(dir.path());
  REQUIRE(root.has_value());
  const pid_t holder = spawn_holder(dir.path(), 10s);

  const auto start = std::chrono::steady_clock::now();
  long seen_holder = -1;
  auto lock = Lock::acquire(*root, "/run/hoist/hoist.lock", 300ms, [&](long pid) { seen_holder = pid; });
  const auto waited = std::chrono::steady_clock::now() - start;

  REQUIRE_FALSE(lock.has_value());
  CHECK(lock.error().errnum == ETIMEDOUT);
  CHECK(lock.error().message == "failed to lock '" + (dir.path() / "run/hoist/hoist.lock").string() +
                                    "': still held by pid " + std::to_string(holder) + " after 0.3 s (--lock-timeout)");
  CHECK(seen_holder == holder);
  CHECK(waited >= 300ms);
  ::kill(holder, SIGKILL);
  reap(holder);
}

TEST_CASE("a waiting process gets the lock when the holder finishes", "[lock]") {
  ScopedTempDir dir;
  auto root = HostRoot::open(dir.path());
  REQUIRE(root.has_value());
  const pid_t holder = spawn_holder(dir.path(), 400ms);
  auto lock = Lock::acquire(*root, "/run/hoist/hoist.lock", 10s);
  CHECK(lock.has_value());
  reap(holder);
}

TEST_CASE("a SIGKILLed holder frees the lock", "[lock]") {
  ScopedTempDir dir;
  auto root = HostRoot::open(dir.path());
  REQUIRE(root.has_value());
  const pid_t holder = spawn_holder(dir.path(), 60s);
  REQUIRE(::kill(holder, SIGKILL) == 0);
  reap(holder);
  const auto start = std::chrono::steady_clock::now();
  auto lock = Lock::acquire(*root, "/run/hoist/hoist.lock", 0ms);
  CHECK(lock.has_value());
  CHECK(std::chrono::steady_clock::now() - start < 1s);
}

TEST_CASE("the lock file is created through the host's /var/run symlink inside the root", "[lock]") {
  ScopedTempDir dir;
  std::filesystem::create_directories(dir / "run");
  std::filesystem::create_directories(dir / "var");
  std::filesystem::create_symlink("/run", dir / "var/run");
  auto root = HostRoot::open(dir.path());
  REQUIRE(root.has_value());
  auto lock = Lock::acquire(*root, "/var/run/hoist/hoist.lock", 0ms);
  REQUIRE(lock.has_value());
  CHECK(std::filesystem::is_regular_file(dir / "run/hoist/hoist.lock"));
  CHECK(hoist::test::read_text(dir / "run/hoist/hoist.lock") == std::to_string(::getpid()) + "\n");
}

TEST_CASE("a lock file that is a symlink is refused", "[lock]") {
  ScopedTempDir dir;
  std::filesystem::create_directories(dir / "run/hoist");
  hoist::test::write_text(dir / "target", "do not touch\n");
  std::filesystem::create_symlink("/target", dir / "run/hoist/hoist.lock");
  auto root = HostRoot::open(dir.path());
  REQUIRE(root.has_value());
  auto lock = Lock::acquire(*root, "/run/hoist/hoist.lock", 0ms);
  REQUIRE_FALSE(lock.has_value());
  CHECK(lock.error().errnum == ELOOP);
  CHECK(hoist::test::read_text(dir / "target") == "do not touch\n");
}
