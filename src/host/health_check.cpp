#include "hoist/host/health_check.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <sdbus-c++/sdbus-c++.h>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include <fmt/format.h>

#include "hoist/host/host_actions.hpp"
#include "hoist/host/interrupted.hpp"
#include "hoist/host/program_output.hpp"
#include "hoist/sys/stop_signals.hpp"
#include "hoist/sys/system_bus.hpp"
#include "hoist/util/error.hpp"
#include "hoist/util/fd.hpp"
#include "hoist/util/text.hpp"
#include "unit_restart.hpp"

namespace hoist {

namespace {

constexpr std::chrono::seconds k_exec_timeout{30};
constexpr std::chrono::seconds k_http_timeout{5};
constexpr std::size_t k_output_cap = 4096;
constexpr std::size_t k_detail_cap = 512;
constexpr std::chrono::seconds k_first_pause{1};
constexpr std::chrono::seconds k_longest_pause{10};

[[noreturn]] void refuse(std::string_view text, const std::string& why) {
  throw UsageError("invalid --health-check " + in_quotes(text) + ": " + why +
                   " (one of unit:NAME, exec:PATH [ARGS...], http://127.0.0.1[:PORT]/PATH, node-ready)");
}

std::vector<std::string> split_at_spaces(std::string_view text) {
  std::vector<std::string> words;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = std::min(text.find(' ', start), text.size());
    if (end > start) {
      words.emplace_back(text.substr(start, end - start));
    }
    start = end + 1;
  }
  return words;
}

// The address and port of a loopback http:// URL, and its path; nullopt when it is not one.
struct HttpTarget {
  sockaddr_storage address{};
  socklen_t length = 0;
  std::string host;  // as the Host header says it
  std::string path;
};

std::optional<HttpTarget> parse_http_url(std::string_view url) {
  constexpr std::string_view scheme = "http://";
  if (!url.starts_with(scheme)) {
    return std::nullopt;
  }
  std::string_view rest = url.substr(scheme.size());
  const std::size_t slash = rest.find('/');
  const std::string_view authority = rest.substr(0, slash);
  HttpTarget target;
  target.path = slash == std::string_view::npos ? "/" : std::string(rest.substr(slash));
  target.host = std::string(authority);
  std::string_view host = authority;
  std::string_view port_text;
  if (host.starts_with('[')) {
    const std::size_t close = host.find(']');
    if (close == std::string_view::npos) {
      return std::nullopt;
    }
    port_text = host.substr(close + 1);
    host = host.substr(1, close - 1);
  } else if (const std::size_t colon = host.rfind(':'); colon != std::string_view::npos) {
    port_text = host.substr(colon);
    host = host.substr(0, colon);
  }
  unsigned port = 80;
  if (!port_text.empty()) {
    if (port_text.size() < 2 || port_text.size() > 6 || port_text[0] != ':') {
      return std::nullopt;
    }
    port = 0;
    for (const char c : port_text.substr(1)) {
      if (c < '0' || c > '9') {
        return std::nullopt;
      }
      port = port * 10 + static_cast<unsigned>(c - '0');
    }
    if (port == 0 || port > 65535) {
      return std::nullopt;
    }
  }
  const std::string name = host == "localhost" ? "127.0.0.1" : std::string(host);
  auto* v4 = reinterpret_cast<sockaddr_in*>(&target.address);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&target.address);
  if (inet_pton(AF_INET, name.c_str(), &v4->sin_addr) == 1 && (ntohl(v4->sin_addr.s_addr) >> 24) == 127) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    target.length = sizeof(sockaddr_in);
  } else if (inet_pton(AF_INET6, name.c_str(), &v6->sin6_addr) == 1 && IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr)) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    target.length = sizeof(sockaddr_in6);
  } else {
    return std::nullopt;
  }
  const bool clean = std::none_of(target.path.begin(), target.path.end(),
                                  [](char c) { return static_cast<unsigned char>(c) <= ' ' || c == 0x7f; });
  return clean ? std::optional(target) : std::nullopt;
}

std::string capped(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) {
    text.remove_suffix(1);
  }
  if (text.size() > k_detail_cap) {
    return "..." + escaped(text.substr(text.size() - k_detail_cap));
  }
  return escaped(text);
}

// Waits for `events` on `fd` until `deadline`; false on a timeout or an interruption.
bool wait_fd(int fd, short events, std::chrono::steady_clock::time_point deadline) {
  const WakeFlag* interrupt = stop_signals::wake_flag();
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return false;
    }
    pollfd fds[2] = {{fd, events, 0}, {interrupt != nullptr ? interrupt->fd() : -1, POLLIN, 0}};
    const int n = ::poll(fds, 2, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0 || (fds[1].revents & POLLIN) != 0) {
      return false;
    }
    if (n > 0) {
      return true;
    }
  }
}

HealthLook look_http(const HealthCheck& check) {
  const auto target = parse_http_url(check.target);
  const auto deadline = std::chrono::steady_clock::now() + k_http_timeout;
  Fd socket(::socket(target->address.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!socket) {
    return {false, fmt::format("cannot make a socket: {}", std::strerror(errno))};
  }
  if (::connect(socket.get(), reinterpret_cast<const sockaddr*>(&target->address), target->length) != 0 &&
      errno != EINPROGRESS) {
    return {false, fmt::format("cannot connect: {}", std::strerror(errno))};
  }
  int error = 0;
  socklen_t length = sizeof(error);
  if (!wait_fd(socket.get(), POLLOUT, deadline) ||
      ::getsockopt(socket.get(), SOL_SOCKET, SO_ERROR, &error, &length) != 0 || error != 0) {
    return {false, fmt::format("cannot connect: {}", error != 0 ? std::strerror(error) : "timed out")};
  }
  const std::string request = "GET " + target->path + " HTTP/1.1\r\nHost: " + target->host +
                              "\r\nUser-Agent: hoist\r\nConnection: close\r\n\r\n";
  std::size_t sent = 0;
  while (sent < request.size()) {
    if (!wait_fd(socket.get(), POLLOUT, deadline)) {
      return {false, "timed out sending the request"};
    }
    const ssize_t n = ::send(socket.get(), request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EINTR) {
      return {false, fmt::format("cannot send the request: {}", std::strerror(errno))};
    }
    sent += n > 0 ? static_cast<std::size_t>(n) : 0;
  }
  std::string head;
  while (head.find("\r\n") == std::string::npos && head.size() < 1024) {
    if (!wait_fd(socket.get(), POLLIN, deadline)) {
      return {false, "no answer within " + std::to_string(k_http_timeout.count()) + " s"};
    }
    char buffer[512];
    const ssize_t n = ::recv(socket.get(), buffer, sizeof(buffer), 0);
    if (n == 0) {
      break;
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) {
        continue;
      }
      return {false, fmt::format("cannot read the answer: {}", std::strerror(errno))};
    }
    head.append(buffer, static_cast<std::size_t>(n));
  }
  const std::string line = head.substr(0, head.find("\r\n"));
  // "HTTP/1.1 200 OK": the version, one space, three digits.
  if (line.size() < 12 || !line.starts_with("HTTP/1.") || line[8] != ' ' ||
      !std::all_of(line.begin() + 9, line.begin() + 12, [](char c) { return c >= '0' && c <= '9'; })) {
    return {false, "the answer is not HTTP: " + in_quotes(line.substr(0, 80))};
  }
  const bool ok = line[9] == '2';
  return {ok, "answered " + escaped(line.substr(9))};
}

HealthLook look_exec(const HealthCheck& check, const HealthProbes& probes) {
  auto ran = run_in_host_root(*probes.root, check.target, check.args, k_exec_timeout, k_output_cap);
  if (!ran) {
    return {false, ran.error().message};
  }
  const std::string output = ran->output.empty() ? "" : ": " + capped(ran->output);
  if (ran->exit_status == 0) {
    return {true, "exited with 0" + output};
  }
  return {false, "exited with " + std::to_string(ran->exit_status) + output};
}

uint64_t monotonic_usec() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1000000U + static_cast<uint64_t>(now.tv_nsec) / 1000U;
}

HealthLook look_unit(const HealthCheck& check, const HealthProbes& probes, std::chrono::seconds settle) {
  const std::string& unit = check.target;
  try {
    SystemBus& bus = probes.bus();
    auto manager =
        sdbus::createProxy(bus.connection(), sdbus::ServiceName{k_systemd_service}, sdbus::ObjectPath{k_systemd_path});
    sdbus::ObjectPath path;
    try {
      manager->callMethod("GetUnit").onInterface(k_systemd_manager).withArguments(unit).storeResultsTo(path);
    } catch (const sdbus::Error& e) {
      if (e.getName() == "org.freedesktop.systemd1.NoSuchUnit") {
        return {false, unit + " is not loaded"};
      }
      throw;
    }
    auto proxy = sdbus::createProxy(bus.connection(), sdbus::ServiceName{k_systemd_service}, std::move(path));
    const auto state =
        proxy->getProperty("ActiveState").onInterface("org.freedesktop.systemd1.Unit").get<std::string>();
    const auto sub = proxy->getProperty("SubState").onInterface("org.freedesktop.systemd1.Unit").get<std::string>();
    std::string restarts;
    if (unit.ends_with(".service")) {
      const auto n = proxy->getProperty("NRestarts").onInterface("org.freedesktop.systemd1.Service").get<uint32_t>();
      restarts = n == 0 ? "" : fmt::format(", restarted {} time{} by systemd", n, n == 1 ? "" : "s");
    }
    if (state != "active") {
      return {false, unit + " is " + escaped(state) + " (" + escaped(sub) + ")" + restarts};
    }
    const auto entered = proxy->getProperty("ActiveEnterTimestampMonotonic")
                             .onInterface("org.freedesktop.systemd1.Unit")
                             .get<uint64_t>();
    const uint64_t now = monotonic_usec();
    const double up = now > entered ? static_cast<double>(now - entered) / 1e6 : 0.0;
    if (up < static_cast<double>(settle.count())) {
      const auto left =
          std::chrono::milliseconds(static_cast<int64_t>((static_cast<double>(settle.count()) - up) * 1000.0) + 1);
      return {
          false,
          fmt::format("{} is active for {:.0f} s of the {} s it must stay up{}", unit, up, settle.count(), restarts),
          left};
    }
    return {true, fmt::format("{} is active for {:.0f} s{}", unit, up, restarts)};
  } catch (const sdbus::Error& e) {
    return {false, "cannot ask systemd about " + unit + ": " + escaped(e.getMessage())};
  }
}

}  // namespace

HealthCheck parse_health_check(std::string_view text) {
  if (has_control_character(text)) {
    refuse(text, "it holds a control character");
  }
  HealthCheck check;
  check.spec = std::string(text);
  if (text == "node-ready") {
    check.kind = HealthCheck::Kind::node_ready;
    return check;
  }
  if (text.starts_with("unit:")) {
    check.kind = HealthCheck::Kind::unit;
    try {
      check.target = unit_name(text.substr(5));
    } catch (const UsageError& e) {
      refuse(text, e.what());
    }
    return check;
  }
  if (text.starts_with("exec:")) {
    check.kind = HealthCheck::Kind::exec;
    auto words = split_at_spaces(text.substr(5));
    if (words.empty() || !words.front().starts_with('/')) {
      refuse(text, "the program must be an absolute path on the host");
    }
    check.target = words.front();
    check.args.assign(words.begin() + 1, words.end());
    return check;
  }
  if (text.starts_with("http:")) {
    check.kind = HealthCheck::Kind::http;
    check.target = std::string(text.substr(5));
    if (!parse_http_url(check.target)) {
      refuse(text, "the URL must be http:// to a loopback address (127.0.0.0/8, [::1] or localhost)");
    }
    return check;
  }
  if (text.starts_with("sysext:")) {
    check.kind = HealthCheck::Kind::sysext;
    check.target = std::string(text.substr(7));
    if (!check.target.starts_with('/')) {
      refuse(text, "the destination must be an absolute path on the host");
    }
    return check;
  }
  refuse(text, "unknown kind of check");
}

HealthCheck sysext_merge_check(const std::string& destination) {
  return parse_health_check("sysext:" + destination);
}

std::string describe(const std::vector<HealthCheck>& checks) {
  std::string text;
  for (const auto& check : checks) {
    text += (text.empty() ? "" : ", ") + check.spec;
  }
  return text;
}

HealthLook look_at(const HealthCheck& check, const HealthProbes& probes, std::chrono::seconds settle) {
  switch (check.kind) {
    case HealthCheck::Kind::unit: return look_unit(check, probes, settle);
    case HealthCheck::Kind::exec: return look_exec(check, probes);
    case HealthCheck::Kind::http: return look_http(check);
    case HealthCheck::Kind::node_ready:
      if (!probes.node_ready) {
        return {false, "no cluster to ask: node-ready needs the Job's service account"};
      }
      return probes.node_ready(probes.kubelet_version);
    case HealthCheck::Kind::sysext:
      if (!probes.sysext_merged) {
        return {false, "no way to look at the merged extensions"};
      }
      return probes.sysext_merged(check.target);
  }
  return {false, "unknown check"};
}

HealthVerdict wait_until_healthy(const HealthPolicy& policy, const HealthProbes& probes) {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + policy.timeout;
  // --health-settle is said only where a unit: check uses it.
  const bool units = std::any_of(policy.checks.begin(), policy.checks.end(),
                                 [](const HealthCheck& check) { return check.kind == HealthCheck::Kind::unit; });
  spdlog::info("health: checking {} ({}at most {} s in all)", describe(policy.checks),
               units ? fmt::format("each unit up for {} s; ", policy.settle.count()) : std::string(),
               policy.timeout.count());
  std::map<std::string, HealthLook> last;
  auto pause = std::chrono::duration_cast<std::chrono::milliseconds>(k_first_pause);
  for (;;) {
    throw_if_interrupted("checking the health of the new version");
    HealthVerdict verdict{true, {}, {}, false};
    std::chrono::milliseconds soonest{0};  // the first moment a settling unit may pass
    bool final = false;
    for (const auto& check : policy.checks) {
      HealthLook look = look_at(check, probes, policy.settle);
      const auto seen = last.find(check.spec);
      if (seen == last.end() || seen->second.passed != look.passed) {
        spdlog::info("health: {} {}: {}", check.spec, look.passed ? "passed" : "not yet", look.detail);
      }
      if (look.passes_in.count() > 0 && (soonest.count() == 0 || look.passes_in < soonest)) {
        soonest = look.passes_in;
      }
      if (!look.passed && (verdict.healthy || (look.final && !final))) {
        verdict = HealthVerdict{false, check.spec, look.detail, look.final};
        final = final || look.final;
      }
      last[check.spec] = std::move(look);
      throw_if_interrupted("checking the health of the new version");
    }
    if (verdict.healthy) {
      spdlog::info("health: every check passed after {:.1f} s",
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      return verdict;
    }
    const auto now = std::chrono::steady_clock::now();
    if (final) {
      spdlog::error("health: {} failed: {}", verdict.failed_check, verdict.detail);
      return verdict;
    }
    if (now >= deadline) {
      spdlog::error("health: {} did not pass within {} s: {}", verdict.failed_check, policy.timeout.count(),
                    verdict.detail);
      return verdict;
    }
    auto wait = soonest.count() > 0 ? std::min(pause, soonest) : pause;
    wait = std::min(wait, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now));
    if (const WakeFlag* interrupt = stop_signals::wake_flag(); interrupt != nullptr) {
      (void)interrupt->wait_for(wait);
    } else {
      ::usleep(static_cast<useconds_t>(wait.count() * 1000));
    }
    pause = std::min(pause * 2, std::chrono::duration_cast<std::chrono::milliseconds>(k_longest_pause));
  }
}

}  // namespace hoist
