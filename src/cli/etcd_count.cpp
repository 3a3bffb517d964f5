#include "etcd_count.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <exception>
#include <string>

#include "hoist/kube/etcd_members.hpp"
#include "hoist/util/error.hpp"

namespace hoist::cli {

namespace {

// Where k3s and RKE2 start their embedded etcd's client listener on every server (besides the node's address).
constexpr const char* k_etcd_host = "127.0.0.1";
constexpr std::uint16_t k_etcd_port = 2379;
// One request to a local listener: a server that does not answer within this does not run its etcd.
constexpr std::chrono::seconds k_etcd_timeout{10};

std::string read_host_file(const HostRoot& root, const std::string& path) {
  auto text = root.read_file(path);
  if (!text) {
    throw Failure(text.error().message);
  }
  return std::move(*text);
}

int count_members(const HostRoot& root, const ServerDatastore& server) {
  // The files k3s and RKE2 give their own kube-apiserver for this etcd (--etcd-cafile, --etcd-certfile,
  // --etcd-keyfile with --etcd-servers=https://127.0.0.1:2379).
  const std::string tls_dir = server.data_dir + "/server/tls/etcd";
  TlsSettings settings;
  settings.ca_pem = read_host_file(root, tls_dir + "/server-ca.crt");
  settings.client_cert_pem = read_host_file(root, tls_dir + "/client.crt");
  settings.client_key_pem = read_host_file(root, tls_dir + "/client.key");
  auto tls = TlsContext::create(settings, "'" + root.display(tls_dir) + "'");
  if (!tls) {
    throw Failure(tls.error().message);
  }
  const auto members =
      list_etcd_members(*tls, k_etcd_host, k_etcd_port, std::chrono::steady_clock::now() + k_etcd_timeout);
  std::string names;
  for (const auto& member : members) {
    names += (names.empty() ? "" : ", ") + (member.name.empty() ? "(not started) " + member.id : member.name) +
             (member.learner ? " (learner)" : "");
  }
  spdlog::info("{}: etcd has {} member(s): {} (listed by https://{}:{} with {}/client.crt)", server.unit,
               members.size(), names, k_etcd_host, k_etcd_port, tls_dir);
  return static_cast<int>(members.size());
}

}  // namespace

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
