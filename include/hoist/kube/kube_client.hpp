#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "hoist/kube/https_connection.hpp"
#include "hoist/kube/kube_config.hpp"
#include "hoist/util/error.hpp"

namespace hoist {

/// A kind of Kubernetes object and where it lives.
struct KubeResource {
  std::string group;       ///< "" for the core group
  std::string version;     ///< "v1"
  std::string plural;      ///< "plans", "nodes"
  std::string namespace_;  ///< "" for cluster-scoped resources

  static KubeResource plans(std::string namespace_name) {
    return {"upgrade.cattle.io", "v1", "plans", std::move(namespace_name)};
  }
  static KubeResource nodes() { return {"", "v1", "nodes", ""}; }
  static KubeResource events(std::string namespace_name) {
    return {"events.k8s.io", "v1", "events", std::move(namespace_name)};
  }

  /// "plans.upgrade.cattle.io in namespace 'ns'", "nodes": how messages name it.
  [[nodiscard]] std::string display() const;
  /// The collection's path, e.g. "/apis/upgrade.cattle.io/v1/namespaces/ns/plans".
  [[nodiscard]] std::string path() const;
};

/// Server-side filters of a LIST or WATCH.
struct ListQuery {
  std::string label_selector;
  std::string field_selector;

  friend bool operator==(const ListQuery&, const ListQuery&) = default;
};

/// A LIST response, or one page of it.
struct ObjectList {
  std::string resource_version;
  std::vector<nlohmann::json> items;
  std::string continue_token;  ///< metadata.continue: "" on a whole list and on its last page
};

/// Which page of a LIST to ask for.
struct ListPage {
  std::size_t limit = 0;       ///< at most this many items (0: all of them, in one response)
  std::string continue_token;  ///< the previous page's token; "" for the first page
};

struct WatchEvent {
  enum class Type { added, modified, deleted, bookmark };
  Type type = Type::added;
  nlohmann::json object;
};

/// A failed API call, with what the caller needs to decide whether to retry.
/// The message names the verb, the resource and the server; never the token.
class KubeError : public Failure {
 public:
  enum class Kind {
    unreachable,   ///< connect, reset, 5xx, 429: retry with backoff
    timeout,       ///< the deadline passed
    interrupted,   ///< the caller's WakeFlag was raised
    tls,           ///< the server's certificate did not verify: fatal
    unauthorized,  ///< 401 even after re-reading the token: fatal
    forbidden,     ///< 403, RBAC: fatal
    gone,          ///< 410, the resourceVersion is too old: list again
    not_found,     ///< 404, e.g. the Plan CRD is not installed: retry
    rejected,      ///< any other 4xx: fatal
    bad_response,  ///< not what the API sends: retry
  };
  KubeError(Kind kind, int status, const std::string& message) : Failure(message), m_kind(kind), m_status(status) {}
  [[nodiscard]] Kind kind() const noexcept { return m_kind; }
  [[nodiscard]] int status() const noexcept { return m_status; }
  /// Whether waiting and trying again may help.
  [[nodiscard]] bool retryable() const noexcept {
    return m_kind == Kind::unreachable || m_kind == Kind::not_found || m_kind == Kind::bad_response;
  }

 private:
  Kind m_kind;
  int m_status;
};

/// LIST, GET, WATCH, CREATE and PATCH against the Kubernetes API over HTTPS, JSON decoded. One
/// connection per request (a watch holds its own for its lifetime). Safe to use
/// from several threads at once. Every call throws KubeError on failure; a 401
/// re-reads the token file and retries once, since projected tokens rotate.
class KubeClient {
 public:
  /// Builds the TLS context; throws hoist::Failure when the CA or client
  /// certificate cannot be loaded.
  explicit KubeClient(KubeConfig config);

  /// LIST the collection: its items and the list's resourceVersion, all of them or the `page` asked for
  /// (`limit` and `continue`; the server may ignore the limit). A continue token the server no longer
  /// holds is KubeError `gone` (410 Expired).
  ObjectList list(const KubeResource& resource, const ListQuery& query, Deadline deadline,
                  const WakeFlag* interrupt = nullptr, const ListPage& page = {}) const;

  /// GET the object `name` of the collection. A 404 (no such object) is KubeError `not_found`.
  nlohmann::json get(const KubeResource& resource, const std::string& name, Deadline deadline,
                     const WakeFlag* interrupt = nullptr) const;

  /// WATCH from `resource_version` with bookmarks, calling `on_event` for every
  /// event as it arrives. Returns when the server ends the watch (after
  /// `timeout_seconds`, which it is asked for); throws KubeError `gone` for a 410,
  /// whether as the response status or as an ERROR event inside the stream.
  void watch(const KubeResource& resource, const ListQuery& query, const std::string& resource_version,
             int timeout_seconds, Deadline deadline, const WakeFlag* interrupt,
             const std::function<void(WatchEvent&&)>& on_event) const;

  /// CREATE (POST) `object` in the collection; returns the object the server stored. An object of that name
  /// already there is KubeError `rejected` with status 409.
  nlohmann::json create(const KubeResource& resource, const nlohmann::json& object, Deadline deadline,
                        const WakeFlag* interrupt = nullptr) const;

  /// PATCH the object `name` with a JSON merge patch (RFC 7386); returns the object the server stored. A
  /// patch that names a metadata.resourceVersion the object no longer has is KubeError `rejected` with status
  /// 409 (Conflict); no such object is `not_found`.
  nlohmann::json patch(const KubeResource& resource, const std::string& name, const nlohmann::json& merge_patch,
                       Deadline deadline, const WakeFlag* interrupt = nullptr) const;

  [[nodiscard]] const KubeConfig& config() const noexcept { return m_config; }

 private:
  struct Response;
  /// What a request sends after its head: a POST of JSON, or a PATCH of a merge patch.
  struct Body {
    const char* method;
    const char* content_type;
    const std::string& text;
  };
  /// Sends a GET (or, with a `body`, its method with that body) and reads the response head; handles 401 by
  /// reloading the token. `verb` is the RBAC verb, for messages.
  Response request(const std::string& verb, const KubeResource& resource, const std::string& target, Deadline deadline,
                   const WakeFlag* interrupt, const Body* body = nullptr) const;
  /// Reads the body of a response that must be `ok` (or 201 for a create) and a JSON object.
  nlohmann::json read_object(Response& response, const std::string& verb, const KubeResource& resource,
                             Deadline deadline) const;

  KubeConfig m_config;
  TlsContext m_tls;
};

/// A LIST response body (one page or the whole list): its items, resourceVersion and continue token.
/// Throws KubeError bad_response, its message beginning with `doing`, for a body that is not a JSON
/// object with an `items` array (or null), or whose resourceVersion or continue is not a string.
ObjectList decode_list(std::string_view body, const std::string& doing);

/// The events of a watch response body: newline-delimited JSON objects whose
/// boundaries fall anywhere in the chunks the connection returns.
class WatchDecoder {
 public:
  /// `resource` and `server` name the watch in errors.
  WatchDecoder(KubeResource resource, std::string server);

  /// Takes the next chunk of the body and calls `on_event` for each event it
  /// completes. Throws KubeError: bad_response for a line that is not an event
  /// or an event over 16 MiB, the API's own status for an ERROR event.
  void feed(std::string_view chunk, const std::function<void(WatchEvent&&)>& on_event);

 private:
  KubeResource m_resource;
  std::string m_server;
  std::string m_pending;
};

/// Percent-encodes a query parameter value (RFC 3986 unreserved kept).
std::string url_encode(std::string_view text);

}  // namespace hoist
