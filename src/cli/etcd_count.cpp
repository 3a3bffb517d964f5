#include "etcd_count.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "hoist/kube/etcd_members.hpp"
#include "hoist/util/error.hpp"

namespace hoist::cli {

namespace {

// Where k3s and RKE2 start their embedded etcd's client listener on every server (besides the node's address).
constexpr const char* k_etcd_host = "127.0.0.1";
constexpr std::uint16_t k_etcd_port = 2379;
// One request to a local listener: a server that does not answer within this does not run its etcd.
constexpr std::chrono::seconds k_etcd_timeout{10};
// Each member's status, over the network to the other servers: one that does not answer within this is down.
constexpr std::chrono::seconds k_member_timeout{5};

std::string read_host_file(const HostRoot& root, const std::string& path) {
  auto text = root.read_file(path);
  if (!text) {
    throw Failure(text.error().message);
  }
  return std::move(*text);
}

// The files k3s and RKE2 give their own kube-apiserver for this etcd (--etcd-cafile, --etcd-certfile,
// --etcd-keyfile with --etcd-servers=https://127.0.0.1:2379).
std::string tls_dir_of(const ServerDatastore& server) {
  return server.data_dir + "/server/tls/etcd";
}

TlsContext etcd_tls(const HostRoot& root, const ServerDatastore& server) {
  const std::string tls_dir = tls_dir_of(server);
  TlsSettings settings;
  settings.ca_pem = read_host_file(root, tls_dir + "/server-ca.crt");
  settings.client_cert_pem = read_host_file(root, tls_dir + "/client.crt");
  settings.client_key_pem = read_host_file(root, tls_dir + "/client.key");
  auto tls = TlsContext::create(settings, "'" + root.display(tls_dir) + "'");
  if (!tls) {
    throw Failure(tls.error().message);
  }
  return std::move(*tls);
}

std::string name_of(const EtcdMember& member) {
  return member.name.empty() ? "(not started) " + member.id : member.name;
}

std::vector<EtcdMember> list_members(const TlsContext& tls, const ServerDatastore& server) {
  auto members = list_etcd_members(tls, k_etcd_host, k_etcd_port, std::chrono::steady_clock::now() + k_etcd_timeout);
  std::string names;
  for (const auto& member : members) {
    names += (names.empty() ? "" : ", ") + name_of(member) + (member.learner ? " (learner)" : "");
  }
  spdlog::info("{}: etcd has {} member(s): {} (listed by https://{}:{} with {}/client.crt)", server.unit,
               members.size(), names, k_etcd_host, k_etcd_port, tls_dir_of(server));
  return members;
}

int count_members(const HostRoot& root, const ServerDatastore& server) {
  return static_cast<int>(list_members(etcd_tls(root, server), server).size());
}

// One member's health: "" when healthy, else why not.
std::string member_problem(const TlsContext& tls, const ServerDatastore& server, const EtcdMember& member) {
  if (member.name.empty() || member.client_urls.empty()) {
    return "it was added but has not started";
  }
  const std::string& url = member.client_urls.front();
  try {
    const EtcdStatus status = etcd_member_status(tls, url, std::chrono::steady_clock::now() + k_member_timeout);
    std::string errors;
    for (const auto& error : status.errors) {
      errors += (errors.empty() ? "" : ", ") + error;
    }
    if (!errors.empty()) {
      return "it reports " + errors + " (at " + url + ")";
    }
    spdlog::info("{}: etcd member {} is healthy: etcd {} at {}, following leader {}", server.unit, member.name,
                 status.version, url, status.leader);
    return {};
  } catch (const std::exception& e) {  // hoist's errors, and whatever the TLS and JSON code may throw
    return e.what();
  }
}

EtcdHealth check_health(const HostRoot& root, const ServerDatastore& server) {
  const TlsContext tls = etcd_tls(root, server);
  const auto members = list_members(tls, server);
  EtcdHealth health;
  health.known = true;
  health.members = static_cast<int>(members.size());
  for (const auto& member : members) {
    if (std::string problem = member_problem(tls, server, member); !problem.empty()) {
      spdlog::error("{}: etcd member {} is not healthy: {}", server.unit, name_of(member), problem);
      health.unhealthy.push_back(name_of(member) + ": " + problem);
    }
  }
  return health;
}

}  // namespace

std::function<EtcdHealth(const ServerDatastore&)> etcd_health_checker(const HostRoot& root) {
  return [&root](const ServerDatastore& server) {
    try {
      return check_health(root, server);
    } catch (const std::exception& e) {
      spdlog::warn("{}: cannot list etcd's members, so their health is unknown and not checked: {}", server.unit,
                   e.what());
      return EtcdHealth{};
    }
  };
}

std::function<int(const ServerDatastore&)> etcd_member_counter(const HostRoot& root) {
  return [&root](const ServerDatastore& server) {
    try {
      return count_members(root, server);
    } catch (const std::exception& e) {  // hoist's errors, and whatever the TLS and JSON code may throw
      spdlog::warn("{}: cannot list etcd's members, so their number is unknown: {}", server.unit, e.what());
      return 0;
    }
  };
}

}  // namespace hoist::cli
