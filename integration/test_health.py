"""Health checks and automatic rollback: after the switch and its restarts, the
checks must pass or hoist switches back to the previous version, does the
restarts again, records the verdict and exits 1. Units are checked over a real
system bus (a dbus-daemon with the systemd test double, which can make a unit
die or flap after its restart: dbus_mocks/systemd_manager.py); `exec` runs a
static program from the payload inside the host root; `http` asks a loopback
server the test runs."""

import http.server
import json
import os
import shutil
import signal
import subprocess
import threading
import time

import pytest

from conftest import HOIST_BIN, SANITIZER_ENV, run_hoist, run_status, tree_manifest
from dbus_harness import system_bus  # noqa: F401 (a fixture)
from fake_apiserver import NODE_API, Cluster, FakeApiServer
from prepare_harness import can_fake_service_account, make_service_account, pki  # noqa: F401 (a fixture)
from payloads import make_tree, manifest_without, state_of, upgrade
from test_restart_reboot import args, finish, payloads, spawn  # noqa: F401 (payloads: a fixture)

SELFTEST = r'''
#include <stdio.h>
int main(int argc, char **argv) {
  (void)argc; (void)argv;
  if (STATUS != 0) { printf("%s is broken\n", VERSION); }
  return STATUS;
}
'''


def static_program(tmp_path, name, text, **defines):
    """The bytes of the C program `text` compiled static with `defines` (-DNAME=VALUE): a health check run in
    the host root, which has no shell."""
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc to build a static health-check program (the host root has no shell)")
    source = tmp_path / f"{name}.c"
    source.write_text(text)
    binary = tmp_path / name
    subprocess.run(["gcc", "-static", "-O1", *(f"-D{k}={v}" for k, v in defines.items()), "-o", str(binary),
                    str(source)], check=True, capture_output=True)
    return binary.read_bytes()


def selftest(tmp_path, version, status):
    return static_program(tmp_path, f"selftest-{version}", SELFTEST, STATUS=status, VERSION=f'"{version}"')


def current(host_root):
    return os.readlink(host_root / "opt/app/current")


FAST = ("--health-settle", "1", "--health-timeout", "4")


class Answers(http.server.BaseHTTPRequestHandler):
    status = 200

    def do_GET(self):  # noqa: N802 (the http.server API)
        self.send_response(type(self).status)
        self.end_headers()
        self.wfile.write(b"checked\n")

    def log_message(self, *args):
        pass


@pytest.fixture
def healthz():
    """A loopback HTTP server whose answer the test sets: server.status."""
    handler = type("Handler", (Answers,), {"status": 200})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    server.url = f"http://127.0.0.1:{server.server_address[1]}/healthz"
    server.handler = handler
    yield server
    server.shutdown()
    server.server_close()


# ---- units ---------------------------------------------------------------------------------------------------------

def test_a_unit_that_fails_after_its_restart_is_rolled_back_and_restarted_on_the_old_version(
        host_root, payloads, system_bus):
    v1, v2 = payloads
    # the unit's second job (2.0.0's restart) dies 300 ms after it started; the first and third are healthy
    systemd = system_bus.start("systemd_manager", dies={"k3s.service": 300}, sick_jobs=[2])
    upgrade(host_root, *args(v1, "1.0.0", "--restart", "k3s", "--health-check", "unit:k3s", *FAST), check=0)
    assert state_of(host_root, "app")["health"]["verdict"] == "passed"
    result = upgrade(host_root, *args(v2, "2.0.0", "--restart", "k3s", "--health-check", "unit:k3s", *FAST), check=1)
    why = "health check unit:k3s did not pass within 4 s: k3s.service is failed (failed)"
    assert "health: checking unit:k3s (each unit up for 1 s; at most 4 s in all)" in result.stderr
    assert f"app: {why}; switching back to 1.0.0" in result.stderr
    assert "app: rolled back from 2.0.0 to 1.0.0" in result.stderr
    assert current(host_root) == "1.0.0"
    assert (host_root / "opt/app/current/bin/app").read_text() == "one\n"
    # restarted for 1.0.0, 2.0.0, and 1.0.0 again
    assert len(systemd.called("RestartUnit")) == 3
    state = state_of(host_root, "app")
    assert state["current"] == "1.0.0" and state["previous"] == "2.0.0"
    assert state["owed_health_checks"] == [] and state["owed_restarts"] == []
    assert state["last_result"]["outcome"] == "rolled-back"
    assert state["last_result"]["version"] == "2.0.0"
    assert state["last_result"]["message"] == f"{why}; switched back to 1.0.0"
    assert state["health"]["verdict"] == "failed" and state["health"]["version"] == "2.0.0"
    assert state["health"]["check"] == "unit:k3s"
    # hoist status shows the verdict
    status = json.loads(status_of(host_root, "--json"))
    assert status["components"][0]["health"]["verdict"] == "failed"
    text = status_of(host_root)
    assert f"  health:   2.0.0 failed at {state['health']['time']}: unit:k3s: k3s.service is failed (failed)\n" in text
    # quarantined: SUC's next pod, or a Plan edit, does not install the version just backed out
    assert [q["version"] for q in state["quarantined"]] == ["2.0.0"]
    assert state["quarantined"][0]["reason"] == why
    before = tree_manifest(host_root / "opt")
    result = upgrade(host_root, *args(v2, "2.0.0", "--restart", "k3s", "--health-check", "unit:k3s", *FAST), check=3)
    assert "refusing 2.0.0: it is quarantined since" in result.stderr and why in result.stderr
    assert tree_manifest(host_root / "opt") == before
    assert len(systemd.called("RestartUnit")) == 3


def status_of(host_root, *extra):
    return run_status(host_root, *extra).stdout


def test_a_unit_that_flaps_never_settles_and_is_rolled_back(host_root, payloads, system_bus):
    v1, v2 = payloads
    system_bus.start("systemd_manager", flaps={"k3s.service": 400}, sick_jobs=[2])
    upgrade(host_root, *args(v1, "1.0.0", "--restart", "k3s"), check=0)
    result = upgrade(host_root, *args(v2, "2.0.0", "--restart", "k3s", "--health-check", "unit:k3s",
                                      "--health-settle", "2", "--health-timeout", "4"), check=1)
    assert "health check unit:k3s did not pass within 4 s: k3s.service is active for 0 s of the 2 s it must stay " \
           "up, restarted" in result.stderr
    assert "times by systemd" in result.stderr
    assert current(host_root) == "1.0.0"


def test_a_healthy_unit_passes_and_the_new_version_stays(host_root, payloads, system_bus):
    v1, v2 = payloads
    system_bus.start("systemd_manager")
    upgrade(host_root, *args(v1, "1.0.0", "--restart", "k3s"), check=0)
    result = upgrade(host_root, *args(v2, "2.0.0", "--restart", "k3s", "--health-check", "unit:k3s", *FAST), check=0)
    assert "health: unit:k3s passed: k3s.service is active for 1 s" in result.stderr
    assert current(host_root) == "2.0.0"
    state = state_of(host_root, "app")
    assert state["health"]["verdict"] == "passed" and state["health"]["version"] == "2.0.0"
    assert state["owed_health_checks"] == []
    assert state["last_result"]["outcome"] == "succeeded"
    # passed once: the identical re-run checks nothing
    result = upgrade(host_root, *args(v2, "2.0.0", "--restart", "k3s", "--health-check", "unit:k3s", *FAST), check=0)
    assert "health:" not in result.stderr


# ---- exec and http -------------------------------------------------------------------------------------------------

def test_a_payload_whose_own_selftest_fails_is_rolled_back(host_root, tmp_path):
    v1 = make_tree(tmp_path / "v1", {"bin/selftest": selftest(tmp_path, "1.0.0", 0)}, 1)
    v2 = make_tree(tmp_path / "v2", {"bin/selftest": selftest(tmp_path, "2.0.0", 3)}, 2)
    for tree in (v1, v2):
        (tree / "bin/selftest").chmod(0o755)
    check = ("--health-check", "exec:/opt/app/current/bin/selftest --quick")
    upgrade(host_root, *args(v1, "1.0.0", *check, *FAST), check=0)
    result = upgrade(host_root, *args(v2, "2.0.0", *check, *FAST), check=1)
    assert "health check exec:/opt/app/current/bin/selftest --quick did not pass within 4 s: exited with 3: " \
           "2.0.0 is broken; switching back to 1.0.0" in result.stderr
    assert current(host_root) == "1.0.0"


TAKE_AWAY = r'''
#include <stdio.h>
int main(void) {
  if (rename(FROM, TO) != 0) { perror("rename"); return 2; }
  printf("took %s away\n", FROM);
  return 3;
}
'''


def test_a_previous_version_gone_before_the_switch_back_leaves_the_new_one_and_names_both_failures(host_root,
                                                                                                   tmp_path):
    # docs/how-it-works.md, "What exit 1 leaves on the host": going back fails when the previous version cannot be
    # switched to. The failing check itself takes 1.0.0 away (renames it on the host), as a hand or a disk might.
    program = static_program(tmp_path, "take_away", TAKE_AWAY, FROM='"/opt/app/1.0.0"', TO='"/opt/taken-1.0.0"')
    v1 = make_tree(tmp_path / "v1", {"bin/app": "app 1\n"}, 1)
    v2 = make_tree(tmp_path / "v2", {"bin/app": "app 2\n", "bin/check": program}, 2)
    (v2 / "bin/check").chmod(0o755)
    check = ("--health-check", "exec:/opt/app/current/bin/check")
    upgrade(host_root, *args(v1, "1.0.0"), check=0)
    # Exit 1, not 2: nothing was wrong with the input (it exited 2, naming only the second failure, before).
    result = upgrade(host_root, *args(v2, "2.0.0", *check, *FAST), check=1)
    assert "took /opt/app/1.0.0 away" in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert "error: health check exec:/opt/app/current/bin/check did not pass within 4 s: " in last
    assert "; app stays on 2.0.0, could not switch back to 1.0.0: cannot roll back app to 1.0.0: " in last
    assert current(host_root) == "2.0.0"
    assert (host_root / "opt/app/2.0.0/bin/app").read_text() == "app 2\n"
    assert (host_root / "opt/taken-1.0.0/bin/app").read_text() == "app 1\n"
    state = state_of(host_root, "app")
    assert (state["current"], state["quarantined"]) == ("2.0.0", []), state
    assert state["owed_health_checks"] == ["exec:/opt/app/current/bin/check"], state
    assert state["last_result"]["outcome"] == "failed", state


def test_an_http_check_that_answers_an_error_rolls_back(host_root, payloads, healthz):
    v1, v2 = payloads
    upgrade(host_root, *args(v1, "1.0.0", "--health-check", f"http:{healthz.url}", *FAST), check=0)
    healthz.handler.status = 503
    result = upgrade(host_root, *args(v2, "2.0.0", "--health-check", f"http:{healthz.url}", *FAST), check=1)
    assert f"health check http:{healthz.url} did not pass within 4 s: answered 503 Service Unavailable" \
        in result.stderr
    assert current(host_root) == "1.0.0"
    # --health-settle is a unit check's: with none, the line does not speak of units.
    assert f"health: checking http:{healthz.url} (at most 4 s in all)" in result.stderr
    assert "each unit up" not in result.stderr


def test_a_first_install_that_fails_its_checks_stays_and_keeps_failing_until_healthy(host_root, payloads, healthz):
    v1, _ = payloads
    healthz.handler.status = 500
    check = ("--health-check", f"http:{healthz.url}")
    result = upgrade(host_root, *args(v1, "1.0.0", *check, *FAST), check=1)
    assert "no previous version" in result.stderr
    assert current(host_root) == "1.0.0"
    assert state_of(host_root, "app")["owed_health_checks"] == [f"http:{healthz.url}"]
    # the next run checks again: it is owed
    healthz.handler.status = 200
    upgrade(host_root, *args(v1, "1.0.0", *check, *FAST), check=0)
    state = state_of(host_root, "app")
    assert state["owed_health_checks"] == [] and state["health"]["verdict"] == "passed"


# ---- kills and signals during the checks ----------------------------------------------------------------------------

def wait_for_owed(host_root, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = state_of(host_root, "app")
            if state["current"] == "2.0.0" and state["owed_health_checks"]:
                return state
        except (FileNotFoundError, json.JSONDecodeError):
            pass
        time.sleep(0.05)
    raise AssertionError("hoist never recorded its owed health checks")


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_run_stopped_during_its_checks_leaves_them_owed_to_the_next_run(host_root, payloads, healthz, sig):
    v1, v2 = payloads
    check = ("--health-check", f"http:{healthz.url}", "--health-timeout", "60", "--health-settle", "1")
    upgrade(host_root, *args(v1, "1.0.0"), check=0)
    healthz.handler.status = 503
    process = spawn(host_root, *args(v2, "2.0.0", *check))
    wait_for_owed(host_root)
    time.sleep(0.5)  # inside the checks
    process.send_signal(sig)
    code, _, err = finish(process)
    if sig == signal.SIGTERM:
        assert code == 1 and "stopped by SIGTERM before checking the health of the new version" in err, err
    else:
        assert code == -signal.SIGKILL
    # the new version stays, its checks owed: never counted as passed
    assert current(host_root) == "2.0.0"
    assert state_of(host_root, "app")["owed_health_checks"] == [f"http:{healthz.url}"]
    assert f"  checks owed for 2.0.0: http:{healthz.url}\n" in status_of(host_root)
    # SUC's next pod runs the same command: it checks again, and rolls back when they fail
    result = upgrade(host_root, *args(v2, "2.0.0", "--health-check", f"http:{healthz.url}", *FAST), check=1)
    assert "switching back to 1.0.0" in result.stderr
    assert current(host_root) == "1.0.0"


def test_owed_checks_that_pass_on_the_rerun_keep_the_new_version(host_root, payloads, healthz):
    v1, v2 = payloads
    upgrade(host_root, *args(v1, "1.0.0"), check=0)
    healthz.handler.status = 503
    process = spawn(host_root, *args(v2, "2.0.0", "--health-check", f"http:{healthz.url}", "--health-timeout", "60"))
    wait_for_owed(host_root)
    process.kill()
    finish(process)
    healthz.handler.status = 200
    result = upgrade(host_root, *args(v2, "2.0.0", "--health-check", f"http:{healthz.url}", *FAST), check=0)
    assert "nothing to do" in result.stderr and "health: app 2.0.0 healthy" in result.stderr
    assert current(host_root) == "2.0.0"
    assert state_of(host_root, "app")["health"]["verdict"] == "passed"


# ---- bad input -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("check,why", [
    ("unit:", "invalid unit name ''"),
    ("exec:selftest", "the program must be an absolute path on the host"),
    ("http:http://192.0.2.1/", "the URL must be http:// to a loopback address"),
    ("tcp:127.0.0.1:80", "unknown kind of check"),
])
def test_a_health_check_hoist_cannot_run_is_refused_before_anything_changes(host_root, payloads, check, why):
    v1, _ = payloads
    before = tree_manifest(host_root)
    result = upgrade(host_root, *args(v1, "1.0.0", "--health-check", check), check=2)
    assert f"invalid --health-check '{check}': {why}" in result.stderr
    assert tree_manifest(host_root) == before


def test_node_ready_outside_a_job_is_refused(host_root, payloads):
    v1, _ = payloads
    before = tree_manifest(host_root)
    result = upgrade(host_root, *args(v1, "1.0.0", "--health-check", "node-ready"), check=2)
    assert "--health-check node-ready needs SYSTEM_UPGRADE_NODE_NAME" in result.stderr
    assert tree_manifest(host_root) == before


def test_a_manifest_check_is_refused_naming_its_place(host_root, tmp_path):
    make_tree(tmp_path / "release/app", {"bin/app": "one\n"}, 1)
    manifest = tmp_path / "release/manifest.json"
    manifest.write_text(json.dumps({"schema": 1, "version": "1.0.0", "health_checks": ["unit:k3s"], "components": [
        {"name": "app", "kind": "tree", "source": "app", "destination": "/opt/app",
         "health_checks": ["exec:/bin/true", "http:http://example.com/"]}]}))
    before = manifest_without(host_root)
    result = upgrade(host_root, "--manifest", manifest, check=2)
    assert f"invalid manifest '{manifest}': $.components[0].health_checks[1]: invalid --health-check " \
           "'http:http://example.com/'" in result.stderr
    assert manifest_without(host_root) == before


def test_a_dry_run_lists_the_checks(host_root, payloads):
    v1, _ = payloads
    result = upgrade(host_root, "--dry-run", *args(v1, "1.0.0", "--health-check", "unit:k3s",
                                                   "--health-check", "http:http://127.0.0.1:10248/healthz"), check=0)
    assert "app: then health checks: unit:k3s, http:http://127.0.0.1:10248/healthz (units up 30s, at most 300s)" \
        in result.stdout


# ---- node-ready, against the fake API server -----------------------------------------------------------------------

def upgrade_in_cluster(sa_dir, server, host_root, *arguments, node="n1"):
    """hoist upgrade as in a SUC Job: the service account at its real path (a bind mount in a private mount
    namespace), KUBERNETES_SERVICE_HOST/PORT and SYSTEM_UPGRADE_NODE_NAME set."""
    script = ('mount -t tmpfs tmpfs /run && mkdir -p /run/secrets/kubernetes.io/serviceaccount && '
              'mount --bind "$0" /run/secrets/kubernetes.io/serviceaccount && exec "$@"')
    argv = ["unshare", "-m", "--propagation", "private", "sh", "-c", script, str(sa_dir),
            HOIST_BIN, "--host-root", str(host_root), "upgrade", *map(str, arguments)]
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", **SANITIZER_ENV, "KUBERNETES_SERVICE_HOST": server.host,
           "KUBERNETES_SERVICE_PORT": str(server.port), "SYSTEM_UPGRADE_NODE_NAME": node}
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)


def set_ready(cluster, name, status, kubelet=None):
    def change(node):
        node["status"]["conditions"] = [{"type": "MemoryPressure", "status": "False"},
                                        {"type": "Ready", "status": status,
                                         "reason": "KubeletReady" if status == "True" else "KubeletNotReady"}]
        if kubelet:
            node["status"]["nodeInfo"]["kubeletVersion"] = kubelet
    cluster.update(NODE_API, name, change)


# What node-ready needs of the API and the shipped Plans grant (with the Events every upgrade posts).
NODE_READY_RBAC = [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
                   {"namespace": "default", "apiGroups": ["events.k8s.io"], "resources": ["events"],
                    "verbs": ["create"]}]


def node_requests(cluster):
    return {(r["verb"], r["path"], r["status"]) for r in cluster.log_requests(method="GET")}


@pytest.fixture
def node_cluster(host_root, tmp_path, pki):
    if not can_fake_service_account():
        pytest.skip("needs root and unshare -m to put a service account at its real path")
    cluster = Cluster(tokens=("token-1",))
    cluster.rbac = NODE_READY_RBAC
    cluster.add_node("n1", kubelet="v1.30.0+k3s1")
    set_ready(cluster, "n1", "True")
    with FakeApiServer(cluster, pki) as server:
        sa_dir = make_service_account(tmp_path / "sa", pki["ca"], "token-1")
        yield cluster, server, sa_dir


def k3s_args(source, version, *extra):
    return ["--component", "app", "--kind", "tree", "--source", source, "--destination", "/opt/app",
            "--version", version, "--version-scheme", "k3s", "--health-check", "node-ready", *extra]


def test_node_ready_waits_for_the_kubelet_of_the_new_version(host_root, payloads, node_cluster):
    cluster, server, sa_dir = node_cluster
    v1, v2 = payloads
    result = upgrade_in_cluster(sa_dir, server, host_root, *k3s_args(v1, "v1.30.0+k3s1", *FAST))
    assert result.returncode == 0, result.stderr
    assert "health: node-ready passed: node 'n1' is Ready (kubelet v1.30.0+k3s1)" in result.stderr
    # the node comes back Ready on the new kubelet two seconds after the switch
    set_ready(cluster, "n1", "False")
    timer = threading.Timer(2.0, set_ready, (cluster, "n1", "True", "v1.30.1+k3s1"))
    timer.start()
    try:
        result = upgrade_in_cluster(sa_dir, server, host_root,
                                    *k3s_args(v2, "v1.30.1+k3s1", "--health-settle", "1", "--health-timeout", "30"))
    finally:
        timer.cancel()
    assert result.returncode == 0, result.stderr
    assert "health: node-ready not yet: node 'n1' is not Ready (Ready=False, KubeletNotReady; kubelet " \
           "v1.30.0+k3s1)" in result.stderr
    assert "health: node-ready passed: node 'n1' is Ready (kubelet v1.30.1+k3s1)" in result.stderr
    assert current(host_root) == "v1.30.1+k3s1"
    assert "token-1" not in result.stderr
    # Each look is one GET of the node, all that RBAC `get nodes` allows.
    assert node_requests(cluster) == {("get", "/api/v1/nodes/n1", 200)}


def test_node_ready_of_a_node_that_does_not_exist_never_passes(host_root, payloads, node_cluster):
    cluster, server, sa_dir = node_cluster
    v1, _ = payloads
    result = upgrade_in_cluster(sa_dir, server, host_root, *k3s_args(v1, "v1.30.0+k3s1", *FAST), node="n9")
    assert result.returncode == 1, result.stderr
    assert "health check node-ready did not pass within 4 s: node 'n9' does not exist" in result.stderr
    assert node_requests(cluster) == {("get", "/api/v1/nodes/n9", 404)}


def test_node_ready_without_the_cluster_is_refused_before_anything_changes(host_root, payloads):
    v1, _ = payloads
    before = tree_manifest(host_root)
    result = upgrade(host_root, *k3s_args(v1, "v1.30.0+k3s1", *FAST), env={"SYSTEM_UPGRADE_NODE_NAME": "n1"},
                     check=2)
    assert "--health-check node-ready needs the Kubernetes API as a pod sees it, and KUBERNETES_SERVICE_HOST, " \
           "KUBERNETES_SERVICE_PORT" in result.stderr
    assert tree_manifest(host_root) == before


def test_a_node_ready_on_the_old_kubelet_is_not_healthy(host_root, payloads, node_cluster):
    cluster, server, sa_dir = node_cluster
    v1, v2 = payloads
    assert upgrade_in_cluster(sa_dir, server, host_root, *k3s_args(v1, "v1.30.0+k3s1", *FAST)).returncode == 0
    result = upgrade_in_cluster(sa_dir, server, host_root, *k3s_args(v2, "v1.30.1+k3s1", *FAST))
    assert result.returncode == 1, result.stderr
    assert "health check node-ready did not pass within 4 s: node 'n1' is Ready but its kubelet v1.30.0+k3s1 is " \
           "not v1.30.1+k3s1; switching back to v1.30.0+k3s1" in result.stderr
    assert current(host_root) == "v1.30.0+k3s1"


# ---- an upgrade that reboots ---------------------------------------------------------------------------------------

def test_a_version_that_boots_unhealthy_is_switched_back_and_rebooted_once(host_root, payloads, system_bus, healthz):
    from test_restart_reboot import BOOT_1, BOOT_2, set_boot_id
    v1, v2 = payloads
    logind = system_bus.start("logind_manager")
    system_bus.start("systemd_manager")
    set_boot_id(host_root, BOOT_1)
    upgrade(host_root, *args(v1, "1.0.0"), check=0)
    command = args(v2, "2.0.0", "--reboot", "if-needed", "--health-check", f"http:{healthz.url}", *FAST)
    # the upgrade asks for the reboot; the checks are owed to the run after the boot
    process = spawn(host_root, *command)
    logind.wait_for_call("RebootWithFlags")
    process.send_signal(signal.SIGTERM)
    assert finish(process)[0] == 1
    assert state_of(host_root, "app")["owed_health_checks"] == [f"http:{healthz.url}"]
    # the host boots into 2.0.0, which is not healthy: the run after the boot switches back and reboots again
    set_boot_id(host_root, BOOT_2)
    healthz.handler.status = 503
    process = spawn(host_root, *command)
    assert len(logind.wait_for_call("RebootWithFlags", timeout=30, count=2)) == 2
    process.send_signal(signal.SIGTERM)
    code, _, err = finish(process)
    assert code == 1
    assert "app: the host rebooted into 2.0.0 (boot id" in err
    assert "switching back to 1.0.0" in err
    assert "rebooting for app 1.0.0 (--reboot if-needed;" in err
    assert current(host_root) == "1.0.0"
    # the host boots into 1.0.0: the same command confirms that boot, refuses the quarantined 2.0.0 (exit 3) and
    # does not reboot again: no loop
    set_boot_id(host_root, "33333333-2222-4333-8444-555555555555")
    result = upgrade(host_root, *command, check=3)
    assert "refusing 2.0.0: it is quarantined since" in result.stderr
    assert len(logind.called("RebootWithFlags")) == 2
    state = state_of(host_root, "app")
    assert state["current"] == "1.0.0" and not state.get("pending_reboot")
    assert state["health"]["verdict"] == "failed" and state["health"]["version"] == "2.0.0"
