#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "hoist/host/health_check.hpp"
#include "hoist/util/error.hpp"
#include "hoist/util/fd.hpp"

using hoist::HealthCheck;
using hoist::parse_health_check;

TEST_CASE("a health check is a unit, a host program, a loopback URL or node-ready", "[health_check]") {
  const HealthCheck unit = parse_health_check("unit:k3s");
  CHECK(unit.kind == HealthCheck::Kind::unit);
  CHECK(unit.target == "k3s.service");
  CHECK(unit.spec == "unit:k3s");
  const HealthCheck exec = parse_health_check("exec:/usr/local/bin/k3s  kubectl get --raw=/readyz");
  CHECK(exec.kind == HealthCheck::Kind::exec);
  CHECK(exec.target == "/usr/local/bin/k3s");
  CHECK(exec.args == std::vector<std::string>{"kubectl", "get", "--raw=/readyz"});
  CHECK(parse_health_check("http:http://127.0.0.1:10248/healthz").target == "http://127.0.0.1:10248/healthz");
  CHECK(parse_health_check("http:http://localhost/").kind == HealthCheck::Kind::http);
  CHECK(parse_health_check("http:http://[::1]:8080").kind == HealthCheck::Kind::http);
  CHECK(parse_health_check("node-ready").kind == HealthCheck::Kind::node_ready);
}

TEST_CASE("a health check hoist cannot run, or that would leave the node, is refused naming it", "[health_check]") {
  const std::string kinds = " (one of unit:NAME, exec:PATH [ARGS...], http://127.0.0.1[:PORT]/PATH, node-ready)";
  CHECK_THROWS_WITH(parse_health_check("k3s"), "invalid --health-check 'k3s': unknown kind of check" + kinds);
  CHECK_THROWS_WITH(parse_health_check("unit:a b"),
                    "invalid --health-check 'unit:a b': invalid unit name 'a b'" + kinds);
  CHECK_THROWS_WITH(parse_health_check("exec:check"),
                    "invalid --health-check 'exec:check': the program must be an absolute path on the host" + kinds);
  CHECK_THROWS_AS(parse_health_check("exec:"), hoist::UsageError);
  for (const char* url : {"http:https://127.0.0.1/", "http:http://10.0.0.1/", "http:http://example.com/",
                          "http:http://127.0.0.1:0/", "http:http://127.0.0.1:99999/", "http:http://[::2]/",
                          "http:http://127.0.0.1/a b", "http:http://127.0.0.1:x/"}) {
    CAPTURE(url);
    CHECK_THROWS_WITH(parse_health_check(url), Catch::Contains("the URL must be http:// to a loopback address"));
  }
  CHECK_THROWS_WITH(parse_health_check("unit:k3s\n"), Catch::Contains("it holds a control character"));
}

namespace {

// A loopback server that answers one request with `answer`, then closes.
struct OneShotServer {
  explicit OneShotServer(std::string answer) {
    listener = hoist::Fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(listener.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
    socklen_t length = sizeof(address);
    REQUIRE(::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&address), &length) == 0);
    port = ntohs(address.sin_port);
    REQUIRE(::listen(listener.get(), 1) == 0);
    thread = std::thread([this, answer = std::move(answer)] {
      const hoist::Fd client(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
      char buffer[2048];
      const ssize_t n = ::recv(client.get(), buffer, sizeof(buffer), 0);
      request.assign(buffer, n > 0 ? static_cast<std::size_t>(n) : 0);
      (void)::send(client.get(), answer.data(), answer.size(), MSG_NOSIGNAL);
    });
  }
  ~OneShotServer() {
    if (thread.joinable()) {
      thread.join();
    }
  }
  hoist::Fd listener;
  unsigned port = 0;
  std::string request;
  std::thread thread;
};

hoist::HealthLook look(const std::string& url) {
  return hoist::look_at(parse_health_check("http:" + url), hoist::HealthProbes{}, std::chrono::seconds(0));
}

}  // namespace

TEST_CASE("an http check passes on 2xx only, and says what it was answered", "[health_check]") {
  {
    OneShotServer server("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
    const auto seen = look("http://127.0.0.1:" + std::to_string(server.port) + "/healthz");
    CHECK(seen.passed);
    CHECK(seen.detail == "answered 200 OK");
    server.thread.join();
    CHECK(server.request.starts_with("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(server.port)));
  }
  {
    OneShotServer server("HTTP/1.1 503 Service Unavailable\r\n\r\n");
    const auto seen = look("http://localhost:" + std::to_string(server.port));
    CHECK_FALSE(seen.passed);
    CHECK(seen.detail == "answered 503 Service Unavailable");
  }
  {
    OneShotServer server("SSH-2.0-OpenSSH\r\n");
    const auto seen = look("http://127.0.0.1:" + std::to_string(server.port) + "/");
    CHECK_FALSE(seen.passed);
    CHECK(seen.detail == "the answer is not HTTP: 'SSH-2.0-OpenSSH'");
  }
}

TEST_CASE("an http check of a port nothing listens on fails at once, saying so", "[health_check]") {
  unsigned port = 0;
  {
    OneShotServer server("HTTP/1.1 200 OK\r\n\r\n");
    port = server.port;
    hoist::Fd poke(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(port));
    REQUIRE(::connect(poke.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
  }
  const auto seen = look("http://127.0.0.1:" + std::to_string(port) + "/");
  CHECK_FALSE(seen.passed);
  CHECK(seen.detail == "cannot connect: Connection refused");
}

TEST_CASE("node-ready without a cluster to ask does not pass", "[health_check]") {
  const auto seen = hoist::look_at(parse_health_check("node-ready"), hoist::HealthProbes{}, std::chrono::seconds(0));
  CHECK_FALSE(seen.passed);
  CHECK(seen.detail == "no cluster to ask: node-ready needs the Job's service account");
}

TEST_CASE("the sysext check names the destination whose extension must be merged", "[health_check]") {
  const HealthCheck check = hoist::sysext_merge_check("/etc/extensions/tools.raw");
  CHECK(check.kind == HealthCheck::Kind::sysext);
  CHECK(check.spec == "sysext:/etc/extensions/tools.raw");
  CHECK(check.target == "/etc/extensions/tools.raw");
  // What a state recorded reads back as the same check.
  CHECK(parse_health_check(check.spec).target == check.target);
  CHECK_THROWS_WITH(parse_health_check("sysext:tools.raw"),
                    Catch::Contains("the destination must be an absolute path on the host"));
}

TEST_CASE("a final failure ends the checks at once, before the timeout, and names that check", "[health_check]") {
  hoist::HealthPolicy policy;
  policy.checks = {parse_health_check("exec:/nonexistent-check"), hoist::sysext_merge_check("/etc/extensions/x")};
  policy.timeout = std::chrono::seconds(60);
  hoist::HealthProbes probes;
  auto root = hoist::HostRoot::open("/");
  REQUIRE(root);
  probes.root = &*root;
  int looks = 0;
  probes.sysext_merged = [&looks](const std::string& destination) {
    ++looks;
    hoist::HealthLook look;
    look.detail = destination + " is not merged";
    look.final = true;
    return look;
  };
  const auto start = std::chrono::steady_clock::now();
  const hoist::HealthVerdict verdict = hoist::wait_until_healthy(policy, probes);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  CHECK(looks == 1);
  CHECK_FALSE(verdict.healthy);
  CHECK(verdict.final);
  CHECK(verdict.failed_check == "sysext:/etc/extensions/x");
  CHECK(verdict.detail == "/etc/extensions/x is not merged");
}

TEST_CASE("a passing sysext look passes, and without a probe it cannot", "[health_check]") {
  hoist::HealthProbes probes;
  const HealthCheck check = hoist::sysext_merge_check("/etc/extensions/x");
  CHECK_FALSE(hoist::look_at(check, probes, std::chrono::seconds(0)).passed);
  probes.sysext_merged = [](const std::string&) { return hoist::HealthLook{true, "merged", {}, false}; };
  CHECK(hoist::look_at(check, probes, std::chrono::seconds(0)).passed);
}
