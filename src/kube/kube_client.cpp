#include "hoist/kube/kube_client.hpp"

#include <algorithm>
#include <cerrno>

#include "hoist/sys/library_versions.hpp"
#include "hoist/sys/secrets.hpp"

namespace hoist {

namespace {

constexpr std::size_t k_max_list_bytes = 256U << 20U;
constexpr std::size_t k_max_event_bytes = 16U << 20U;
// A watch is given up timeoutSeconds plus this grace after it started: the server
// ends it by then, so a stream still open means a dead peer that never said so
// (a network partition drops no FIN).
constexpr int k_watch_grace_seconds = 30;

using Kind = KubeError::Kind;

/// "failed to <verb> <resource> on '<server>'": how every error of a request begins.
std::string failed_to(const std::string& verb, const KubeResource& resource, const std::string& server) {
  return "failed to " + verb + " " + resource.display() + " on '" + server + "'";
}

KubeError transport_error(const SysError& error, const std::string& doing) {
  switch (error.errnum) {
    case ETIMEDOUT: return {Kind::timeout, 0, doing + ": " + error.message};
    case ECANCELED: return {Kind::interrupted, 0, doing + ": " + error.message};
    case k_errnum_tls_verification: return {Kind::tls, 0, doing + ": " + error.message};
    default: return {Kind::unreachable, 0, doing + ": " + error.message};
  }
}

// The message of a metav1.Status body, or the HTTP reason when the body is not one.
std::string status_message(const std::string& body, const std::string& reason) {
  const auto status = nlohmann::json::parse(body, nullptr, false);
  if (status.is_object() && status.contains("message") && status["message"].is_string()) {
    return status["message"].get<std::string>();
  }
  return reason;
}

KubeError http_error(int status, const std::string& message, const std::string& verb, const KubeResource& resource,
                     const std::string& server) {
  const std::string failed = failed_to(verb, resource, server);
  const std::string rbac =
      "RBAC must allow verb '" + verb + "' on resource '" + resource.plural + "'" +
      (resource.group.empty() ? std::string(" in the core API group") : " in API group '" + resource.group + "'") +
      (resource.namespace_.empty() ? std::string(" cluster-wide") : " in namespace '" + resource.namespace_ + "'");
  switch (status) {
    case 401:
      return {Kind::unauthorized, status,
              failed + ": 401 Unauthorized, the token was refused (re-read once): " + message};
    case 403: return {Kind::forbidden, status, failed + ": 403 Forbidden (" + rbac + "): " + message};
    case 404: return {Kind::not_found, status, failed + ": 404 Not Found: " + message};
    case 410: return {Kind::gone, status, failed + ": 410 Gone: " + message};
    default: break;
  }
  const Kind kind = status == 429 || status >= 500 ? Kind::unreachable : Kind::rejected;
  return {kind, status, failed + ": HTTP " + std::to_string(status) + ": " + message};
}

std::string add_param(std::string target, const std::string& name, const std::string& value) {
  target += target.find('?') == std::string::npos ? '?' : '&';
  return target + name + "=" + url_encode(value);
}

std::string query_target(const KubeResource& resource, const ListQuery& query) {
  std::string target = resource.path();
  if (!query.label_selector.empty()) {
    target = add_param(target, "labelSelector", query.label_selector);
  }
  if (!query.field_selector.empty()) {
    target = add_param(target, "fieldSelector", query.field_selector);
  }
  return target;
}

WatchEvent::Type event_type(const std::string& type) {
  if (type == "ADDED") {
    return WatchEvent::Type::added;
  }
  if (type == "MODIFIED") {
    return WatchEvent::Type::modified;
  }
  if (type == "DELETED") {
    return WatchEvent::Type::deleted;
  }
  return WatchEvent::Type::bookmark;
}

}  // namespace

std::string url_encode(std::string_view text) {
  static constexpr char k_hex[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (std::isalnum(byte) != 0 || c == '-' || c == '_' || c == '.' || c == '~') {
      out += c;
    } else {
      out += '%';
      out += k_hex[byte >> 4U];
      out += k_hex[byte & 15U];
    }
  }
  return out;
}

std::string KubeResource::display() const {
  std::string name = group.empty() ? plural : plural + "." + group;
  return namespace_.empty() ? name : name + " in namespace '" + namespace_ + "'";
}

std::string KubeResource::path() const {
  std::string path = group.empty() ? "/api/" + version : "/apis/" + group + "/" + version;
  if (!namespace_.empty()) {
    path += "/namespaces/" + url_encode(namespace_);
  }
  return path + "/" + plural;
}

struct KubeClient::Response {
  HttpsConnection connection;
  HttpResponseHead head;
};

KubeClient::KubeClient(KubeConfig config)
    : m_config(std::move(config)), m_tls(TlsContext::create(m_config.tls, m_config.tls_source).value()) {}

KubeClient::Response KubeClient::request(const std::string& verb, const KubeResource& resource,
                                         const std::string& target, Deadline deadline, const WakeFlag* interrupt,
                                         const Body* body) const {
  const std::string doing = failed_to(verb, resource, m_config.server());
  for (int attempt = 0;; ++attempt) {
    auto connection = HttpsConnection::open(m_tls, m_config.host, m_config.port, deadline, interrupt);
    if (!connection) {
      throw transport_error(connection.error(), doing);
    }
    std::string request = std::string(body != nullptr ? body->method : "GET") + " " + m_config.path_prefix + target +
                          " HTTP/1.1\r\nHost: " + m_config.server() + "\r\nUser-Agent: hoist/" + hoist_version() +
                          "\r\nAccept: application/json\r\nConnection: close\r\n";
    if (body != nullptr) {
      request += std::string("Content-Type: ") + body->content_type +
                 "\r\nContent-Length: " + std::to_string(body->text.size()) + "\r\n";
    }
    // Kept until the answer: after a 401, whether the token has changed since is judged against it.
    std::string token;
    if (m_config.token) {
      token = m_config.token->value();
      request += "Authorization: Bearer " + token + "\r\n";
    }
    request += "\r\n";
    if (body != nullptr) {
      request += body->text;
    }
    auto sent = connection->send(request, deadline);
    secure_erase(request);
    if (!sent) {
      secure_erase(token);
      throw transport_error(sent.error(), doing);
    }
    auto head = connection->read_head(deadline);
    if (!head) {
      secure_erase(token);
      throw transport_error(head.error(), doing);
    }
    const bool rotated = head->status == 401 && attempt == 0 && m_config.token && m_config.token->reload(token);
    secure_erase(token);
    if (rotated) {
      continue;  // the token rotated under us (this request or another re-read it): once more with the new one
    }
    return Response{std::move(*connection), std::move(*head)};
  }
}

ObjectList KubeClient::list(const KubeResource& resource, const ListQuery& query, Deadline deadline,
                            const WakeFlag* interrupt, const ListPage& page) const {
  std::string target = query_target(resource, query);
  if (page.limit > 0) {
    target = add_param(target, "limit", std::to_string(page.limit));
  }
  if (!page.continue_token.empty()) {
    target = add_param(target, "continue", page.continue_token);
  }
  auto response = request("list", resource, target, deadline, interrupt);
  const std::string doing = failed_to("list", resource, m_config.server());
  auto body = response.connection.read_body(deadline, k_max_list_bytes);
  if (!body) {
    throw transport_error(body.error(), doing);
  }
  if (response.head.status != 200) {
    throw http_error(response.head.status, status_message(*body, response.head.reason), "list", resource,
                     m_config.server());
  }
  return decode_list(*body, doing);
}

nlohmann::json KubeClient::read_object(Response& response, const std::string& verb, const KubeResource& resource,
                                       Deadline deadline) const {
  const std::string doing = failed_to(verb, resource, m_config.server());
  auto body = response.connection.read_body(deadline, k_max_event_bytes);
  if (!body) {
    throw transport_error(body.error(), doing);
  }
  const int status = response.head.status;
  if (status != 200 && !(status == 201 && verb == "create")) {
    throw http_error(status, status_message(*body, response.head.reason), verb, resource, m_config.server());
  }
  auto json = nlohmann::json::parse(*body, nullptr, false);
  if (!json.is_object()) {
    throw KubeError(Kind::bad_response, status, doing + ": the response is not an object");
  }
  return json;
}

nlohmann::json KubeClient::create(const KubeResource& resource, const nlohmann::json& object, Deadline deadline,
                                  const WakeFlag* interrupt) const {
  const std::string payload = object.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  const Body body{"POST", "application/json", payload};
  auto response = request("create", resource, resource.path(), deadline, interrupt, &body);
  return read_object(response, "create", resource, deadline);
}

nlohmann::json KubeClient::patch(const KubeResource& resource, const std::string& name,
                                 const nlohmann::json& merge_patch, Deadline deadline,
                                 const WakeFlag* interrupt) const {
  const std::string payload = merge_patch.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  const Body body{"PATCH", "application/merge-patch+json", payload};
  auto response = request("patch", resource, resource.path() + "/" + url_encode(name), deadline, interrupt, &body);
  return read_object(response, "patch", resource, deadline);
}

nlohmann::json KubeClient::get(const KubeResource& resource, const std::string& name, Deadline deadline,
                               const WakeFlag* interrupt) const {
  auto response = request("get", resource, resource.path() + "/" + url_encode(name), deadline, interrupt);
  return read_object(response, "get", resource, deadline);
}

void KubeClient::watch(const KubeResource& resource, const ListQuery& query, const std::string& resource_version,
                       int timeout_seconds, Deadline deadline, const WakeFlag* interrupt,
                       const std::function<void(WatchEvent&&)>& on_event) const {
  std::string target = add_param(query_target(resource, query), "watch", "true");
  target = add_param(target, "allowWatchBookmarks", "true");
  target = add_param(target, "resourceVersion", resource_version);
  target = add_param(target, "timeoutSeconds", std::to_string(timeout_seconds));
  const auto silence_limit =
      std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds + k_watch_grace_seconds);
  deadline = std::min(deadline, silence_limit);

  auto response = request("watch", resource, target, deadline, interrupt);
  const std::string doing = failed_to("watch", resource, m_config.server());
  if (response.head.status != 200) {
    auto body = response.connection.read_body(deadline, k_max_event_bytes);
    throw http_error(response.head.status, body ? status_message(*body, response.head.reason) : response.head.reason,
                     "watch", resource, m_config.server());
  }
  WatchDecoder decoder(resource, m_config.server());
  for (;;) {
    auto part = response.connection.read_some(deadline);
    if (!part) {
      throw transport_error(part.error(), doing);
    }
    if (part->empty()) {
      return;  // the server ended the watch
    }
    decoder.feed(*part, on_event);
  }
}

ObjectList decode_list(std::string_view body, const std::string& doing) {
  auto json = nlohmann::json::parse(body, nullptr, false);
  if (!json.is_object() || !json.contains("items") || !(json["items"].is_array() || json["items"].is_null())) {
    throw KubeError(Kind::bad_response, 200, doing + ": the response is not a list");
  }
  ObjectList list;
  if (const auto metadata = json.find("metadata"); metadata != json.end() && metadata->is_object()) {
    // value() would throw nlohmann's type_error for a field of another type: such a list is not the API's.
    for (auto [key, field] :
         {std::pair{"resourceVersion", &list.resource_version}, std::pair{"continue", &list.continue_token}}) {
      if (const auto found = metadata->find(key); found != metadata->end()) {
        if (!found->is_string()) {
          throw KubeError(Kind::bad_response, 200, doing + ": metadata." + key + " of the list is not a string");
        }
        *field = found->get<std::string>();
      }
    }
  }
  if (json["items"].is_array()) {
    for (auto& item : json["items"]) {
      list.items.push_back(std::move(item));
    }
  }
  return list;
}

WatchDecoder::WatchDecoder(KubeResource resource, std::string server)
    : m_resource(std::move(resource)), m_server(std::move(server)) {}

void WatchDecoder::feed(std::string_view chunk, const std::function<void(WatchEvent&&)>& on_event) {
  m_pending += chunk;
  std::size_t start = 0;
  for (std::size_t eol; (eol = m_pending.find('\n', start)) != std::string::npos; start = eol + 1) {
    const std::string_view line(m_pending.data() + start, eol - start);
    if (line.find_first_not_of(" \r\t") == std::string_view::npos) {
      continue;
    }
    auto event = nlohmann::json::parse(line, nullptr, false);
    if (!event.is_object() || !event.contains("type") || !event["type"].is_string() || !event.contains("object")) {
      throw KubeError(KubeError::Kind::bad_response, 200,
                      failed_to("watch", m_resource, m_server) + ": malformed watch event");
    }
    const std::string type = event["type"].get<std::string>();
    if (type == "ERROR") {
      const auto& status = event["object"];
      const auto number = status.is_object() ? status.find("code") : status.end();
      const int code = number != status.end() && number->is_number_integer() && number->get<int64_t>() >= 100 &&
                               number->get<int64_t>() <= 599
                           ? static_cast<int>(number->get<int64_t>())
                           : 500;
      const auto text = status.is_object() ? status.find("message") : status.end();
      throw http_error(code, text != status.end() && text->is_string() ? text->get<std::string>() : "", "watch",
                       m_resource, m_server);
    }
    on_event(WatchEvent{event_type(type), std::move(event["object"])});
  }
  m_pending.erase(0, start);
  if (m_pending.size() > k_max_event_bytes) {
    throw KubeError(KubeError::Kind::bad_response, 200,
                    failed_to("watch", m_resource, m_server) + ": a watch event is larger than 16 MiB");
  }
}

}  // namespace hoist
