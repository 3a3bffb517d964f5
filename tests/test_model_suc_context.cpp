#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

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

TEST_CASE("every escape Go's strconv.Quote writes is read back", "[suc]") {
  // What the kubelet writes (%q) for these values: the Plan annotations SUC copies onto the pod.
  const auto parsed = hoist::parse_downward_api(
      "bell=\"\\a\\b\\f\\v\\t\\r\\n\"\n"
      "zwsp=\"zwsp\\u200b here\"\n"
      "emoji=\"\\U0001f600 caf\xc3\xa9\"\n"
      "bytes=\"\\xff\\x41\"\n"
      "octal=\"\\101\\377\"\n"
      "quote=\"a \\\"b\\\" \\\\c\"\n"
      "empty=\"\"\n",
      "/pod/annotations");
  CHECK(parsed.unreadable.empty());
  CHECK(parsed.values.at("bell") == "\a\b\f\v\t\r\n");
  CHECK(parsed.values.at("zwsp") == "zwsp\xe2\x80\x8b here");
  CHECK(parsed.values.at("emoji") == "\xf0\x9f\x98\x80 caf\xc3\xa9");
  CHECK(parsed.values.at("bytes") == "\xff\x41");
  CHECK(parsed.values.at("octal") == "A\xff");
  CHECK(parsed.values.at("quote") == "a \"b\" \\c");
  CHECK(parsed.values.at("empty").empty());
}

TEST_CASE("a downward-API line that cannot be read is named and skipped, never a failure", "[suc]") {
  const auto parsed = hoist::parse_downward_api(
      "a=\"1\"\nbroken\nb=unquoted\nc=\"\\xZZ\"\nd=\"\\q\"\ne=\"\\ud800\"\nf=\"\\x00\"\ng=\"\\u0000\"\nh=\"\\400\"\n"
      "i=\"dangling\\\"\nj=\"2\"\n",
      "/pod/labels");
  CHECK(parsed.values == std::map<std::string, std::string>{{"a", "1"}, {"j", "2"}});
  CHECK(parsed.unreadable == std::vector<std::string>{
                                 "'/pod/labels' line 2: expected key=\"value\"",
                                 "'/pod/labels' line 3: expected a double-quoted value",
                                 "'/pod/labels' line 4: malformed \\x escape",
                                 "'/pod/labels' line 5: unknown escape '\\q'",
                                 "'/pod/labels' line 6: \\u escape of no Unicode character",
                                 "'/pod/labels' line 7: the value holds a NUL",
                                 "'/pod/labels' line 8: the value holds a NUL",
                                 "'/pod/labels' line 9: octal escape past 255",
                                 "'/pod/labels' line 10: dangling backslash",
                             });
}

TEST_CASE("the SUC contract is read with the unreadable lines as warnings", "[suc]") {
  ScopedTempDir container;
  write_text(container / "run/system-upgrade/pod/labels", "plan=\"k3s\"\n");
  write_text(container / "run/system-upgrade/pod/annotations", "ok=\"1\"\nbad=\"\\q\"\n");
  const SucContext suc = SucContext::load({}, container.path());
  CHECK(suc.labels.at("plan") == "k3s");
  CHECK(suc.annotations.at("ok") == "1");
  REQUIRE(suc.warnings.size() == 1);
  CHECK(suc.warnings[0] ==
        "'" + (container / "run/system-upgrade/pod/annotations").string() + "' line 2: unknown escape '\\q'");
}
