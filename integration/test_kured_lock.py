"""--kured-lock: hoist takes kured's reboot lock (the `weave.works/kured-node-lock` annotation on kured's DaemonSet, in
kured's own JSON) before it asks logind for its reboot, never reboots while another node holds it, gives it back when
no reboot came, and the run after the boot gives it back. hoist runs as in a pod (test_node_events' service account
and env) against the fake API server, logind and systemd are python-dbusmock's on a real dbus-daemon."""

import datetime
import json
import signal
import socket
import subprocess
import time

import pytest

from conftest import RecordedPopen
from dbus_harness import system_bus  # noqa: F401 (a fixture)
from fake_apiserver import DAEMONSET_API
from payloads import state_of
from test_node_events import (EVENTS_RULE, NODE, account, cluster, in_pod, payloads, pod_argv,  # noqa: F401
                              pod_env, server, tree_args)
from prepare_harness import pki  # noqa: F401 (a fixture)

pytestmark = pytest.mark.skipif(not __import__("prepare_harness").can_fake_service_account(),
                                reason="needs root and unshare for a private mount namespace")

ANNOTATION = "weave.works/kured-node-lock"
KURED = ["--kured-lock", "kube-system/kured"]
# What a Plan's account needs for it: get and patch kured's DaemonSet in kube-system.
KURED_RULE = {"namespace": "kube-system", "apiGroups": ["apps"], "resources": ["daemonsets"],
              "verbs": ["get", "patch"]}


def put_kured(cluster, lock=None):
    annotations = {"deprecated.daemonset.template.generation": "1"}
    if lock is not None:
        annotations[ANNOTATION] = json.dumps(lock)
    return cluster.put(DAEMONSET_API, {"apiVersion": "apps/v1", "kind": "DaemonSet",
                                       "metadata": {"name": "kured", "namespace": "kube-system",
                                                    "annotations": annotations}})


def lock_of(cluster):
    text = cluster.get(DAEMONSET_API, "kured", "kube-system")["metadata"].get("annotations", {}).get(ANNOTATION)
    return json.loads(text) if text is not None else None


def held_by(node, created="2026-12-06T10:00:00Z", ttl=0):
    """kured's own value, as its daemonsetlock writes it."""
    return {"nodeID": node, "metadata": {"unschedulable": False}, "created": created, "TTL": ttl}


def start_upgrade(account, server, host_root, version_dir, version, *extra):
    return RecordedPopen(pod_argv(account, host_root, "upgrade", *tree_args(version_dir, version, "--reboot",
                                                                            "if-needed", *KURED, *extra)),
                         env=pod_env(server.port), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def boot(host_root, boot_id):
    (host_root / "proc/sys/kernel/random/boot_id").write_text(boot_id + "\n")


@pytest.fixture
def kured_cluster(cluster):
    cluster.rbac = [EVENTS_RULE, KURED_RULE]
    return cluster


@pytest.fixture
def logind(system_bus):  # noqa: F811 (a fixture)
    """logind's double, which records the reboot asked for, beside systemd's."""
    system_bus.start("systemd_manager")
    return system_bus.start("logind_manager")


def until_reboot(logind, process, while_waiting=lambda: None):
    """Waits until `process` asks logind for the reboot, runs `while_waiting`, then stops it as the node going down
    does (SIGTERM); its stderr."""
    try:
        logind.wait_for_call("RebootWithFlags")
        while_waiting()
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    return stderr


def test_a_free_lock_is_taken_in_kureds_form_before_the_reboot_and_given_back_after_the_boot(
        host_root, payloads, kured_cluster, server, account, logind):  # noqa: F811 (fixtures)
    cluster = kured_cluster
    v1, _ = payloads
    put_kured(cluster)
    def taken():
        lock = lock_of(cluster)
        # kured's single form: this node, cordoned (so that kured's pod never uncordons a node SUC cordoned), no TTL.
        assert set(lock) == {"nodeID", "metadata", "created", "TTL"}
        assert (lock["nodeID"], lock["metadata"], lock["TTL"]) == (NODE, {"unschedulable": True}, 0)
        assert lock["created"].endswith("Z")
        # The lock is taken before the node is told it reboots.
        patches = [r for r in cluster.requests if r.get("resource") == "daemonsets" and r["verb"] == "patch"]
        posts = [r for r in cluster.requests if r.get("resource") == "events"]
        assert patches[0]["time"] < posts[0]["time"]

    stderr = until_reboot(logind, start_upgrade(account, server, host_root, v1, "1.0.0"), taken)
    assert f"took kured's lock (DaemonSet kube-system/kured annotation {ANNOTATION}) for node '{NODE}'" in stderr
    # Stopped by the shutdown: the lock stays this node's through the boot.
    assert lock_of(cluster)["nodeID"] == NODE
    # The Job's next pod, after the boot, confirms the reboot and gives the lock back.
    boot(host_root, "66666666-7777-4888-8999-000000000000")
    again = in_pod(account, server.port, host_root, "upgrade", *tree_args(v1, "1.0.0", "--reboot", "if-needed", *KURED),
                   check=0)
    assert "gave kured's lock (DaemonSet kube-system/kured) back" in again.stderr
    assert lock_of(cluster) is None
    assert cluster.get(DAEMONSET_API, "kured", "kube-system")["metadata"]["annotations"] == {
        "deprecated.daemonset.template.generation": "1"}
    assert state_of(host_root, "app")["current"] == "1.0.0"


def test_a_lock_another_node_holds_holds_the_reboot_until_kured_gives_it_back(
        host_root, payloads, kured_cluster, server, account, logind):  # noqa: F811 (fixtures)
    cluster = kured_cluster
    v1, _ = payloads
    put_kured(cluster, held_by("node-3"))
    process = start_upgrade(account, server, host_root, v1, "1.0.0", "--reboot-timeout", "60")
    cluster.wait_for(lambda c: len([r for r in c.requests if r.get("resource") == "daemonsets"]) >= 2, timeout=30)
    time.sleep(1)
    assert not logind.called("RebootWithFlags")
    assert lock_of(cluster)["nodeID"] == "node-3"
    # kured's pod on node-3, after its boot: it deletes the annotation. hoist takes it and reboots.
    cluster.update(DAEMONSET_API, "kured", lambda ds: ds["metadata"]["annotations"].pop(ANNOTATION), "kube-system")
    stderr = until_reboot(logind, process)
    assert lock_of(cluster)["nodeID"] == NODE
    assert "waiting for kured's lock (DaemonSet kube-system/kured): it is held by node 'node-3' since " \
           "2026-12-06T10:00:00Z; 0 s so far" in stderr


def test_a_lock_held_past_the_reboot_timeout_switches_back_and_never_reboots(
        host_root, payloads, kured_cluster, server, account, logind):  # noqa: F811 (fixtures)
    cluster = kured_cluster
    v1, v2 = payloads
    put_kured(cluster)
    in_pod(account, server.port, host_root, "upgrade", *tree_args(v1, "1.0.0"), check=0)
    multi = {"maxOwners": 2, "locks": [held_by("node-3"), held_by("node-4")]}
    put_kured(cluster, multi)
    result = in_pod(account, server.port, host_root, "upgrade",
                    *tree_args(v2, "2.0.0", "--reboot", "if-needed", "--reboot-timeout", "3", *KURED), check=1)
    assert ("no reboot: kured's lock (DaemonSet kube-system/kured annotation weave.works/kured-node-lock) was not free "
            "within 3 s (--reboot-timeout): it is held by node 'node-3' since 2026-12-06T10:00:00Z, node 'node-4' "
            "since 2026-12-06T10:00:00Z") in result.stderr
    assert not logind.called("RebootWithFlags")
    assert (host_root / "opt/app/current").readlink().name == "1.0.0"
    assert state_of(host_root, "app")["pending_reboot"] is None
    assert lock_of(cluster) == multi  # kured's lock as kured left it
    assert "HoistRebooting" not in [e["reason"] for e in cluster.events]


def test_a_place_in_kureds_multiple_lock_an_expired_holder_and_a_conflict_are_kureds_rules(
        host_root, payloads, kured_cluster, server, account, logind):  # noqa: F811 (fixtures)
    cluster = kured_cluster
    v1, _ = payloads
    # Two places, one taken by node-3 and one by node-4 whose TTL (1 s, in Go's nanoseconds) ran out long ago.
    put_kured(cluster, {"maxOwners": 2, "locks": [held_by("node-3"), held_by("node-4", ttl=10**9)]})
    # The first write meets a conflict (another kured wrote meanwhile): read again, write again.
    cluster.daemonset_conflicts = 1
    until_reboot(logind, start_upgrade(account, server, host_root, v1, "1.0.0"))
    lock = lock_of(cluster)
    assert lock["maxOwners"] == 2 and [holder["nodeID"] for holder in lock["locks"]] == ["node-3", NODE]
    assert [r["status"] for r in cluster.requests if r.get("resource") == "daemonsets"].count(409) == 1


def test_no_kured_daemonset_means_no_lock_and_a_forbidden_one_means_no_reboot(
        host_root, payloads, kured_cluster, server, account, logind):  # noqa: F811 (fixtures)
    cluster = kured_cluster
    v1, v2 = payloads
    stderr = until_reboot(logind, start_upgrade(account, server, host_root, v1, "1.0.0"))
    assert "no DaemonSet kube-system/kured: no kured lock to take (--kured-lock)" in stderr
    # A Plan whose account may not read it: the lock cannot be known, so there is no reboot.
    put_kured(cluster)
    cluster.rbac = [EVENTS_RULE]
    boot(host_root, "66666666-7777-4888-8999-000000000000")
    in_pod(account, server.port, host_root, "upgrade", *tree_args(v1, "1.0.0", "--reboot", "if-needed", *KURED),
           check=0)
    result = in_pod(account, server.port, host_root, "upgrade",
                    *tree_args(v2, "2.0.0", "--reboot", "if-needed", *KURED), check=1)
    assert "cannot take kured's lock (DaemonSet kube-system/kured, --kured-lock): " in result.stderr
    assert "403" in result.stderr
    assert len(logind.called("RebootWithFlags")) == 1
    assert (host_root / "opt/app/current").readlink().name == "1.0.0"


def test_kured_lock_is_refused_outside_a_pod_with_delegate_and_when_not_a_daemonset_name(host_root, payloads):
    from payloads import upgrade
    v1, _ = payloads
    result = upgrade(host_root, *tree_args(v1, "1.0.0", "--reboot", "if-needed", *KURED), check=2)
    assert "--kured-lock: takes the lock for a SUC Job's node, with the pod's service account" in result.stderr
    result = upgrade(host_root, *tree_args(v1, "1.0.0", "--reboot", "delegate", *KURED), check=2)
    assert "--kured-lock: with --reboot delegate kured reboots the node and takes its lock itself" in result.stderr
    result = upgrade(host_root, *tree_args(v1, "1.0.0", "--kured-lock", "kured"), check=2)
    assert "--kured-lock: 'kured' is not NAMESPACE/NAME of kured's DaemonSet" in result.stderr
    assert not (host_root / "opt/app").exists()


def test_a_node_going_down_stops_a_request_for_the_lock_at_once(host_root, payloads, account, logind):  # noqa: F811
    # An API server that takes the connection and never answers: the request would wait its 30 s. SIGTERM (the
    # node shutting down, the Job deleted) ends it at once, and no reboot is asked for.
    v1, _ = payloads
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        process = RecordedPopen(pod_argv(account, host_root, "upgrade", *tree_args(v1, "1.0.0", "--reboot", "if-needed",
                                                                                 *KURED)),
                                env=pod_env(silent.getsockname()[1]), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        connection, _ = silent.accept()  # hoist's request for kured's DaemonSet, after the switch
        with connection:
            time.sleep(1)
            process.send_signal(signal.SIGTERM)
            _, stderr = process.communicate(timeout=60)
    assert process.returncode == 1, stderr

    def logged(text):
        line = next(line for line in stderr.splitlines() if text in line)
        return datetime.datetime.fromisoformat(line.split()[0].replace("Z", "+00:00"))

    # Stopped within a few seconds of the signal, not at the request's 30 s deadline. (The failure's Event after it
    # has its own 10 s bound against this silent server.)
    stopped = logged("error: stopped by SIGTERM before taking kured's lock")
    assert (stopped - logged("rebooting for app 1.0.0")).total_seconds() < 5, stderr
    assert not logind.called("RebootWithFlags")
