// Host roots shaped as k3s's install.sh and RKE2's install leave them: the unit under /etc/systemd/system (k3s) or
// /usr/local/lib/systemd/system (RKE2's tarball install), the env file beside it, the configuration under
// /etc/rancher/<product>.
#include <catch2/catch.hpp>

#include "hoist/host/server_datastore.hpp"
#include "hoist/host/systemd_unit.hpp"
#include "hoist/sys/host_root.hpp"
#include "hoist/util/error.hpp"
#include "scoped_temp_dir.hpp"

using hoist::DatastoreKind;
using hoist::find_server_datastore;
using hoist::HostRoot;
using hoist::test::ScopedTempDir;
using hoist::test::write_text;

namespace {

// The unit k3s's install.sh writes (create_systemd_service_file), with INSTALL_K3S_EXEC's words after `server`.
std::string k3s_unit(const std::string& exec_words) {
  return "[Unit]\nDescription=Lightweight Kubernetes\nDocumentation=https://k3s.io\nWants=network-online.target\n"
         "After=network-online.target\n\n[Install]\nWantedBy=multi-user.target\n\n[Service]\nType=notify\n"
         "EnvironmentFile=-/etc/default/%N\nEnvironmentFile=-/etc/sysconfig/%N\n"
         "EnvironmentFile=-/etc/systemd/system/k3s.service.env\nKillMode=process\nDelegate=yes\n"
         "LimitNOFILE=1048576\nTimeoutStartSec=0\nRestart=always\nRestartSec=5s\n"
         "ExecStartPre=/bin/sh -xc '! /usr/bin/systemctl is-enabled --quiet nm-cloud-setup.service 2>/dev/null'\n"
         "ExecStartPre=-/sbin/modprobe br_netfilter\nExecStartPre=-/sbin/modprobe overlay\n"
         "ExecStart=/usr/local/bin/k3s \\\n    server \\\n" +
         exec_words + "\n";
}

struct Host {
  ScopedTempDir dir;
  HostRoot root;
  Host() : root(HostRoot::open(dir.path()).value()) {}
  void write(const std::string& path, const std::string& text) const { write_text(dir.path() / path.substr(1), text); }
  [[nodiscard]] std::optional<hoist::ServerDatastore> server(const std::string& unit = "k3s.service",
                                                             const std::string& program = "/usr/local/bin/k3s") const {
    return find_server_datastore(root, program, {unit});
  }
};

}  // namespace

TEST_CASE("a k3s server installed with no flags keeps SQLite under /var/lib/rancher/k3s", "[server_datastore]") {
  Host host;
  host.write("/etc/systemd/system/k3s.service", k3s_unit(""));
  host.write("/etc/systemd/system/k3s.service.env", "K3S_KUBECONFIG_MODE='644'\n");
  const auto server = host.server();
  REQUIRE(server);
  CHECK(server->product == "k3s");
  CHECK(server->kind == DatastoreKind::sqlite);
  CHECK(server->data_dir == "/var/lib/rancher/k3s");
  CHECK(server->location == "/var/lib/rancher/k3s/server/db/state.db");
  CHECK(server->server_args.empty());
  CHECK(server->environment == std::vector<std::string>{"K3S_KUBECONFIG_MODE=644"});
  CHECK(server->found == "k3s.service runs '/usr/local/bin/k3s server'; no configuration file; sqlite: k3s's default");
}

TEST_CASE("A unit's --cluster-init, quoted as install.sh quotes it, is embedded etcd", "[server_datastore]") {
  Host host;
  host.write("/etc/systemd/system/k3s.service", k3s_unit("\t'--cluster-init' \\\n\t'--disable=traefik' \\\n"));
  const auto server = host.server();
  REQUIRE(server);
  CHECK(server->kind == DatastoreKind::etcd);
  CHECK(server->location == "/var/lib/rancher/k3s/server/db/etcd");
  CHECK(server->snapshot_dir == "/var/lib/rancher/k3s/server/db/snapshots");
  CHECK(server->server_args == std::vector<std::string>{"--cluster-init", "--disable=traefik"});
  CHECK(server->found ==
        "k3s.service runs '/usr/local/bin/k3s server'; no configuration file; etcd: --cluster-init (k3s.service "
        "ExecStart)");
}

TEST_CASE("the configuration file and its drop-ins, in name order, give cluster-init and data-dir",
          "[server_datastore]") {
  Host host;
  host.write("/etc/systemd/system/k3s.service", k3s_unit(""));
  host.write("/etc/rancher/k3s/config.yaml", "write-kubeconfig-mode: \"0644\"\ncluster-init: true\ndata-dir: /a\n");
  host.write("/etc/rancher/k3s/config.yaml.d/20-data.yaml", "data-dir: /srv/k3s\n");
  host.write("/etc/rancher/k3s/config.yaml.d/10-data.yml", "data-dir: /b\netcd-snapshot-dir: /backup/etcd\n");
  host.write("/etc/rancher/k3s/config.yaml.d/notes.txt", "data-dir: /never\n");
  const auto server = host.server();
  REQUIRE(server);
  CHECK(server->kind == DatastoreKind::etcd);
  CHECK(server->data_dir == "/srv/k3s");
  CHECK(server->location == "/srv/k3s/server/db/etcd");
  CHECK(server->snapshot_dir == "/backup/etcd");
  CHECK(server->found ==
        "k3s.service runs '/usr/local/bin/k3s server'; /etc/rancher/k3s/config.yaml, "
        "/etc/rancher/k3s/config.yaml.d/10-data.yml, /etc/rancher/k3s/config.yaml.d/20-data.yaml; etcd: "
        "--cluster-init (/etc/rancher/k3s/config.yaml)");
}

TEST_CASE("the unit's --data-dir wins over the configuration file's, and -c names another file", "[server_datastore]") {
  Host host;
  host.write("/etc/systemd/system/k3s.service",
             k3s_unit("\t'-c' \\\n\t'/opt/k3s.yaml' \\\n\t'--data-dir=/data/k3s' \\\n"));
  host.write("/etc/rancher/k3s/config.yaml", "cluster-init: true\n");
  host.write("/opt/k3s.yaml", "data-dir: /elsewhere\n");
  const auto server = host.server();
  REQUIRE(server);
  CHECK(server->kind == DatastoreKind::sqlite);
  CHECK(server->data_dir == "/data/k3s");
  CHECK(server->location == "/data/k3s/server/db/state.db");
}

TEST_CASE("K3S_CONFIG_FILE in the env file names the configuration file", "[server_datastore]") {
  Host host;
  host.write("/etc/systemd/system/k3s.service", k3s_unit(""));
  host.write("/etc/systemd/system/k3s.service.env", "K3S_CONFIG_FILE=\"/etc/k3s/server.yaml\"\n");
  host.write("/etc/k3s/server.yaml", "cluster-init: yes\n");
  const auto server = host.server();
  REQUIRE(server);
  CHECK(server->kind == DatastoreKind::etcd);
}

TEST_CASE("an etcd member already on disk is etcd whatever the flags say", "[server_datastore]") {
  Host host;
  host.write("/etc/systemd/system/k3s.service", k3s_unit(""));
  std::filesystem::create_directories(host.dir.path() / "var/lib/rancher/k3s/server/db/etcd/member/wal");
  const auto server = host.server();
  REQUIRE(server);
  CHECK(server->kind == DatastoreKind::etcd);
  CHECK(server->found ==
        "k3s.service runs '/usr/local/bin/k3s server'; no configuration file; etcd: etcd is initialized in "
        "/var/lib/rancher/k3s/server/db/etcd");
}

TEST_CASE("a server that joins with K3S_URL and K3S_TOKEN from the env file is etcd", "[server_datastore]") {
  Host host;
  host.write("/etc/systemd/system/k3s.service", k3s_unit(""));
  host.write("/etc/systemd/system/k3s.service.env",
             "K3S_TOKEN='K10abc::server:secret'\nK3S_URL='https://10.0.0.1:6443'\n");
  const auto server = host.server();
  REQUIRE(server);
  CHECK(server->kind == DatastoreKind::etcd);
}

TEST_CASE("A --datastore-endpoint from the environment is external, named without its credentials",
          "[server_datastore]") {
  Host host;
  host.write("/etc/systemd/system/k3s.service", k3s_unit(""));
  host.write("/etc/systemd/system/k3s.service.env",
             "K3S_DATASTORE_ENDPOINT='postgres://k3s:hunter2@db.example:5432/k3s'\n");
  const auto server = host.server();
  REQUIRE(server);
  CHECK(server->kind == DatastoreKind::external);
  CHECK(server->location == "postgres://db.example:5432/k3s");
  CHECK(server->found.find("hunter2") == std::string::npos);
  CHECK(hoist::endpoint_without_credentials("mysql://k3s:pw@tcp(db:3306)/k3s") == "mysql://tcp(db:3306)/k3s");
  CHECK(hoist::endpoint_without_credentials("https://10.0.0.5:2379") == "https://10.0.0.5:2379");
}

TEST_CASE("a server with --disable-etcd that joins keeps no datastore of its own", "[server_datastore]") {
  Host host;
  host.write("/etc/systemd/system/k3s.service",
             k3s_unit("\t'--disable-etcd' \\\n\t'--server' \\\n\t'https://s1:6443' \\\n"));
  const auto server = host.server();
  REQUIRE(server);
  CHECK(server->kind == DatastoreKind::external);
  CHECK(server->location == "etcd on the servers of https://s1:6443");
}

TEST_CASE("a drop-in that resets ExecStart decides what runs", "[server_datastore]") {
  Host host;
  host.write("/etc/systemd/system/k3s.service", k3s_unit(""));
  host.write("/etc/systemd/system/k3s.service.d/10-etcd.conf",
             "[Service]\nExecStart=\nExecStart=/usr/local/bin/k3s server --cluster-init\n");
  const auto server = host.server();
  REQUIRE(server);
  CHECK(server->kind == DatastoreKind::etcd);
}

TEST_CASE("an agent, or a unit that runs another program, is no server", "[server_datastore]") {
  Host host;
  host.write("/etc/systemd/system/k3s-agent.service", "[Service]\nExecStart=/usr/local/bin/k3s \\\n    agent \\\n");
  CHECK_FALSE(host.server("k3s-agent.service"));
  host.write("/etc/systemd/system/k3s.service", k3s_unit(""));
  CHECK_FALSE(host.server("k3s.service", "/opt/bin/k3s"));
  CHECK_FALSE(host.server("containerd.service"));
}

TEST_CASE("RKE2's server runs embedded etcd unless --disable-etcd", "[server_datastore]") {
  Host host;
  host.write("/usr/local/lib/systemd/system/rke2-server.service",
             "[Service]\nEnvironmentFile=-/etc/default/%N\nEnvironmentFile=-/etc/sysconfig/%N\n"
             "EnvironmentFile=-/usr/local/lib/systemd/system/%N.env\nExecStart=/usr/local/bin/rke2 server\n");
  auto server = host.server("rke2-server.service", "/usr/local/bin/rke2");
  REQUIRE(server);
  CHECK(server->product == "rke2");
  CHECK(server->kind == DatastoreKind::etcd);
  CHECK(server->location == "/var/lib/rancher/rke2/server/db/etcd");
  host.write("/etc/rancher/rke2/config.yaml", "disable-etcd: true\n");
  host.write("/etc/default/rke2-server", "RKE2_DATA_DIR=/data/rke2\n");
  server = host.server("rke2-server.service", "/usr/local/bin/rke2");
  REQUIRE(server);
  CHECK(server->kind == DatastoreKind::sqlite);
  CHECK(server->location == "/data/rke2/server/db/state.db");
}

TEST_CASE("unit words split as systemd splits them", "[systemd_unit]") {
  CHECK(hoist::split_unit_words("/usr/local/bin/k3s  server '--node-label=a b' \"x\\\"y\" c\\sd") ==
        std::vector<std::string>{"/usr/local/bin/k3s", "server", "--node-label=a b", "x\"y", "c d"});
  CHECK(hoist::parse_environment_file("# comment\nA=1\nB='two words'\n  C = \"3\"\nnot an assignment\n") ==
        std::vector<std::string>{"A=1", "B=two words", "C=3"});
}

TEST_CASE("a required EnvironmentFile that is missing is an error naming it", "[systemd_unit]") {
  Host host;
  host.write("/etc/systemd/system/k3s.service",
             "[Service]\nEnvironmentFile=/etc/k3s.env\nExecStart=/usr/local/bin/k3s server\n");
  CHECK_THROWS_WITH(host.server(), "failed to read '" + (host.dir.path() / "etc/k3s.env").string() +
                                       "', the EnvironmentFile of k3s.service: No such file or directory");
}
