#include "hoist/kube/kube_config.hpp"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <charconv>

#include <nlohmann/json.hpp>

#include "hoist/kube/https_connection.hpp"
#include "hoist/model/input_file.hpp"
#include "hoist/model/suc_context.hpp"
#include "hoist/sys/base64.hpp"
#include "hoist/sys/secrets.hpp"
#include "hoist/sys/yaml_document.hpp"
#include "hoist/util/error.hpp"
#include "hoist/util/file_io.hpp"
#include "hoist/util/text.hpp"

namespace hoist {

namespace {

constexpr std::size_t k_max_config_bytes = 4U << 20U;

Expected<std::string> read_small_file(const std::filesystem::path& path) {
  return read_file_at(AT_FDCWD, path.string(), path.string(), k_max_config_bytes);
}

std::string strip_newlines(std::string token) {
  // kubectl and client-go trim the token file: editors add a final newline.
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ')) {
    token.pop_back();
  }
  return token;
}

std::uint16_t parse_port(std::string_view text, const std::string& what) {
  unsigned value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value == 0 || value > 65535) {
    throw UsageError(what + ": invalid port '" + std::string(text) + "'");
  }
  return static_cast<std::uint16_t>(value);
}

// One file of a kubeconfig: its content, and the directory its relative paths are relative to.
struct KubeconfigFile {
  nlohmann::json config;
  std::filesystem::path base;
};

// A named entry of a kubeconfig list (clusters, users, contexts) and the directory of the file it came from.
struct NamedEntry {
  const nlohmann::json& value;
  const std::filesystem::path& base;
};

// The named entry, from the first file that has it: kubectl's merge of a KUBECONFIG list.
NamedEntry find_named(const std::vector<KubeconfigFile>& files, const std::string& list, const std::string& name,
                      const char* field, const std::string& source) {
  static const nlohmann::json k_empty = nlohmann::json::object();
  for (const KubeconfigFile& file : files) {
    if (const auto it = file.config.find(list); it != file.config.end() && it->is_array()) {
      for (const auto& entry : *it) {
        if (entry.is_object() && entry.value("name", nlohmann::json()) == name) {
          const auto inner = entry.find(field);
          return {inner != entry.end() && inner->is_object() ? *inner : k_empty, file.base};
        }
      }
    }
  }
  throw UsageError(source + ": no entry '" + escaped(name) + "' in " + list);
}

std::string string_field(const nlohmann::json& object, const char* key, const std::string& source) {
  const auto it = object.find(key);
  std::string text = it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
  // YAML spells a NUL ("\0"), which would cut a file name short, and a CR or LF in the server or the token would
  // end up inside an HTTP request line or header. No kubeconfig field holds one.
  if (has_control_character(text)) {
    throw UsageError(source + ": field '" + key + "' must not contain control characters");
  }
  return text;
}

std::filesystem::path relative_to(const std::filesystem::path& base, const std::string& path) {
  const std::filesystem::path p(path);
  return p.is_absolute() ? p : base / p;
}

// PEM from "<field>-data" (base64) or "<field>" (a file), as client-go reads them.
std::string pem_field(const nlohmann::json& object, const std::string& field, const std::filesystem::path& base,
                      const std::string& source) {
  if (const std::string data = string_field(object, (field + "-data").c_str(), source); !data.empty()) {
    // A field that is not base64 is bad input, like any other malformed field.
    Expected<std::string> pem = base64_decode(data, source + " " + field + "-data");
    if (!pem) {
      throw UsageError(pem.error().message);
    }
    return std::move(*pem);
  }
  if (const std::string file = string_field(object, field.c_str(), source); !file.empty()) {
    return read_input_file(relative_to(base, file), k_max_config_bytes);
  }
  return {};
}

}  // namespace

BearerToken::~BearerToken() {
  secure_erase(m_token);
}

std::shared_ptr<BearerToken> BearerToken::from_file(const std::filesystem::path& file) {
  auto text = read_small_file(file);
  if (!text) {
    const std::string message = "failed to read the bearer token: " + text.error().message;
    if (text.error().errnum == EINVAL) {  // not a regular file (a FIFO, a directory): a wrong path given
      throw UsageError(message);
    }
    throw Failure(message);
  }
  std::string token = strip_newlines(std::move(*text));
  if (has_control_character(token)) {  // it goes into an HTTP header; the message never quotes it
    secure_erase(token);
    throw Failure("failed to read the bearer token: '" + file.string() + "' holds control characters");
  }
  return std::shared_ptr<BearerToken>(new BearerToken(std::move(token), file));
}

std::shared_ptr<BearerToken> BearerToken::fixed(std::string token) {
  return std::shared_ptr<BearerToken>(new BearerToken(std::move(token), {}));
}

std::string BearerToken::value() const {
  const std::lock_guard lock(m_mutex);
  return m_token;
}

bool BearerToken::reload(const std::string& refused) {
  if (m_file.empty()) {
    return false;
  }
  auto text = read_small_file(m_file);
  if (!text) {
    return false;
  }
  std::string fresh = strip_newlines(std::move(*text));
  if (has_control_character(fresh)) {  // as from_file(): never sent as a header
    secure_erase(fresh);
    return false;
  }
  const std::lock_guard lock(m_mutex);
  if (fresh != m_token) {
    secure_erase(m_token);
    m_token = std::move(fresh);
  } else {
    secure_erase(fresh);
  }
  return m_token != refused;
}

std::string KubeConfig::server() const {
  return host_port(host, port);
}

namespace {

// The URL as messages may show it: a user and password before '@' (which kubectl
// never writes, but a hand-made kubeconfig may) replaced by "<redacted>".
std::string without_userinfo(const std::string& url) {
  const auto authority = url.find("://");
  const size_t start = authority == std::string::npos ? 0 : authority + 3;
  const size_t end = std::min(url.find('/', start), url.size());
  const auto at = url.rfind('@', end == 0 ? 0 : end - 1);
  if (at == std::string::npos || at < start) {
    return url;
  }
  return url.substr(0, start) + "<redacted>" + url.substr(at);
}

}  // namespace

void parse_server_url(const std::string& raw_url, const std::string& what, std::string& host, std::uint16_t& port,
                      std::string* path_prefix) {
  // Every message below shows the URL without credentials: they must never reach a log.
  const std::string url = without_userinfo(raw_url);
  if (url != raw_url) {
    throw UsageError(what + ": the server URL '" + url +
                     "' carries credentials, which hoist does not send: give a token or a client certificate");
  }
  const std::string scheme = "https://";
  if (url.rfind(scheme, 0) != 0) {
    throw UsageError(what + ": the server URL '" + url + "' is not https://: hoist only talks TLS to the API server");
  }
  std::string rest = url.substr(scheme.size());
  if (path_prefix != nullptr) {
    path_prefix->clear();
  }
  if (const auto slash = rest.find('/'); slash != std::string::npos) {
    std::string path = rest.substr(slash);
    while (!path.empty() && path.back() == '/') {
      path.pop_back();
    }
    if (!path.empty()) {
      if (path_prefix == nullptr) {
        throw UsageError(what + ": a path in the server URL '" + url + "' is not supported");
      }
      // The prefix goes into the request line as it is: no query, fragment, space or percent sign that would
      // change what the proxy in front of the API server (Rancher's /k8s/clusters/<id>) is asked for.
      if (path.find_first_of("?# %\\\"") != std::string::npos || path.find("//") != std::string::npos ||
          path.find("/../") != std::string::npos || path.ends_with("/..") || path.find("/./") != std::string::npos ||
          path.ends_with("/.")) {
        throw UsageError(what + ": the path of the server URL '" + escaped(url) +
                         "' must be plain segments, as /k8s/clusters/<id>");
      }
      *path_prefix = path;
    }
    rest.erase(slash);
  }
  port = 443;
  if (!rest.empty() && rest.front() == '[') {
    const auto close = rest.find(']');
    if (close == std::string::npos) {
      throw UsageError(what + ": unbalanced '[' in the server URL '" + url + "'");
    }
    host = rest.substr(1, close - 1);
    const std::string tail = rest.substr(close + 1);
    if (!tail.empty()) {
      if (tail.front() != ':') {
        throw UsageError(what + ": invalid server URL '" + url + "'");
      }
      port = parse_port(tail.substr(1), what);
    }
  } else {
    const auto colon = rest.find(':');
    host = rest.substr(0, colon);
    if (colon != std::string::npos) {
      port = parse_port(std::string_view(rest).substr(colon + 1), what);
    }
  }
  if (host.empty()) {
    throw UsageError(what + ": no host in the server URL '" + url + "'");
  }
}

KubeConfig KubeConfig::in_cluster(const SucContext& suc) {
  if (suc.kubernetes_service_host.empty() || suc.kubernetes_service_port.empty() || suc.service_account_dir.empty()) {
    throw UsageError(
        "not running in a Kubernetes pod (KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT or the service account at "
        "/var/run/secrets/kubernetes.io/serviceaccount is missing); use --kubeconfig FILE");
  }
  KubeConfig config;
  // KUBERNETES_SERVICE_HOST holds an IPv6 service IP bare; host_port() brackets it.
  config.host = suc.kubernetes_service_host;
  config.port = parse_port(suc.kubernetes_service_port, "KUBERNETES_SERVICE_PORT");
  const auto ca = suc.service_account_dir / "ca.crt";
  config.tls.ca_pem = read_small_file(ca).value();
  config.tls_source = "'" + ca.string() + "'";
  config.token = BearerToken::from_file(suc.service_account_dir / "token");
  if (auto ns = read_small_file(suc.service_account_dir / "namespace")) {
    config.default_namespace = strip_newlines(std::move(*ns));
  }
  return config;
}

KubeConfig KubeConfig::from_kubeconfig(const std::filesystem::path& file, const std::string& context) {
  return from_kubeconfigs({file}, context);
}

KubeConfig KubeConfig::from_kubeconfigs(const std::vector<std::filesystem::path>& paths, const std::string& context) {
  std::string names;
  for (const auto& path : paths) {
    names += (names.empty() ? "" : ":") + path.string();
  }
  const std::string source = "kubeconfig '" + names + "'";
  std::vector<KubeconfigFile> files;
  std::string context_name = context;
  for (const auto& path : paths) {
    const auto text = read_input_file(path, k_max_config_bytes);
    auto parsed = parse_yaml(text, path.string());
    if (!parsed) {
      throw UsageError(parsed.error().message);
    }
    if (!parsed->is_object()) {
      throw UsageError("kubeconfig '" + path.string() + "': not a kubeconfig");
    }
    // The first file that names a current context names it, as kubectl merges.
    if (context_name.empty()) {
      context_name = string_field(*parsed, "current-context", "kubeconfig '" + path.string() + "'");
    }
    files.push_back({std::move(*parsed), path.parent_path()});
  }
  if (context_name.empty()) {
    throw UsageError(source + ": no current-context (give --context)");
  }
  const NamedEntry context_entry = find_named(files, "contexts", context_name, "context", source);
  const nlohmann::json& context_object = context_entry.value;
  const NamedEntry cluster_entry =
      find_named(files, "clusters", string_field(context_object, "cluster", source), "cluster", source);
  const nlohmann::json& cluster = cluster_entry.value;
  const std::string user_name = string_field(context_object, "user", source);
  static const nlohmann::json k_no_user = nlohmann::json::object();
  static const std::filesystem::path k_no_base;
  const NamedEntry user_entry =
      user_name.empty() ? NamedEntry{k_no_user, k_no_base} : find_named(files, "users", user_name, "user", source);
  const nlohmann::json& user = user_entry.value;

  KubeConfig result;
  parse_server_url(string_field(cluster, "server", source), source, result.host, result.port, &result.path_prefix);
  // kubectl reads YAML 1.1: `yes`, `on` and `Y` are true as much as `true` is.
  if (const auto insecure = string_field(cluster, "insecure-skip-tls-verify", source);
      !insecure.empty() && !yaml_false(insecure)) {
    if (!yaml_true(insecure)) {
      throw UsageError(source + ": insecure-skip-tls-verify: expected true or false");
    }
    throw UsageError(source + ": insecure-skip-tls-verify is set; hoist always verifies the API server's certificate");
  }
  if (!string_field(cluster, "tls-server-name", source).empty() ||
      !string_field(cluster, "proxy-url", source).empty()) {
    throw UsageError(source + ": tls-server-name and proxy-url are not supported");
  }
  result.tls.ca_pem = pem_field(cluster, "certificate-authority", cluster_entry.base, source);
  result.tls_source = source;
  if (user.contains("exec") || user.contains("auth-provider")) {
    throw UsageError(source + ": user '" + user_name +
                     "' uses an exec or auth-provider plugin, which hoist does not run; "
                     "use a token, tokenFile or client certificate");
  }
  result.tls.client_cert_pem = pem_field(user, "client-certificate", user_entry.base, source);
  result.tls.client_key_pem = pem_field(user, "client-key", user_entry.base, source);
  if (const std::string token = string_field(user, "token", source); !token.empty()) {
    result.token = BearerToken::fixed(token);
  } else if (const std::string token_file = string_field(user, "tokenFile", source); !token_file.empty()) {
    result.token = BearerToken::from_file(relative_to(user_entry.base, token_file));
  }
  result.default_namespace = string_field(context_object, "namespace", source);
  if (result.default_namespace.empty()) {
    result.default_namespace = "default";
  }
  return result;
}

}  // namespace hoist
