#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "hoist/sys/tls_context.hpp"

namespace hoist {

struct SucContext;

/// A bearer token, fixed or read from a file that may be replaced under us
/// (projected service account tokens rotate): reload() re-reads it after a 401.
/// Shared by the threads of one client. The token is only ever put into an
/// Authorization header: it has no stream operator and no error names it.
class BearerToken {
 public:
  /// A token read from `file` now; throws hoist::Failure when it cannot be read.
  static std::shared_ptr<BearerToken> from_file(const std::filesystem::path& file);
  /// A token given inline (kubeconfig `token`).
  static std::shared_ptr<BearerToken> fixed(std::string token);

  BearerToken(const BearerToken&) = delete;
  BearerToken& operator=(const BearerToken&) = delete;
  ~BearerToken();

  /// The current token.
  [[nodiscard]] std::string value() const;
  /// After the server refused `refused`: re-reads the file, and returns whether
  /// the current token now differs from the refused one (false for a fixed
  /// token, or when the file cannot be read, which the next 401 then reports).
  /// Another request may have re-read it first: its refusal still counts.
  bool reload(const std::string& refused);

 private:
  BearerToken(std::string token, std::filesystem::path file) : m_token(std::move(token)), m_file(std::move(file)) {}

  mutable std::mutex m_mutex;
  std::string m_token;
  std::filesystem::path m_file;  // empty for a fixed token
};

/// Where the API server is and how to authenticate to it.
struct KubeConfig {
  std::string host;  ///< an IP literal or DNS name, without brackets
  std::uint16_t port = 443;
  TlsSettings tls;
  std::string tls_source;              ///< where the CA came from, for messages
  std::shared_ptr<BearerToken> token;  ///< null when a client certificate authenticates
  std::string default_namespace;       ///< the service account's, or the kubeconfig context's
  /// The path of the server URL ("" or "/k8s/clusters/c-abc", no trailing '/'): a proxy in front of the API
  /// server (Rancher's) serves it under that prefix, which goes before every API path.
  std::string path_prefix;

  /// "host:port" with an IPv6 host in brackets.
  [[nodiscard]] std::string server() const;

  /// In-cluster config, as client-go's rest.InClusterConfig: KUBERNETES_SERVICE_HOST
  /// and _PORT, and the service account's token, ca.crt and namespace from
  /// `suc.service_account_dir`. Throws hoist::UsageError outside a pod.
  static KubeConfig in_cluster(const SucContext& suc);

  /// The current context of a kubeconfig file (YAML or JSON): its cluster's
  /// `server` (https only) and `certificate-authority[-data]`, its user's `token`,
  /// `tokenFile` or `client-certificate[-data]` + `client-key[-data]`, and its
  /// namespace. Relative file paths are relative to the kubeconfig's directory.
  /// `insecure-skip-tls-verify`, exec and auth-provider plugins are refused with
  /// hoist::UsageError: hoist never talks to an unverified server and runs no
  /// helper programs.
  /// `context` names another context than the current one (kubectl's --context).
  static KubeConfig from_kubeconfig(const std::filesystem::path& file, const std::string& context = "");

  /// Several kubeconfig files merged as kubectl merges a KUBECONFIG list: the first file that sets
  /// current-context sets it; a cluster, user or context is taken from the first file that names it, and its
  /// relative paths are relative to that file's directory. Every file must exist (the caller drops the missing
  /// ones of a KUBECONFIG list, as kubectl does).
  static KubeConfig from_kubeconfigs(const std::vector<std::filesystem::path>& files, const std::string& context = "");
};

/// Splits an API server URL, "https://host[:port][/path]" with an IPv6 host in brackets. The path, without a
/// trailing '/', goes to `path_prefix`; without one, a path is refused. Throws hoist::UsageError naming `what`
/// for anything else.
void parse_server_url(const std::string& url, const std::string& what, std::string& host, std::uint16_t& port,
                      std::string* path_prefix = nullptr);

}  // namespace hoist
