#include <catch2/catch.hpp>

#include "hoist/model/suc_context.hpp"
#include "hoist/util/error.hpp"
#include "scoped_temp_dir.hpp"

using hoist::SucContext;
using hoist::test::ScopedTempDir;
using hoist::test::write_text;

// The environment and files exactly as system-upgrade-controller's job.go gives
// them to a Job's container: node/pod env, the Plan's envs, then the plan
// name, hash and munged version; downward-API files for labels and annotations;
// secrets and the service account mounted under fixed paths.
TEST_CASE("the SUC contract is read from the env and files job.go provides", "[suc]") {
  ScopedTempDir container;
  write_text(container / "run/system-upgrade/pod/labels",
             "controller-uid=\"3f1c\"\njob-name=\"apply-k3s-server-on-node-1-with-5e6a\"\n"
             "plan.upgrade.cattle.io/k3s-server=\"5e6a\"\nupgrade.cattle.io/node=\"node-1\"\n");
  write_text(container / "run/system-upgrade/pod/annotations",
             "kubernetes.io/config.seen=\"2026-11-21T10:00:00Z\"\nnote=\"line one\\nline \\\"two\\\"\"\n");
  write_text(container / "run/system-upgrade/secrets/hoist-keys/signing.pub", "key");
  write_text(container / "var/run/secrets/kubernetes.io/serviceaccount/namespace", "system-upgrade");

  const hoist::Environment env{
      {"SYSTEM_UPGRADE_NODE_NAME", "node-1"},
      {"SYSTEM_UPGRADE_POD_NAME", "apply-k3s-server-on-node-1-with-5e6a-abcde"},
      {"SYSTEM_UPGRADE_POD_UID", "0d9f8e7c-0000-4000-8000-000000000001"},
      {"HOIST_EXTRA", "from the Plan's envs"},
      {"SYSTEM_UPGRADE_PLAN_NAME", "k3s-server"},
      {"SYSTEM_UPGRADE_PLAN_LATEST_HASH", "5e6a"},
      {"SYSTEM_UPGRADE_PLAN_LATEST_VERSION", "v1.30.1-k3s1"},
      {"KUBERNETES_SERVICE_HOST", "10.43.0.1"},
      {"KUBERNETES_SERVICE_PORT", "443"},
  };
  const SucContext suc = SucContext::load(env, container.path());
  CHECK(suc.in_job());
  CHECK(suc.node_name == "node-1");
  CHECK(suc.pod_name == "apply-k3s-server-on-node-1-with-5e6a-abcde");
  CHECK(suc.pod_uid == "0d9f8e7c-0000-4000-8000-000000000001");
  CHECK(suc.plan_name == "k3s-server");
  CHECK(suc.plan_latest_hash == "5e6a");
  CHECK(suc.plan_latest_version == "v1.30.1-k3s1");
  CHECK(suc.kubernetes_service_host == "10.43.0.1");
  CHECK(suc.kubernetes_service_port == "443");
  CHECK(suc.labels.at("plan.upgrade.cattle.io/k3s-server") == "5e6a");
  CHECK(suc.labels.size() == 4);
  CHECK(suc.annotations.at("note") == "line one\nline \"two\"");
  CHECK(suc.secrets_dir == container / "run/system-upgrade/secrets");
  CHECK(suc.service_account_dir == container / "var/run/secrets/kubernetes.io/serviceaccount");
}

TEST_CASE("outside a Job the contract is empty", "[suc]") {
  ScopedTempDir container;
  const SucContext suc = SucContext::load({}, container.path());
  CHECK_FALSE(suc.in_job());
  CHECK(suc.labels.empty());
  CHECK(suc.secrets_dir.empty());
}

TEST_CASE("a malformed downward-API file is refused with its line", "[suc]") {
  CHECK_THROWS_WITH(hoist::parse_downward_api("a=\"1\"\nbroken\n", "/pod/labels"),
                    "'/pod/labels' line 2: expected key=\"value\"");
  CHECK_THROWS_WITH(hoist::parse_downward_api("a=unquoted\n", "/pod/labels"),
                    "'/pod/labels' line 1: expected a double-quoted value");
  CHECK_THROWS_WITH(hoist::parse_downward_api("a=\"\\xZZ\"\n", "/pod/labels"), "'/pod/labels' line 1: malformed \\x escape");
  CHECK(hoist::parse_downward_api("a=\"\\x41\"\n", "x").at("a") == "A");
}
