"""hoist's image run as real Jobs on a real Kubernetes: scripts/kube's cluster (kube-apiserver with RBAC,
controller-manager, scheduler, two kubelets with containerd, all built from Debian's sources), the Plans of
deploy/ rendered by kustomize (an overlay for image names only) and applied, and suc_controller.py playing
system-upgrade-controller v0.15.3. The Jobs mount a scratch host root per node at /host (never the machine's
own /); everything else is the real thing: the scheduler places the pods, the kubelet runs the init containers
and the upgrade container, mounts the service account, the pod-info files and the secrets, and reports the
termination message; the RBAC of deploy/ is enforced by the real authorizer.

What the cluster cannot be made to do (malformed responses, framing attacks, slow servers) stays with
fake_apiserver.py. docs/dev/real-cluster.md describes the stage, its times and what it needs.
"""

import hashlib
import os
import subprocess

import pytest
import yaml

pytest.register_assert_rewrite("real_cluster", "prepare_harness")

from dbus_harness import SystemBus, available as dbus_available
from kube_api import ApiError
from payloads import fake_k3s, host_read, state_of
from real_cluster import (KUBE, NAMESPACE, REFERENCE, apply_overlay, container_log, get_node, get_plan, import_payload,
                          jobs_of, label_node, node_events, plan_events, plan_of, pods_of, wait_for_job,
                          wait_for_pod_exit)
from suc_controller import munge
from test_image import hoist_image, payloads, signing_key  # noqa: F401 (fixtures: built as test_image builds them)

pytest_plugins = ["real_cluster"]

K3S_OLD, K3S_NEW, K3S_NEWER = "v1.20.1+k3s1", "v1.20.2+k3s1", "v1.20.3+k3s1"
# What the cluster's kubelets report (scripts/kube builds them with k3s's version suffix).
KUBELET = "v1.20.2+k3s1"


@pytest.fixture
def bus(suc, tmp_path):
    """A system bus in the server node's scratch host root, where the k3s Plans' upgrade container finds it."""
    if not dbus_available():
        pytest.skip("dbus-daemon or python3-dbusmock (Debian's /usr/bin/python3) is missing")
    created = SystemBus(suc.host_root(suc.cluster.server_node), tmp_path / "bus")
    yield created
    created.stop()


def k3s_server(cluster, suc, payloads, hoist_images, tmp_path, version, drop=("k3s-agent",), health_timeout=None):
    """deploy/k3s with the payload image's test name, the server Plan at `version`, the objects named in `drop`
    left out (the agent Plan); the server node labelled as the Plan selects it. Returns the applied documents."""
    image = import_payload(cluster, hoist_images, payloads.get("k3s", version))
    label_node(cluster, cluster.server_node, {"node-role.kubernetes.io/control-plane": "true", "k3s-upgrade": "true"})

    def change(docs):
        docs[:] = [d for d in docs if d["metadata"]["name"] not in drop]
        spec = plan_of(docs, "k3s-server")["spec"]
        spec["version"] = version
        if health_timeout:
            args = spec["upgrade"]["args"]
            args[args.index("--health-timeout=300")] = f"--health-timeout={health_timeout}"
    result, docs = apply_overlay(cluster, tmp_path, "k3s", image_names(hoist_images, image), change)
    assert result.returncode == 0, result.stderr
    return docs


def image_names(hoist_images, k3s):
    """The overlay's image names: deploy/'s localhost/hoist (the agents' prepare step) as the tests' hoist image,
    which has a name of the checkout's own (docs/dev/testing.md), and the k3s payload as its test build. The tags
    stay the Plans' own."""
    return {"localhost/hoist": hoist_images["hoist"].rsplit(":", 1)[0], "localhost/hoist-k3s": k3s.rsplit(":", 1)[0]}


def termination_message(pod, container="upgrade"):
    for status in pod["status"].get("containerStatuses", []) + pod["status"].get("initContainerStatuses", []):
        if status["name"] == container:
            return status["state"].get("terminated", {}).get("message", "")
    return None


# ------------------------------------------------------------------ the cluster itself

def test_the_cluster_registers_this_machine_and_a_second_node_with_real_kubelets(real_cluster):
    nodes = {n["metadata"]["name"]: n for n in real_cluster.api.items("/api/v1/nodes")}
    assert sorted(nodes) == sorted(real_cluster.nodes)
    assert real_cluster.server_node == subprocess.run(["hostname", "-s"], capture_output=True,
                                                      text=True).stdout.strip()
    for node in nodes.values():
        assert node["status"]["nodeInfo"]["kubeletVersion"] == KUBELET
        assert node["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://")
        ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
        assert ready["status"] == "True", ready


def test_kubernetes_1_20_refuses_suc_plan_crds_as_they_are_for_their_empty_string_defaults(real_cluster):
    # Both the v0.15.3 CRD and the newer one: their `default: ''` fields read as null in 1.20's structural schema
    # check. The fixture installs v0.15.3's without them (real_cluster.plan_crd).
    for name in ("upgrade.cattle.io_plans-v0.15.3.yaml", "upgrade.cattle.io_plans.yaml"):
        result = real_cluster.kubectl("apply", "--dry-run=server", "-f", REFERENCE / name, check=False)
        assert result.returncode != 0, name
        assert ('spec.validation.openAPIV3Schema.properties[spec].properties[imagePullSecrets].items.properties'
                '[name].default: Invalid value: "null":  in body must be of type string: "null"') in result.stderr, \
            result.stderr


def test_kubernetes_1_20_takes_an_events_k8s_io_event_about_a_node_in_kube_system_only(real_cluster):
    # 1.20's validation (pkg/apis/core/validation/events.go, legacyValidateEvent): an Event with an eventTime, which
    # events.k8s.io/v1 requires, about a cluster-scoped object must be in kube-system. The 1.32 servers of issue 28
    # took hoist's Node Events in default, where hoist posts them (and the shipped Roles allow it): on a 1.20
    # server they are refused, and hoist says so in a warning (test_the_k3s_server_plan_upgrades...).
    node = real_cluster.server_node

    def event(namespace):
        return {"apiVersion": "events.k8s.io/v1", "kind": "Event",
                "metadata": {"generateName": "hoist-test-", "namespace": namespace},
                "eventTime": "2024-06-01T00:00:00.000000Z", "reportingController": "hoist",
                "reportingInstance": node, "action": "Upgrade", "reason": "HoistTest", "type": "Normal",
                "regarding": {"kind": "Node", "name": node, "uid": node, "apiVersion": "v1"}, "note": "test"}
    for namespace in ("default", NAMESPACE):
        with pytest.raises(ApiError) as refused:
            real_cluster.api.create(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events", event(namespace))
        assert refused.value.status == 422, refused.value
        assert 'involvedObject.namespace: Invalid value: \\"\\": does not match event.namespace' \
            in refused.value.body, refused.value.body
    created = real_cluster.api.create("/apis/events.k8s.io/v1/namespaces/kube-system/events", event("kube-system"))
    real_cluster.api.delete(f"/apis/events.k8s.io/v1/namespaces/kube-system/events/{created['metadata']['name']}")


# ------------------------------------------------------------------ the k3s server Plan

def test_the_k3s_server_plan_upgrades_through_a_real_job_and_suc_labels_and_uncordons_the_node(
        real_cluster, suc, bus, payloads, hoist_images, tmp_path):
    cluster, node = real_cluster, real_cluster.server_node
    systemd = bus.start("systemd_manager")
    root = suc.host_root(node)
    fake_k3s(root, tmp_path, K3S_OLD)
    k3s_server(cluster, suc, payloads, hoist_images, tmp_path, K3S_NEW)

    job = wait_for_job(cluster, "k3s-server", 300, suc=suc)
    plan = get_plan(cluster, "k3s-server")
    # SUC's status: the version munged, the hash of version and service account, the node applying.
    assert plan["status"]["latestVersion"] == munge(K3S_NEW)
    assert plan["status"]["latestHash"] == hashlib.sha224(
        (munge(K3S_NEW) + "hoist-k3s-server").encode()).hexdigest()
    # The Job as SUC shapes it, and as the API server stored it.
    spec = job["spec"]["template"]["spec"]
    assert spec["hostPID"] and spec["hostIPC"] and spec["hostNetwork"]
    assert spec["serviceAccountName"] == "hoist-k3s-server"
    assert [c["name"] for c in spec["initContainers"]] == ["cordon"]
    assert spec["initContainers"][0]["args"] == ["cordon", node]
    assert spec["containers"][0]["image"].endswith(":" + munge(K3S_NEW))
    assert job["spec"]["backoffLimit"] == 99 and job["spec"]["activeDeadlineSeconds"] == 900
    assert job["spec"]["ttlSecondsAfterFinished"] == 900  # kept: the TTLAfterFinished gate is on

    pod = pods_of(cluster, job["metadata"]["name"])[-1]
    assert pod["spec"]["nodeName"] == node
    log = container_log(cluster, pod)
    assert f"health: node-ready passed: node '{node}' is Ready (kubelet {KUBELET})" in log, log
    assert "health: unit:k3s.service passed" in log, log
    # The termination message, as the kubelet read it from /dev/termination-log and the API server keeps it.
    message = termination_message(pod)
    assert message.startswith("hoist upgrade: succeeded\n"), message
    assert os.readlink(root / "usr/local/bin/k3s") == f"/var/lib/hoist/k3s/{K3S_NEW}/k3s"
    assert state_of(root, "k3s")["current"] == K3S_NEW
    assert systemd.called("RestartUnit") == ['RestartUnit "k3s.service" "replace"']

    # SUC's part after the Job: the node labelled with the hash and uncordoned, the Plan complete.
    label = "plan.upgrade.cattle.io/k3s-server"
    cluster.api.wait_for("the node labelled and uncordoned", lambda: (
        get_node(cluster, node)["metadata"]["labels"].get(label) == plan["status"]["latestHash"]
        and not get_node(cluster, node)["spec"].get("unschedulable")), 60)
    cluster.api.wait_for("the Plan complete", lambda: any(
        c["type"] == "Complete" and c["status"] == "True" for c in get_plan(cluster, "k3s-server")["status"].get(
            "conditions", [])), 60)
    # hoist's own Event about the node is refused by this 1.20 server (it wants kube-system: see
    # test_kubernetes_1_20_takes_an_events_k8s_io_event_about_a_node_in_kube_system_only); the run's outcome
    # stands, and hoist's warning names the refusal. Every other request hoist made succeeded with exactly the
    # shipped roles.
    assert f"could not post event HoistUpgraded on node '{node}' (the run's outcome stands)" in log, log
    assert "422" in log, log
    assert "403" not in log, log
    assert not node_events(cluster, node, "HoistUpgraded")
    assert plan_events(cluster, "k3s-server", "JobComplete")


@pytest.fixture
def wait_job_created(real_cluster):
    def wait(plan, timeout=120):
        return real_cluster.api.wait_for(f"a Job of plan {plan}", lambda: (jobs_of(real_cluster, plan) or [None])[0],
                                         timeout)
    return wait


def test_a_refused_downgrade_fails_pod_after_pod_and_leaves_the_node_cordoned(
        real_cluster, suc, bus, payloads, hoist_images, tmp_path, wait_job_created):
    cluster, node = real_cluster, real_cluster.server_node
    systemd = bus.start("systemd_manager")
    root = suc.host_root(node)
    installed = fake_k3s(root, tmp_path, K3S_NEWER).read_bytes()   # put there by hand, newer than the Plan
    k3s_server(cluster, suc, payloads, hoist_images, tmp_path, K3S_NEW)
    job = wait_job_created("k3s-server")
    name = job["metadata"]["name"]
    pod, terminated = wait_for_pod_exit(cluster, name, suc=suc)
    assert terminated["exitCode"] == 3, terminated
    refusal = (f"refusing to downgrade from {K3S_NEWER} (what '/usr/local/bin/k3s --version' says) to {K3S_NEW} "
               "(--allow-downgrade allows it)")
    assert terminated.get("message", "").startswith("hoist upgrade: failed (exit 3): "), terminated
    assert refusal in terminated["message"], terminated
    assert refusal in container_log(cluster, pod)
    # The Job's backoff limit (99) makes the Job controller start another pod, which is refused again.
    second, terminated = wait_for_pod_exit(cluster, name, count=2, timeout=120, suc=suc)
    assert second["metadata"]["uid"] != pod["metadata"]["uid"]
    assert terminated["exitCode"] == 3, terminated
    # The cordon init container ran before the upgrade container refused: SUC leaves the node cordoned, the Plan
    # incomplete (the Job has neither failed nor completed).
    assert get_node(cluster, node)["spec"].get("unschedulable") is True
    complete = next(c for c in get_plan(cluster, "k3s-server")["status"]["conditions"] if c["type"] == "Complete")
    assert complete["status"] == "False" and complete["reason"] == "SyncJob", complete
    assert (root / "usr/local/bin/k3s").read_bytes() == installed
    assert systemd.called("RestartUnit") == []
    # The Warning Event about the node: posted, and refused by 1.20 for its namespace (see above).
    assert f"could not post event HoistUpgradeFailed on node '{node}'" in container_log(cluster, second)


@pytest.mark.parametrize("suc_settings", [{"backoff_limit": 0}], ids=["backoff-limit-0"])
def test_a_failing_health_check_switches_back_and_the_plan_says_why_the_job_failed(
        real_cluster, suc, bus, payloads, hoist_images, tmp_path, wait_job_created):
    cluster, node = real_cluster, real_cluster.server_node
    # k3s fails a second after its first restart (the new version); the restart back to the old one is healthy.
    systemd = bus.start("systemd_manager", dies={"k3s.service": 1000}, sick_jobs=[1])
    root = suc.host_root(node)
    installed = fake_k3s(root, tmp_path, K3S_OLD).read_bytes()
    # A check that fails keeps looking for the whole --health-timeout: the shipped Plan's 300 s would only make
    # this test 280 s longer.
    k3s_server(cluster, suc, payloads, hoist_images, tmp_path, K3S_NEW, health_timeout=20)
    job = wait_job_created("k3s-server")
    pod, terminated = wait_for_pod_exit(cluster, job["metadata"]["name"], timeout=300, suc=suc)
    assert terminated["exitCode"] == 1, (terminated, container_log(cluster, pod))
    job = wait_for_job(cluster, "k3s-server", 120, condition="Failed", suc=suc)
    pod = pods_of(cluster, job["metadata"]["name"])[-1]
    upgrade = next(s for s in pod["status"]["containerStatuses"] if s["name"] == "upgrade")
    assert upgrade["state"]["terminated"]["exitCode"] == 1, upgrade
    log = container_log(cluster, pod)
    assert f"switching back to {K3S_OLD}" in log or "switching back" in log, log
    assert host_read(root, "/usr/local/bin/k3s") == installed   # the k3s that was there, switched back to
    assert len(systemd.called("RestartUnit")) == 2
    # SUC's Job handler: the Plan's Complete condition carries the Job's failure.
    failed = next(c for c in job["status"]["conditions"] if c["type"] == "Failed")
    expected = (f"Job {NAMESPACE}/{job['metadata']['name']} failed on Node {node}: {failed['reason']}: "
                f"{failed['message']}")
    cluster.api.wait_for("the Plan's Complete condition names the failed Job", lambda: any(
        c["type"] == "Complete" and c["status"] == "False" and c["reason"] == "JobFailed"
        and c["message"] == expected for c in get_plan(cluster, "k3s-server")["status"]["conditions"]), 60)
    assert failed["reason"] == "BackoffLimitExceeded"
    assert plan_events(cluster, "k3s-server", "JobFailed")
    assert get_node(cluster, node)["spec"].get("unschedulable") is True  # a failed Job leaves it cordoned


def test_hoist_reports_a_403_clearly_when_a_shipped_role_binding_is_removed(
        real_cluster, suc, bus, payloads, hoist_images, tmp_path):
    cluster, node = real_cluster, real_cluster.server_node
    bus.start("systemd_manager")
    fake_k3s(suc.host_root(node), tmp_path, K3S_OLD)
    # Every shipped object but the binding that lets the server Plan's account create Events in default.
    k3s_server(cluster, suc, payloads, hoist_images, tmp_path, K3S_NEW, drop=("k3s-agent", "hoist-k3s-server-events"))
    job = wait_for_job(cluster, "k3s-server", 300, suc=suc)
    log = container_log(cluster, pods_of(cluster, job["metadata"]["name"])[-1])
    assert f"could not post event HoistUpgraded on node '{node}' (the run's outcome stands)" in log, log
    assert "403 Forbidden" in log, log
    assert 'cannot create resource \\"events\\" in API group \\"events.k8s.io\\" in the namespace ' \
           '\\"default\\"' in log or 'cannot create resource "events"' in log, log


# ------------------------------------------------------------------ the agent Plan, which drains

def apply_ok(result):
    assert result.returncode == 0, result.stderr


def test_the_agent_plans_prepare_waits_for_the_server_plan_through_the_real_api(
        real_cluster, suc, bus, payloads, hoist_images, tmp_path, wait_job_created):
    cluster, server, agent = real_cluster, real_cluster.server_node, real_cluster.agent_node
    bus.start("systemd_manager")
    agent_bus = SystemBus(suc.host_root(agent), tmp_path / "agent-bus")
    try:
        agent_systemd = agent_bus.start("systemd_manager")
        for node in (server, agent):
            (tmp_path / node).mkdir()
            fake_k3s(suc.host_root(node), tmp_path / node, K3S_OLD)
        image = import_payload(cluster, hoist_images, payloads.get("k3s", K3S_NEW))
        label_node(cluster, server, {"node-role.kubernetes.io/control-plane": "true", "k3s-upgrade": "true"})
        label_node(cluster, agent, {"k3s-upgrade": "true"})

        def change(docs):
            for plan in ("k3s-server", "k3s-agent"):
                plan_of(docs, plan)["spec"]["version"] = K3S_NEW
        result, docs = apply_overlay(cluster, tmp_path, "k3s", image_names(hoist_images, image), change)
        apply_ok(result)
        agent_job = wait_job_created("k3s-agent")
        server_job = wait_for_job(cluster, "k3s-server", 300, suc=suc)
        done = wait_for_job(cluster, "k3s-agent", 300, suc=suc)
        assert done["metadata"]["name"] == agent_job["metadata"]["name"]
        pod = pods_of(cluster, done["metadata"]["name"])[-1]
        prepare = next(s for s in pod["status"]["initContainerStatuses"] if s["name"] == "prepare")
        # The prepare step ended after the server Plan's Job completed, not before.
        assert prepare["state"]["terminated"]["finishedAt"] >= server_job["status"]["completionTime"]
        log = container_log(cluster, pod, "prepare")
        assert "plan 'k3s-server' is complete" in log, log
        assert pod["spec"]["nodeName"] == agent
        assert os.readlink(suc.host_root(agent) / "usr/local/bin/k3s") == f"/var/lib/hoist/k3s/{K3S_NEW}/k3s"
        assert agent_systemd.called("RestartUnit") == ['RestartUnit "k3s-agent.service" "replace"']
    finally:
        agent_bus.stop()


# ------------------------------------------------------------------ faults only a real cluster gives

def plan_doc(name, selector, account, hoist_image, prepare_args=None, upgrade_args=("version",)):
    """A Plan of the tests' own (not from deploy/): hoist's image, tagged, for its steps."""
    spec = {"version": K3S_NEW, "concurrency": 1, "serviceAccountName": account,
            "nodeSelector": {"matchExpressions": selector},
            "upgrade": {"image": hoist_image, "args": list(upgrade_args)}}
    if prepare_args:
        spec["prepare"] = {"image": hoist_image, "args": list(prepare_args)}
    return {"apiVersion": "upgrade.cattle.io/v1", "kind": "Plan",
            "metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec}


def test_prepare_waits_through_an_api_server_restart_and_a_watch_that_expired(
        real_cluster, suc, hoist_images, tmp_path, wait_job_created):
    cluster, server, agent = real_cluster, real_cluster.server_node, real_cluster.agent_node
    hoist = hoist_images["hoist"]
    # The accounts and roles of deploy/k3s; the Plans are the tests' own, so that the server Plan completes at
    # once (its upgrade step is `hoist version`) when the test says.
    result, _ = apply_overlay(cluster, tmp_path, "k3s", {}, lambda docs: docs.__setitem__(
        slice(None), [d for d in docs if d["kind"] != "Plan"]))
    apply_ok(result)
    label_node(cluster, server, {"node-role.kubernetes.io/control-plane": "true", "k3s-upgrade": "true"})
    label_node(cluster, agent, {"k3s-upgrade": "true"})
    waiter = plan_doc("waiter", [{"key": "k3s-upgrade", "operator": "Exists"},
                                 {"key": "node-role.kubernetes.io/control-plane", "operator": "DoesNotExist"}],
                      "hoist-k3s-agent", hoist,
                      ["prepare", "k3s-server", "--node-version=$(SYSTEM_UPGRADE_PLAN_LATEST_VERSION)",
                       "--timeout=600"])
    apply_ok(cluster.apply([waiter], check=False))
    job = wait_job_created("waiter")

    def prepare_log():
        pods = pods_of(cluster, job["metadata"]["name"])
        return container_log(cluster, pods[-1], "prepare") if pods else ""
    cluster.api.wait_for("prepare waits for the missing server Plan", lambda: "waiting for plan 'k3s-server'"
                         in prepare_log(), 120)
    # The API server goes away under prepare's watches and comes back with a new watch cache: the
    # resourceVersion prepare resumes from is older than the cache's first, and it is told 410 Gone.
    restart = subprocess.run([str(KUBE), "restart", str(cluster.dir), "kube-apiserver"], capture_output=True,
                             text=True, timeout=180)
    assert restart.returncode == 0, restart.stderr
    for index in range(20):   # writes while prepare is reconnecting
        label_node(cluster, agent, {"hoist-test-write": str(index)})
    label_node(cluster, agent, {"hoist-test-write": None})
    server_plan = plan_doc("k3s-server", [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}],
                           "hoist-k3s-server", hoist)
    apply_ok(cluster.apply([server_plan], check=False))
    done = wait_for_job(cluster, "waiter", 300, suc=suc)
    log = container_log(cluster, pods_of(cluster, done["metadata"]["name"])[-1], "prepare")
    assert "is too old (410 Gone); listing again" in log, log
    assert "plan 'k3s-server' is complete" in log, log


# ------------------------------------------------------------------ SUC's Jobs over time

@pytest.mark.parametrize("suc_settings", [{"ttl_seconds_after_finished": 45}], ids=["ttl-45s"])
def test_a_plan_reverted_within_the_job_ttl_is_complete_by_its_old_job_and_hoist_does_not_run(
        real_cluster, suc, hoist_images, tmp_path, wait_job_created):
    # SUC's Plan hash covers the version and the service account only, and a finished Job stays for its TTL
    # (SYSTEM_UPGRADE_JOB_TTL_SECONDS_AFTER_FINISH, 900 s deployed; 45 s here): a Plan moved back to a version
    # whose Job is still there is marked complete by that Job, and no pod runs.
    cluster, node = real_cluster, real_cluster.server_node
    result, _ = apply_overlay(cluster, tmp_path, "k3s", {}, lambda docs: docs.__setitem__(
        slice(None), [d for d in docs if d["kind"] != "Plan"]))
    apply_ok(result)
    label_node(cluster, node, {"node-role.kubernetes.io/control-plane": "true"})
    plan = plan_doc("k3s-server", [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}],
                    "hoist-k3s-server", hoist_images["hoist"])
    plans = f"/apis/upgrade.cattle.io/v1/namespaces/{NAMESPACE}/plans"
    apply_ok(cluster.apply([plan], check=False))
    first = wait_for_job(cluster, "k3s-server", 120, suc=suc)
    cluster.api.merge_patch(f"{plans}/k3s-server", {"spec": {"version": K3S_NEWER}})
    second = cluster.api.wait_for("the Job of the new version completes", lambda: next(
        (j for j in jobs_of(cluster, "k3s-server") if j["metadata"]["labels"]["upgrade.cattle.io/version"] ==
         munge(K3S_NEWER) and any(c["type"] == "Complete" and c["status"] == "True"
                                  for c in j.get("status", {}).get("conditions") or [])), None), 120)
    assert second["metadata"]["name"] != first["metadata"]["name"]
    label = "plan.upgrade.cattle.io/k3s-server"
    cluster.api.wait_for("the node labelled with the new hash", lambda: get_node(cluster, node)["metadata"][
        "labels"].get(label) == second["metadata"]["labels"][label], 60)
    # Back to the first version, within the first Job's TTL.
    cluster.api.merge_patch(f"{plans}/k3s-server", {"spec": {"version": K3S_NEW}})
    cluster.api.wait_for("the Plan complete at the first version again", lambda: (
        get_plan(cluster, "k3s-server")["status"].get("latestVersion") == munge(K3S_NEW) and any(
            c["type"] == "Complete" and c["status"] == "True"
            for c in get_plan(cluster, "k3s-server")["status"]["conditions"])), 120)
    assert get_node(cluster, node)["metadata"]["labels"][label] == first["metadata"]["labels"][label]
    # The first Job's one pod is all that ever ran for that version: the revert ran nothing on the node.
    assert len(pods_of(cluster, first["metadata"]["name"])) == 1
    assert len(jobs_of(cluster, "k3s-server")) <= 2
