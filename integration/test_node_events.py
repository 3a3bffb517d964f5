"""Kubernetes Events on the Job's node: what `kubectl describe node` shows of a run after SUC has collected the
Job, its pod and its logs. hoist runs as in a pod (the service account bind-mounted at its real path in a private
mount namespace, KUBERNETES_SERVICE_HOST/PORT and SYSTEM_UPGRADE_NODE_NAME set) against the fake API server."""

import re
import signal
import subprocess
import time

import pytest

from conftest import HOIST_BIN, SANITIZER_ENV, RecordedPopen, run_recorded
from dbus_harness import system_bus  # noqa: F401 (a fixture)
from fake_apiserver import Cluster, FakeApiServer, free_port
from known_secrets import SA_TOKEN
from payloads import make_tree, state_of, upgrade
from prepare_harness import can_fake_service_account, make_service_account, pki  # noqa: F401 (a fixture)

pytestmark = pytest.mark.skipif(not can_fake_service_account(),
                                reason="needs root and unshare for a private mount namespace")

NODE = "node-7"
# What the shipped Plans grant: create events.k8s.io events in "default", where Node events live, and get and patch
# them to count a repeat on its series.
EVENTS_RULE = {"namespace": "default", "apiGroups": ["events.k8s.io"], "resources": ["events"],
               "verbs": ["create", "get", "patch"]}
IN_POD = ('mount -t tmpfs tmpfs /run && mkdir -p /run/secrets/kubernetes.io/serviceaccount && '
          'mount --bind "$0" /run/secrets/kubernetes.io/serviceaccount && exec "$@"')


@pytest.fixture
def cluster():
    cluster = Cluster(tokens=(SA_TOKEN,))
    cluster.rbac = [EVENTS_RULE]
    return cluster


@pytest.fixture
def server(cluster, pki):  # noqa: F811 (pki is a fixture)
    with FakeApiServer(cluster, pki) as server:
        yield server


@pytest.fixture
def account(tmp_path, pki):  # noqa: F811
    return make_service_account(tmp_path / "sa", pki["ca"], SA_TOKEN + "\n")


@pytest.fixture
def payloads(tmp_path):
    return (make_tree(tmp_path / "v1", {"a": "one\n"}, 1), make_tree(tmp_path / "v2", {"a": "two\n"}, 2))


def pod_argv(account, host_root, command, *args):
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", IN_POD, str(account),
            HOIST_BIN, "--host-root", str(host_root), "--lock-timeout", "5", command, *map(str, args)]


def pod_env(port, host="127.0.0.1", node=NODE):
    return {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", **SANITIZER_ENV, "KUBERNETES_SERVICE_HOST": host,
            "KUBERNETES_SERVICE_PORT": str(port), "SYSTEM_UPGRADE_NODE_NAME": node}


def in_pod(account, server_port, host_root, command, *args, check=None, env=None):
    result = run_recorded(pod_argv(account, host_root, command, *args), env={**pod_env(server_port), **(env or {})},
                          capture_output=True, text=True, timeout=120)
    if check is not None:
        assert result.returncode == check, result.stderr
    return result


def tree_args(source, version, *extra):
    return ["--component", "app", "--kind", "tree", "--source", source, "--destination", "/opt/app",
            "--version", version, *extra]


def test_upgrade_failure_and_rollback_each_post_one_event_on_the_node(host_root, payloads, cluster, server,
                                                                     account):
    v1, v2 = payloads
    in_pod(account, server.port, host_root, "upgrade", *tree_args(v1, "1.0.0"), check=0)
    in_pod(account, server.port, host_root, "upgrade", *tree_args(v2, "2.0.0"), check=0)
    in_pod(account, server.port, host_root, "upgrade", *tree_args(v1, "1.0.0"), check=3)
    in_pod(account, server.port, host_root, "rollback", "--component", "app", check=0)
    events = cluster.events
    assert [(e["reason"], e["type"], e["action"]) for e in events] == [
        ("HoistUpgraded", "Normal", "Upgrade"), ("HoistUpgraded", "Normal", "Upgrade"),
        ("HoistUpgradeFailed", "Warning", "Upgrade"), ("HoistRolledBack", "Normal", "Rollback")]
    assert [e["note"] for e in events] == [
        "hoist upgrade: succeeded; app: nothing installed -> 1.0.0 (first install)",
        "hoist upgrade: succeeded; app: 1.0.0 -> 2.0.0 (upgrade)",
        "hoist upgrade: failed (exit 3): app: refusing to downgrade from 2.0.0 to 1.0.0 (--allow-downgrade allows "
        "it)",
        "hoist rollback: succeeded; app: back one version"]
    for event in events:
        assert event["regarding"] == {"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": NODE}
        assert event["reportingController"] == "hoist"
        assert event["reportingInstance"] == NODE
        assert event["metadata"]["namespace"] == "default"
        assert re.fullmatch(rf"{NODE}\.[0-9a-f]+", event["metadata"]["name"])
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", event["eventTime"])
    posts = cluster.log_requests(method="POST")
    assert [(p["path"], p["status"], p["token"]) for p in posts] == \
        [("/apis/events.k8s.io/v1/namespaces/default/events", 201, SA_TOKEN)] * 4
    # One request a run, and nothing else asked of the API server.
    assert len(cluster.requests) == 4


def test_a_re_run_that_changes_nothing_posts_no_event(host_root, payloads, cluster, server, account):
    # SUC runs the Job again after a reboot, a retried pod, a Plan applied twice: the node's Events say what
    # changed, not that nothing did. Its log and termination message still say it.
    _, v2 = payloads
    in_pod(account, server.port, host_root, "upgrade", *tree_args(v2, "2.0.0"), check=0)
    again = in_pod(account, server.port, host_root, "upgrade", *tree_args(v2, "2.0.0"), check=0)
    assert " info: nothing to do\n" in again.stderr and "event" not in again.stderr
    assert [e["note"] for e in cluster.events] == [
        "hoist upgrade: succeeded; app: nothing installed -> 2.0.0 (first install)"]
    assert len(cluster.requests) == 1


def test_a_stage_posts_staged_and_a_refused_stage_posts_stage_failed(host_root, payloads, cluster, server, account):
    # A Plan's prepare step: its refusal is an Event before SUC cordons the node.
    v1, v2 = payloads
    in_pod(account, server.port, host_root, "upgrade", *tree_args(v2, "2.0.0"), check=0)
    in_pod(account, server.port, host_root, "stage", *tree_args(v1, "1.0.0"), check=3)
    in_pod(account, server.port, host_root, "stage", *tree_args(v2, "3.0.0"), check=0)
    assert [(e["reason"], e["type"], e["action"], e["note"]) for e in cluster.events[1:]] == [
        ("HoistStageFailed", "Warning", "Stage",
         "hoist stage: failed (exit 3): app: refusing to downgrade from 2.0.0 to 1.0.0 (--allow-downgrade allows it)"),
        ("HoistStaged", "Normal", "Stage", "hoist stage: succeeded; app: 2.0.0 -> 3.0.0 (upgrade)")]
    assert (host_root / "opt/app/current").readlink().name == "2.0.0"
    assert state_of(host_root, "app")["staged"]["version"] == "3.0.0"


def test_an_event_the_server_refuses_is_a_warning_and_the_upgrade_still_succeeds(host_root, payloads, cluster,
                                                                                 server, account):
    v1, _ = payloads
    cluster.rbac = []  # a Plan whose ServiceAccount may not create events
    result = in_pod(account, server.port, host_root, "upgrade", *tree_args(v1, "1.0.0"), check=0)
    assert "could not post event HoistUpgraded on node 'node-7' (the run's outcome stands): failed to create " \
           "events.events.k8s.io in namespace 'default' on '127.0.0.1:" in result.stderr
    assert "403 Forbidden (RBAC must allow verb 'create' on resource 'events' in API group 'events.k8s.io' in " \
           "namespace 'default')" in result.stderr
    assert SA_TOKEN not in result.stderr + result.stdout
    assert cluster.events == []
    assert (host_root / "opt/app/current").readlink().name == "1.0.0"


def test_an_unreachable_api_server_does_not_fail_the_upgrade(host_root, payloads, account):
    v1, _ = payloads
    start = time.monotonic()
    result = in_pod(account, free_port(), host_root, "upgrade", *tree_args(v1, "1.0.0"), check=0)
    assert time.monotonic() - start < 30
    assert "could not post event HoistUpgraded on node 'node-7'" in result.stderr
    assert "Connection refused" in result.stderr


def test_an_invalid_event_the_server_rejects_is_a_warning(host_root, payloads, cluster, server, account):
    v1, _ = payloads
    cluster.fail_next = [500]
    result = in_pod(account, server.port, host_root, "upgrade", *tree_args(v1, "1.0.0"), check=0)
    assert "could not post event HoistUpgraded" in result.stderr and "HTTP 500: injected failure 500" in result.stderr


def test_outside_a_pod_no_event_is_posted_and_nothing_is_said(host_root, payloads, cluster, server):
    v1, v2 = payloads
    # The node's name alone (a manual run with the variable exported): no service account, no event, no noise.
    result = upgrade(host_root, *tree_args(v1, "1.0.0"), env={"SYSTEM_UPGRADE_NODE_NAME": NODE}, check=0)
    assert "event" not in result.stderr.replace(str(host_root), "") and " warning: " not in result.stderr
    # The service account and the server's address, but no node name (not a SUC Job): no event either.
    result = upgrade(host_root, *tree_args(v2, "2.0.0"),
                     env={"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(server.port)},
                     check=0)
    assert "event" not in result.stderr.replace(str(host_root), "") and " warning: " not in result.stderr
    assert cluster.requests == []


def test_a_reboot_is_announced_before_it_is_asked_for(host_root, payloads, cluster, server, account,
                                                      system_bus):  # noqa: F811 (a fixture)
    v1, _ = payloads
    logind = system_bus.start("logind_manager")
    system_bus.start("systemd_manager")
    process = RecordedPopen(pod_argv(account, host_root, "upgrade", *tree_args(v1, "1.0.0", "--reboot", "if-needed")),
                            env=pod_env(server.port), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        logind.wait_for_call("RebootWithFlags")
        assert [(e["reason"], e["action"], e["note"]) for e in cluster.events] == \
            [("HoistRebooting", "Reboot", "hoist: rebooting for app 1.0.0")]
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)
    # Stopped by the node going down: that is the failure SUC sees, and the node says so too.
    assert [e["reason"] for e in cluster.events] == ["HoistRebooting", "HoistUpgradeFailed"]


def test_a_health_rollback_posts_rolled_back_naming_the_check_and_the_versions(host_root, payloads, cluster, server,
                                                                              account, system_bus):  # noqa: F811
    # It posted HoistUpgradeFailed: `kubectl describe node` did not say that the node was back on its old version.
    v1, v2 = payloads
    # k3s.service dies 300 ms after its second restart (2.0.0's); the first and the third (1.0.0's) are healthy
    system_bus.start("systemd_manager", dies={"k3s.service": 300}, sick_jobs=[2])
    checks = ("--restart", "k3s", "--health-check", "unit:k3s", "--health-settle", "1", "--health-timeout", "4")
    in_pod(account, server.port, host_root, "upgrade", *tree_args(v1, "1.0.0", *checks), check=0)
    in_pod(account, server.port, host_root, "upgrade", *tree_args(v2, "2.0.0", *checks), check=1)
    why = "health check unit:k3s did not pass within 4 s: k3s.service is failed (failed)"
    events = cluster.events
    assert [(e["reason"], e["type"], e["action"]) for e in events] == [
        ("HoistUpgraded", "Normal", "Upgrade"), ("HoistRolledBack", "Warning", "Rollback")]
    assert events[1]["note"] == f"hoist upgrade: rolled back (exit 1): app 2.0.0 -> 1.0.0: {why}; " \
                                "app: 1.0.0 -> 2.0.0 (upgrade)"
    # What the state's last result says, and the host
    result = state_of(host_root, "app")["last_result"]
    assert (result["outcome"], result["version"], result["message"]) == \
        ("rolled-back", "2.0.0", f"{why}; switched back to 1.0.0")
    assert (host_root / "opt/app/current").readlink().name == "1.0.0"


def job_env(plan, version, latest_hash):
    """The env SUC gives a Job's container for a Plan at `version` with `latest_hash`."""
    return {"SYSTEM_UPGRADE_PLAN_NAME": plan, "SYSTEM_UPGRADE_PLAN_LATEST_VERSION": version,
            "SYSTEM_UPGRADE_PLAN_LATEST_HASH": latest_hash}


def test_the_same_refusal_of_every_pod_suc_retries_is_one_event_series(host_root, payloads, cluster, server,
                                                                       account):
    # SUC retries a failed pod (backoff limit 99): a refused downgrade posted a new Warning Event a pod.
    v1, v2 = payloads
    in_pod(account, server.port, host_root, "upgrade", *tree_args(v2, "2.0.0"), env=job_env("app", "2.0.0", "h2"),
           check=0)
    for _ in range(3):
        in_pod(account, server.port, host_root, "upgrade", *tree_args(v1, "1.0.0"),
               env=job_env("app", "1.0.0", "h1"), check=3)
    refusal = "hoist upgrade: failed (exit 3): app: refusing to downgrade from 2.0.0 to 1.0.0 (--allow-downgrade " \
              "allows it)"
    events = cluster.events
    assert [(e["reason"], e["note"]) for e in events] == [
        ("HoistUpgraded", "hoist upgrade: succeeded; app: nothing installed -> 2.0.0 (first install)"),
        ("HoistUpgradeFailed", refusal)]
    series = events[1]["series"]
    assert series["count"] == 3
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", series["lastObservedTime"])
    assert series["lastObservedTime"] > events[1]["eventTime"]
    assert "series" not in events[0]
    # The first pod created it; each later one found it (409), read it and counted itself on it.
    assert [(r["verb"], r["status"]) for r in cluster.requests] == [
        ("create", 201), ("create", 201), ("create", 409), ("get", 200), ("patch", 200), ("create", 409),
        ("get", 200), ("patch", 200)]
    # Another Plan version (its hash) is another series, though it says the same.
    in_pod(account, server.port, host_root, "upgrade", *tree_args(v1, "1.0.0"), env=job_env("app", "1.0.0", "h3"),
           check=3)
    assert [(e["reason"], e.get("series", {}).get("count")) for e in cluster.events] == [
        ("HoistUpgraded", None), ("HoistUpgradeFailed", 3), ("HoistUpgradeFailed", None)]


def test_a_series_event_that_expired_is_created_again(host_root, payloads, cluster, server, account):
    v1, v2 = payloads
    in_pod(account, server.port, host_root, "upgrade", *tree_args(v2, "2.0.0"), env=job_env("app", "2.0.0", "h2"),
           check=0)
    in_pod(account, server.port, host_root, "upgrade", *tree_args(v1, "1.0.0"), env=job_env("app", "1.0.0", "h1"),
           check=3)
    # The API server's event TTL (an hour by default) removed it between the next pod's create and get.
    cluster.fail_next = [409]
    cluster.events.pop()
    in_pod(account, server.port, host_root, "upgrade", *tree_args(v1, "1.0.0"), env=job_env("app", "1.0.0", "h1"),
           check=3)
    assert [(e["reason"], "series" in e) for e in cluster.events] == [("HoistUpgraded", False),
                                                                      ("HoistUpgradeFailed", False)]
    assert [(r["verb"], r["status"]) for r in cluster.requests][-3:] == [("create", 409), ("get", 404),
                                                                         ("create", 201)]
