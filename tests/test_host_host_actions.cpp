#include <catch2/catch.hpp>

#include "hoist/host/host_actions.hpp"
#include "hoist/host/writable_mounts.hpp"
#include "hoist/util/error.hpp"

using hoist::ComponentKind;
using hoist::paths_written;
using hoist::RebootPolicy;

TEST_CASE("the reboot policy takes never, if-needed, always and delegate", "[host_actions]") {
  CHECK(hoist::parse_reboot_policy("never") == RebootPolicy::never);
  CHECK(hoist::parse_reboot_policy("if-needed") == RebootPolicy::if_needed);
  CHECK(hoist::parse_reboot_policy("always") == RebootPolicy::always);
  CHECK(hoist::parse_reboot_policy("delegate") == RebootPolicy::delegate);
  CHECK(hoist::to_string(RebootPolicy::if_needed) == "if-needed");
  CHECK(hoist::to_string(RebootPolicy::delegate) == "delegate");
  CHECK_THROWS_WITH(hoist::parse_reboot_policy("sometimes"),
                    "invalid reboot policy 'sometimes': expected never, if-needed, always or delegate");
  CHECK_THROWS_AS(hoist::parse_reboot_policy("sometimes"), hoist::UsageError);
}

TEST_CASE("a unit name without a type is a service, as systemctl takes it", "[host_actions]") {
  CHECK(hoist::unit_name("k3s") == "k3s.service");
  CHECK(hoist::unit_name("k3s-agent.service") == "k3s-agent.service");
  CHECK(hoist::unit_name("getty@tty1.service") == "getty@tty1.service");
  CHECK(hoist::unit_name("var-lib.mount") == "var-lib.mount");
  CHECK_THROWS_WITH(hoist::unit_name("../etc/passwd"), "invalid unit name '../etc/passwd'");
  CHECK_THROWS_WITH(hoist::unit_name(""), "invalid unit name ''");
  CHECK_THROWS_WITH(hoist::unit_name("a b"), "invalid unit name 'a b'");
}

TEST_CASE("each kind remounts what it writes: its destination or the link's directory, and its state",
          "[host_actions]") {
  CHECK(paths_written(ComponentKind::tree, "/opt/k3os", "/var/lib/hoist/os") ==
        std::vector<std::string>{"/opt/k3os", "/var/lib/hoist/os"});
  CHECK(paths_written(ComponentKind::file, "/usr/local/bin/k3s", "/var/lib/hoist/k3s") ==
        std::vector<std::string>{"/usr/local/bin", "/var/lib/hoist/k3s"});
  CHECK(paths_written(ComponentKind::sync, "/etc/rancher/k3s", "/var/lib/hoist/conf") ==
        std::vector<std::string>{"/etc/rancher/k3s", "/etc/rancher", "/var/lib/hoist/conf"});
  CHECK(paths_written(ComponentKind::sysext, "/etc/extensions/tools.raw", "/var/lib/hoist/tools") ==
        std::vector<std::string>{"/etc/extensions", "/var/lib/hoist/tools"});
  CHECK(paths_written(ComponentKind::file, "/k3s", "/var/lib/hoist/k3s") ==
        std::vector<std::string>{"/", "/var/lib/hoist/k3s"});
}
