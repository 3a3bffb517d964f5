#include <catch2/catch.hpp>

#include "hoist/kube/kube_config.hpp"
#include "hoist/model/suc_context.hpp"
#include "hoist/util/error.hpp"
#include "scoped_temp_dir.hpp"

using hoist::BearerToken;
using hoist::KubeConfig;
using hoist::UsageError;
using hoist::test::ScopedTempDir;
using hoist::test::write_text;

namespace {

// "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n" in base64: the
// config only carries the PEM; TlsContext parses it.
constexpr const char* k_ca_base64 = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCkNBCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K";
constexpr const char* k_ca_pem = "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n";

std::string kubeconfig(const std::string& cluster_extra, const std::string& user) {
  return "apiVersion: v1\nkind: Config\n"
         "clusters:\n- name: other\n  cluster:\n    server: https://other:1\n"
         "- name: k3s\n  cluster:\n    server: https://[fd00::1]:6443\n" +
         cluster_extra +
         "contexts:\n- name: ctx\n  context:\n    cluster: k3s\n    user: admin\n    namespace: system-upgrade\n"
         "current-context: ctx\n"
         "users:\n- name: admin\n  user:\n" +
         user;
}

}  // namespace

TEST_CASE("server URLs are split into host and port, IPv6 in brackets", "[kube_config]") {
  std::string host;
  std::uint16_t port = 0;
  hoist::parse_server_url("https://10.43.0.1", "test", host, port);
  CHECK((host == "10.43.0.1" && port == 443));
  hoist::parse_server_url("https://[fd00::1]:6443/", "test", host, port);
  CHECK((host == "fd00::1" && port == 6443));
  hoist::parse_server_url("https://api.example:8443", "test", host, port);
  CHECK((host == "api.example" && port == 8443));
  CHECK_THROWS_WITH(hoist::parse_server_url("http://10.0.0.1", "test", host, port),
                    "test: the server URL 'http://10.0.0.1' is not https://: hoist only talks TLS to the API server");
  CHECK_THROWS_WITH(hoist::parse_server_url("https://h:99999", "test", host, port), "test: invalid port '99999'");
  CHECK_THROWS_WITH(hoist::parse_server_url("https://h/k8s", "test", host, port),
                    "test: a path in the server URL 'https://h/k8s' is not supported");
  // Credentials in the URL never reach the message (found by integration/test_secrets.py).
  for (const char* url :
       {"https://admin:s3cr3t@10.0.0.1:6443", "http://admin:s3cr3t@10.0.0.1", "s3cr3t@host", "https://s3cr3t@h/k8s"}) {
    try {
      hoist::parse_server_url(url, "test", host, port);
      FAIL("accepted " << url);
    } catch (const hoist::UsageError& e) {
      CHECK(std::string(e.what()).find("s3cr3t") == std::string::npos);
      CHECK(std::string(e.what()).find("<redacted>@") != std::string::npos);
    }
  }
  CHECK_THROWS_AS(hoist::parse_server_url("https://[fd00::1:6443", "test", host, port), UsageError);
}

TEST_CASE("a server URL's path is a prefix of every API path, when the caller takes one", "[kube_config]") {
  std::string host;
  std::uint16_t port = 0;
  std::string prefix = "stale";
  hoist::parse_server_url("https://rancher.example/k8s/clusters/c-m-4x2b/", "test", host, port, &prefix);
  CHECK((host == "rancher.example" && port == 443 && prefix == "/k8s/clusters/c-m-4x2b"));
  hoist::parse_server_url("https://[fd00::1]:6443/", "test", host, port, &prefix);
  CHECK(prefix.empty());
  for (const char* url :
       {"https://h/a?b", "https://h/a#b", "https://h/a/../b", "https://h/a//b", "https://h/a/.", "https://h/a%2Fb"}) {
    CHECK_THROWS_WITH(hoist::parse_server_url(url, "test", host, port, &prefix),
                      Catch::Contains("must be plain segments, as /k8s/clusters/<id>"));
  }
}

TEST_CASE("in-cluster config comes from the service account and the service env", "[kube_config]") {
  ScopedTempDir container;
  write_text(container / "var/run/secrets/kubernetes.io/serviceaccount/token", "secret-1\n");
  write_text(container / "var/run/secrets/kubernetes.io/serviceaccount/ca.crt", k_ca_pem);
  write_text(container / "var/run/secrets/kubernetes.io/serviceaccount/namespace", "system-upgrade");
  const auto suc = hoist::SucContext::load(
      {{"KUBERNETES_SERVICE_HOST", "fd00:43::1"}, {"KUBERNETES_SERVICE_PORT", "443"}}, container.path());
  const auto config = KubeConfig::in_cluster(suc);
  CHECK(config.server() == "[fd00:43::1]:443");
  CHECK(config.tls.ca_pem == k_ca_pem);
  CHECK(config.token->value() == "secret-1");
  CHECK(config.default_namespace == "system-upgrade");

  CHECK_THROWS_WITH(KubeConfig::in_cluster(hoist::SucContext::load({}, container.path())),
                    Catch::Contains("not running in a Kubernetes pod") && Catch::Contains("use --kubeconfig FILE"));
}

TEST_CASE("a rotated token file is re-read, and only a changed token counts", "[kube_config]") {
  ScopedTempDir dir;
  write_text(dir / "token", "one");
  const auto token = BearerToken::from_file(dir / "token");
  CHECK(token->value() == "one");
  CHECK_FALSE(token->reload("one"));
  write_text(dir / "token", "two\n");
  CHECK(token->reload("one"));
  CHECK(token->value() == "two");
  // Two requests refused with "one" at once (the nodes and plans watches): the
  // second finds the file already re-read by the first, and retries all the same.
  CHECK(token->reload("one"));
  CHECK_FALSE(token->reload("two"));
  CHECK_FALSE(BearerToken::fixed("x")->reload("x"));
  CHECK_THROWS_WITH(BearerToken::from_file(dir / "missing"), Catch::StartsWith("failed to read the bearer token: "));
}

TEST_CASE("a YAML kubeconfig gives server, CA data, token and namespace of the current context", "[kube_config]") {
  ScopedTempDir dir;
  // Built with += : GCC 12 gives a false -Warray-bounds for string("...") + const char*.
  std::string ca_line = "    certificate-authority-data: ";
  ca_line += k_ca_base64;
  ca_line += "\n";
  write_text(dir / "config", kubeconfig(ca_line, "    token: abc.def\n"));
  const auto config = KubeConfig::from_kubeconfig(dir / "config");
  CHECK(config.host == "fd00::1");
  CHECK(config.port == 6443);
  CHECK(config.tls.ca_pem == k_ca_pem);
  CHECK(config.token->value() == "abc.def");
  CHECK(config.default_namespace == "system-upgrade");
}

TEST_CASE("kubeconfig file references are relative to the kubeconfig", "[kube_config]") {
  ScopedTempDir dir;
  write_text(dir / "pki/ca.crt", k_ca_pem);
  write_text(dir / "pki/token", "from-file\n");
  write_text(dir / "pki/client.crt", "CERT");
  write_text(dir / "pki/client.key", "KEY");
  write_text(dir / "config", kubeconfig("    certificate-authority: pki/ca.crt\n",
                                        "    tokenFile: pki/token\n    client-certificate: pki/client.crt\n"
                                        "    client-key: pki/client.key\n"));
  const auto config = KubeConfig::from_kubeconfig(dir / "config");
  CHECK(config.tls.ca_pem == k_ca_pem);
  CHECK(config.token->value() == "from-file");
  CHECK(config.tls.client_cert_pem == "CERT");
  CHECK(config.tls.client_key_pem == "KEY");
}

TEST_CASE("kubeconfigs that would skip verification or run plugins are refused", "[kube_config]") {
  ScopedTempDir dir;
  write_text(dir / "insecure", kubeconfig("    insecure-skip-tls-verify: true\n", "    token: t\n"));
  CHECK_THROWS_WITH(
      KubeConfig::from_kubeconfig(dir / "insecure"),
      Catch::EndsWith("insecure-skip-tls-verify is set; hoist always verifies the API server's certificate"));
  write_text(dir / "exec", kubeconfig("", "    exec:\n      command: aws\n"));
  CHECK_THROWS_WITH(KubeConfig::from_kubeconfig(dir / "exec"),
                    Catch::Contains("uses an exec or auth-provider plugin, which hoist does not run"));
  write_text(dir / "nocontext", "apiVersion: v1\nkind: Config\n");
  CHECK_THROWS_WITH(KubeConfig::from_kubeconfig(dir / "nocontext"),
                    "kubeconfig '" + (dir / "nocontext").string() + "': no current-context (give --context)");
  write_text(dir / "badyaml", "clusters: [\n");
  CHECK_THROWS_WITH(KubeConfig::from_kubeconfig(dir / "badyaml"), Catch::StartsWith("failed to parse '"));
}
