#include "hoist/kube/etcd_members.hpp"

#include <nlohmann/json.hpp>

#include "hoist/kube/https_connection.hpp"
#include "hoist/kube/kube_config.hpp"
#include "hoist/sys/library_versions.hpp"
#include "hoist/util/error.hpp"

namespace hoist {

namespace {

// A member list is a few hundred bytes a member; a cluster has a handful.
constexpr std::size_t k_max_member_list_bytes = 1U << 20U;

// The gateway writes a uint64 as a JSON string (proto3's JSON mapping); an older one wrote a number.
std::string id_text(const nlohmann::json& id) {
  if (id.is_string()) {
    return id.get<std::string>();
  }
  if (id.is_number_unsigned()) {
    return std::to_string(id.get<std::uint64_t>());
  }
  return {};
}

std::vector<std::string> strings_of(const nlohmann::json& object, const char* key) {
  std::vector<std::string> values;
  if (const auto found = object.find(key); found != object.end() && found->is_array()) {
    for (const auto& value : *found) {
      if (value.is_string()) {
        values.push_back(value.get<std::string>());
      }
    }
  }
  return values;
}

// One POST of `{}` to `path` of the etcd member at host:port, whose JSON answer (at most `limit` bytes) is returned.
std::string post_to_etcd(const TlsContext& tls, const std::string& host, std::uint16_t port, const char* path,
                         const std::string& doing, Deadline deadline, std::size_t limit) {
  const std::string server = host_port(host, port);
  auto connection = HttpsConnection::open(tls, host, port, deadline);
  if (!connection) {
    throw Failure(doing + ": " + connection.error().message);
  }
  const std::string body = "{}";
  const std::string request = std::string("POST ") + path + " HTTP/1.1\r\nHost: " + server + "\r\nUser-Agent: hoist/" +
                              hoist_version() +
                              "\r\nContent-Type: application/json\r\nAccept: application/json\r\nContent-Length: " +
                              std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
  if (auto sent = connection->send(request, deadline); !sent) {
    throw Failure(doing + ": " + sent.error().message);
  }
  auto head = connection->read_head(deadline);
  if (!head) {
    throw Failure(doing + ": " + head.error().message);
  }
  auto answer = connection->read_body(deadline, limit);
  if (!answer) {
    throw Failure(doing + ": " + answer.error().message);
  }
  if (head->status != 200) {
    throw Failure(doing + ": HTTP " + std::to_string(head->status) + " " + head->reason);
  }
  return std::move(*answer);
}

}  // namespace

std::vector<EtcdMember> parse_etcd_member_list(std::string_view body, const std::string& source) {
  const auto document = nlohmann::json::parse(body, nullptr, false);
  if (!document.is_object()) {
    throw Failure(source + " did not answer with a JSON object");
  }
  const auto members = document.find("members");
  if (members == document.end() || !members->is_array()) {
    throw Failure(source + " answered without a 'members' array");
  }
  std::vector<EtcdMember> list;
  for (const auto& item : *members) {
    if (!item.is_object()) {
      throw Failure(source + " listed a member that is not an object");
    }
    EtcdMember member;
    if (const auto id = item.find("ID"); id != item.end()) {
      member.id = id_text(*id);
    }
    if (const auto name = item.find("name"); name != item.end() && name->is_string()) {
      member.name = name->get<std::string>();
    }
    if (const auto learner = item.find("isLearner"); learner != item.end() && learner->is_boolean()) {
      member.learner = learner->get<bool>();
    }
    member.client_urls = strings_of(item, "clientURLs");
    list.push_back(std::move(member));
  }
  return list;
}

std::vector<EtcdMember> list_etcd_members(const TlsContext& tls, const std::string& host, std::uint16_t port,
                                          Deadline deadline) {
  const std::string server = host_port(host, port);
  const std::string answer =
      post_to_etcd(tls, host, port, "/v3/cluster/member/list", "failed to list etcd's members at https://" + server,
                   deadline, k_max_member_list_bytes);
  return parse_etcd_member_list(answer, "etcd at https://" + server);
}

EtcdStatus parse_etcd_status(std::string_view body, const std::string& source) {
  const auto document = nlohmann::json::parse(body, nullptr, false);
  if (!document.is_object()) {
    throw Failure(source + " did not answer with a JSON object");
  }
  const auto version = document.find("version");
  if (version == document.end() || !version->is_string() || version->get<std::string>().empty()) {
    throw Failure(source + " answered without its version: not an etcd status");
  }
  EtcdStatus status;
  status.version = version->get<std::string>();
  if (const auto header = document.find("header"); header != document.end() && header->is_object()) {
    if (const auto id = header->find("member_id"); id != header->end()) {
      status.member_id = id_text(*id);
    }
  }
  if (const auto leader = document.find("leader"); leader != document.end()) {
    status.leader = id_text(*leader);
  }
  status.errors = strings_of(document, "errors");
  if (status.leader.empty() || status.leader == "0") {
    status.errors.emplace_back("no leader");
  }
  return status;
}

EtcdStatus etcd_member_status(const TlsContext& tls, const std::string& url, Deadline deadline) {
  std::string host;
  std::uint16_t port = 0;
  parse_server_url(url, "etcd member URL", host, port);
  const std::string answer =
      post_to_etcd(tls, host, port, "/v3/maintenance/status",
                   "failed to ask etcd's member at " + url + " for its status", deadline, k_max_member_list_bytes);
  return parse_etcd_status(answer, "etcd at " + url);
}

}  // namespace hoist
