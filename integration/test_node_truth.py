"""What a real node and SUC's kubelet put around hoist: the pod's downward-API
files as the kubelet writes them, and a container that forgot the host's root."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import HOIST_BIN, run_recorded, tree_manifest
from fake_apiserver import Cluster, FakeApiServer
from payloads import fake_k3s, host_read, make_tree, manifest_without, state_of, upgrade
from prepare_harness import can_fake_service_account, make_service_account, pki  # noqa: F401 (a fixture)
from test_health import upgrade_in_cluster

needs_namespace = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None
    or subprocess.run(["unshare", "-m", "--propagation", "private", "true"], capture_output=True).returncode != 0,
    reason="needs root and unshare for a private mount namespace")


def run_with_run_dir(tmp_path, files, *argv, env=None):
    staging = tmp_path / "run-staging"
    for path, data in files.items():
        (staging / path).parent.mkdir(parents=True, exist_ok=True)
        (staging / path).write_bytes(data if isinstance(data, bytes) else data.encode())
    staging.mkdir(exist_ok=True)
    script = 'mount -t tmpfs tmpfs /run && cp -a "$0"/. /run/ && exec "$@"'
    full_env = dict(os.environ if env is None else {**os.environ, **env})
    return run_recorded(["unshare", "-m", "--propagation", "private", "sh", "-c", script, str(staging),
                         HOIST_BIN, *map(str, argv)], env=full_env, capture_output=True, text=True, timeout=60)


# What the kubelet writes (Go's %q) for Plan annotations that SUC copies onto the Job's pod.
ANNOTATIONS = (
    'example.com/note="zwsp\\u200b here"\n'
    'example.com/bell="ding\\a"\n'
    'example.com/emoji="\\U0001f600"\n'
    'example.com/mangled="\\q"\n'
    'kubernetes.io/config.seen="2026-11-24T10:00:00Z"\n'
)


@needs_namespace
def test_a_plan_annotation_with_go_escapes_breaks_no_command(tmp_path, host_root):
    files = {"system-upgrade/pod/annotations": ANNOTATIONS,
             "system-upgrade/pod/labels": 'plan.upgrade.cattle.io/k3s-server="5e6a"\n'}
    version = run_with_run_dir(tmp_path, files, "version")
    assert version.returncode == 0, version
    warnings = [line for line in version.stderr.splitlines() if " warning: " in line]
    assert len(warnings) == 1, version.stderr
    assert "'/run/system-upgrade/pod/annotations' line 4: unknown escape '\\q' " \
           "(skipped: hoist reads no pod label or annotation)" in warnings[0]
    source = make_tree(tmp_path / "payload", {"a": "one\n"}, 1)
    before = tree_manifest(host_root)
    upgrade = run_with_run_dir(tmp_path, files, "upgrade", "--host-root", host_root, "--component", "app",
                               "--kind", "tree", "--source", source, "--destination", "/opt/app",
                               "--version", "1.0.0")
    assert upgrade.returncode == 0, upgrade
    assert os.readlink(host_root / "opt/app/current") == "1.0.0"
    assert tree_manifest(host_root) != before


def job_env():
    return {"SYSTEM_UPGRADE_PLAN_NAME": "k3s-server", "SYSTEM_UPGRADE_NODE_NAME": "node-1",
            "SYSTEM_UPGRADE_PLAN_LATEST_VERSION": "1.0.0"}


@pytest.mark.skipif(Path("/host").exists(), reason="this machine has a /host, the default host root")
def test_a_job_without_the_host_root_refuses_to_upgrade_its_own_container(tmp_path):
    source = make_tree(tmp_path / "payload", {"a": "one\n"}, 1)
    argv = ["upgrade", "--component", "app", "--kind", "tree", "--source", source,
            "--destination", str(tmp_path / "dest"), "--version", "1.0.0"]
    result = run_recorded([HOIST_BIN, *map(str, argv)], env={**os.environ, **job_env()}, capture_output=True,
                          text=True, timeout=60)
    assert result.returncode == 2, result
    assert "this runs in a container (SYSTEM_UPGRADE_PLAN_NAME is set) and /host is not there: mount the host's " \
           "root at /host" in result.stderr
    assert not (tmp_path / "dest").exists()
    status = run_recorded([HOIST_BIN, "status"], env={**os.environ, **job_env()}, capture_output=True, text=True,
                          timeout=60)
    assert status.returncode == 2, status


@needs_namespace
@pytest.mark.skipif(Path("/host").exists(), reason="this machine has a /host, the default host root")
def test_a_container_marker_without_the_host_root_is_refused(tmp_path, host_root):
    status = run_with_run_dir(tmp_path, {".containerenv": ""}, "status")
    assert status.returncode == 2, status
    assert "this runs in a container ('/run/.containerenv' exists) and /host is not there" in status.stderr
    # An explicit --host-root is what the operator asked for.
    explicit = run_with_run_dir(tmp_path, {".containerenv": ""}, "status", "--host-root", host_root)
    assert explicit.returncode == 0, explicit


# ---- --installed-version-from: what the k3s installer already put on the node -------------------------------

def k3s_payload(tmp_path, version):
    payload = tmp_path / f"payload-{version}/k3s"
    payload.parent.mkdir(parents=True, exist_ok=True)
    payload.write_bytes(f"k3s {version}\n".encode())
    return payload


def upgrade_k3s(host_root, tmp_path, version, *extra, check=None):
    return upgrade(host_root, "--component", "k3s", "--kind", "file", "--source", k3s_payload(tmp_path, version),
                   "--destination", "/usr/local/bin/k3s", "--version", version, "--version-scheme", "k3s", *extra,
                   check=check)


PROBE = ("--installed-version-from", "exec:--version")


def test_a_payload_older_than_what_the_k3s_installer_put_there_is_refused(host_root, tmp_path):
    fake_k3s(host_root, tmp_path, "v1.31.2+k3s1")
    before = manifest_without(host_root, "run/hoist")
    result = upgrade_k3s(host_root, tmp_path, "v1.30.1+k3s1", *PROBE, check=3)
    assert "k3s: refusing to downgrade from v1.31.2+k3s1 (what '/usr/local/bin/k3s --version' says) to " \
           "v1.30.1+k3s1 (--allow-downgrade allows it)" in result.stderr
    assert manifest_without(host_root, "run/hoist") == before
    # The same version is nothing to do, and leaves no trace of hoist but the lock.
    result = upgrade_k3s(host_root, tmp_path, "v1.31.2+k3s1", *PROBE, check=0)
    assert "k3s: already at v1.31.2+k3s1 (what '/usr/local/bin/k3s --version' says), nothing to do" in result.stderr
    assert manifest_without(host_root, "run/hoist") == before
    assert not (host_root / "var/lib/hoist/k3s").exists()


def test_a_newer_payload_upgrades_what_the_k3s_installer_put_there(host_root, tmp_path):
    installed = fake_k3s(host_root, tmp_path, "v1.30.0+k3s1").read_bytes()
    result = upgrade_k3s(host_root, tmp_path, "v1.30.1+k3s1", *PROBE, check=0)
    assert "k3s: v1.30.0+k3s1 (what '/usr/local/bin/k3s --version' says) -> v1.30.1+k3s1 (upgrade)" in result.stderr
    assert host_read(host_root, "/usr/local/bin/k3s") == b"k3s v1.30.1+k3s1\n"
    assert (host_root / "var/lib/hoist/k3s/pre-hoist/k3s").read_bytes() == installed


def test_an_install_that_drifted_is_gated_on_what_the_host_runs(host_root, tmp_path):
    fake_k3s(host_root, tmp_path, "v1.30.0+k3s1")
    upgrade_k3s(host_root, tmp_path, "v1.30.1+k3s1", *PROBE, check=0)
    # The k3s installer, run by hand, replaced hoist's link with v1.31.2: the state still says v1.30.1.
    fake_k3s(host_root, tmp_path, "v1.31.2+k3s1")
    before = manifest_without(host_root, "run/hoist", "var/lib/hoist/k3s/state.json")
    result = upgrade_k3s(host_root, tmp_path, "v1.30.2+k3s1", *PROBE, check=3)
    assert "refusing to downgrade from v1.31.2+k3s1 (what '/usr/local/bin/k3s --version' says) to v1.30.2+k3s1" \
        in result.stderr
    assert manifest_without(host_root, "run/hoist", "var/lib/hoist/k3s/state.json") == before
    assert state_of(host_root, "k3s")["current"] == "v1.30.1+k3s1"
    # Without the flag the state alone decides: the older v1.30.2 replaces the newer k3s.
    upgrade_k3s(host_root, tmp_path, "v1.30.2+k3s1", check=0)
    assert host_read(host_root, "/usr/local/bin/k3s") == b"k3s v1.30.2+k3s1\n"


def test_an_upgrade_that_skips_a_kubernetes_minor_is_refused_unless_allowed(host_root, tmp_path):
    fake_k3s(host_root, tmp_path, "v1.29.3+k3s1")
    before = manifest_without(host_root, "run/hoist")
    result = upgrade_k3s(host_root, tmp_path, "v1.31.2+k3s1", *PROBE, check=3)
    assert "k3s: refusing to skip a minor version from v1.29.3+k3s1 (what '/usr/local/bin/k3s --version' says) to " \
           "v1.31.2+k3s1: Kubernetes upgrades one minor version at a time (--allow-minor-skip allows it)" \
        in result.stderr
    assert manifest_without(host_root, "run/hoist") == before
    upgrade_k3s(host_root, tmp_path, "v1.30.6+k3s1", *PROBE, check=0)
    upgrade_k3s(host_root, tmp_path, "v1.32.0+k3s1", check=3)  # from the state too
    upgrade_k3s(host_root, tmp_path, "v1.32.0+k3s1", "--allow-minor-skip", check=0)
    assert host_read(host_root, "/usr/local/bin/k3s") == b"k3s v1.32.0+k3s1\n"


def test_a_version_probe_that_names_no_version_fails_the_run_and_changes_nothing(host_root, tmp_path):
    fake_k3s(host_root, tmp_path, "unknown")
    before = manifest_without(host_root, "run/hoist")
    result = upgrade_k3s(host_root, tmp_path, "v1.30.1+k3s1", *PROBE, check=1)
    assert "k3s: cannot tell the installed version: '/usr/local/bin/k3s --version' printed no k3s version " \
           "('k3s version unknown (6da14b51)\\ngo version go1.22.8\\n')" in result.stderr
    result = upgrade_k3s(host_root, tmp_path, "v1.30.1+k3s1", "--installed-version-from", "exec:--help", check=1)
    assert "'/usr/local/bin/k3s --help' exited with status 2 ('unexpected arguments\\n')" in result.stderr
    assert manifest_without(host_root, "run/hoist") == before
    for bad, why in (("nodes", "expected exec:ARGS"), ("exec:", "exec: needs the arguments")):
        result = upgrade_k3s(host_root, tmp_path, "v1.30.1+k3s1", "--installed-version-from", bad, check=2)
        assert f"invalid installed-version source '{bad}': " in result.stderr and why in result.stderr


# ---- --installed-version-from node: the kubelet the Node reports, read from a fake API server ---------------------

ONLY_GET_NODES = [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]
FROM_NODE = ("--installed-version-from", "node")


@pytest.fixture
def k3s_node(host_root, tmp_path, pki):
    """A cluster whose only RBAC rule is `get nodes` (what the shipped Plans grant), with the Node n1."""
    if not can_fake_service_account():
        pytest.skip("needs root and unshare -m to put a service account at its real path")
    cluster = Cluster(tokens=("token-1",))
    cluster.rbac = ONLY_GET_NODES
    cluster.add_node("n1", kubelet="v1.31.2+k3s1")
    with FakeApiServer(cluster, pki) as server:
        yield cluster, server, make_service_account(tmp_path / "sa", pki["ca"], "token-1")


def upgrade_k3s_in_job(k3s_node, host_root, tmp_path, version, *extra, node="n1"):
    _, server, sa_dir = k3s_node
    return upgrade_in_cluster(sa_dir, server, host_root, "--component", "k3s", "--kind", "file", "--source",
                              k3s_payload(tmp_path, version), "--destination", "/usr/local/bin/k3s", "--version",
                              version, "--version-scheme", "k3s", *extra, node=node)


def node_reads(cluster):
    return [(r["verb"], r["path"], r["status"]) for r in cluster.log_requests(method="GET")]


def test_a_payload_older_than_the_node_s_kubelet_is_refused_with_one_get_of_the_node(k3s_node, host_root, tmp_path):
    cluster = k3s_node[0]
    before = manifest_without(host_root, "run/hoist")
    result = upgrade_k3s_in_job(k3s_node, host_root, tmp_path, "v1.30.1+k3s1", *FROM_NODE)
    assert result.returncode == 3, result.stderr
    assert "k3s: refusing to downgrade from v1.31.2+k3s1 (from the Node n1's kubeletVersion) to v1.30.1+k3s1 " \
           "(--allow-downgrade allows it)" in result.stderr
    assert manifest_without(host_root, "run/hoist") == before
    assert node_reads(cluster) == [("get", "/api/v1/nodes/n1", 200)]
    # The version the Node runs is nothing to do, and leaves no trace of hoist but the lock.
    result = upgrade_k3s_in_job(k3s_node, host_root, tmp_path, "v1.31.2+k3s1", *FROM_NODE)
    assert result.returncode == 0, result.stderr
    assert "k3s: already at v1.31.2+k3s1 (from the Node n1's kubeletVersion), nothing to do" in result.stderr
    assert manifest_without(host_root, "run/hoist") == before
    assert "token-1" not in result.stderr


def test_a_newer_payload_upgrades_from_the_node_s_kubelet_then_the_state_decides(k3s_node, host_root, tmp_path):
    cluster = k3s_node[0]
    cluster.set_kubelet("n1", "v1.30.0+k3s1")
    result = upgrade_k3s_in_job(k3s_node, host_root, tmp_path, "v1.30.1+k3s1", *FROM_NODE)
    assert result.returncode == 0, result.stderr
    assert "k3s: v1.30.0+k3s1 (from the Node n1's kubeletVersion) -> v1.30.1+k3s1 (upgrade)" in result.stderr
    assert host_read(host_root, "/usr/local/bin/k3s") == b"k3s v1.30.1+k3s1\n"
    assert state_of(host_root, "k3s")["current"] == "v1.30.1+k3s1"
    # hoist's own state now says what is installed: the Node is not asked again.
    result = upgrade_k3s_in_job(k3s_node, host_root, tmp_path, "v1.30.2+k3s1", *FROM_NODE)
    assert result.returncode == 0, result.stderr
    assert "k3s: v1.30.1+k3s1 -> v1.30.2+k3s1 (upgrade)" in result.stderr
    assert node_reads(cluster) == [("get", "/api/v1/nodes/n1", 200)]


def test_an_install_that_drifted_is_gated_on_the_node_s_kubelet(k3s_node, host_root, tmp_path):
    cluster = k3s_node[0]
    cluster.set_kubelet("n1", "v1.30.0+k3s1")
    assert upgrade_k3s_in_job(k3s_node, host_root, tmp_path, "v1.30.1+k3s1", *FROM_NODE).returncode == 0
    # The k3s installer, run by hand, replaced hoist's link with v1.31.2, and the kubelet runs it.
    (host_root / "usr/local/bin/k3s").unlink()
    (host_root / "usr/local/bin/k3s").write_bytes(b"k3s v1.31.2+k3s1 by the installer\n")
    cluster.set_kubelet("n1", "v1.31.2+k3s1")
    before = manifest_without(host_root, "run/hoist", "var/lib/hoist/k3s/state.json")
    result = upgrade_k3s_in_job(k3s_node, host_root, tmp_path, "v1.30.2+k3s1", *FROM_NODE)
    assert result.returncode == 3, result.stderr
    assert "refusing to downgrade from v1.31.2+k3s1 (from the Node n1's kubeletVersion) to v1.30.2+k3s1" \
        in result.stderr
    assert manifest_without(host_root, "run/hoist", "var/lib/hoist/k3s/state.json") == before


def test_a_minor_skip_from_the_node_s_kubelet_is_refused_unless_allowed(k3s_node, host_root, tmp_path):
    cluster = k3s_node[0]
    cluster.set_kubelet("n1", "v1.29.3+k3s1")
    before = manifest_without(host_root, "run/hoist")
    result = upgrade_k3s_in_job(k3s_node, host_root, tmp_path, "v1.31.2+k3s1", *FROM_NODE)
    assert result.returncode == 3, result.stderr
    assert "k3s: refusing to skip a minor version from v1.29.3+k3s1 (from the Node n1's kubeletVersion) to " \
           "v1.31.2+k3s1: Kubernetes upgrades one minor version at a time (--allow-minor-skip allows it)" \
        in result.stderr
    assert manifest_without(host_root, "run/hoist") == before
    result = upgrade_k3s_in_job(k3s_node, host_root, tmp_path, "v1.31.2+k3s1", *FROM_NODE, "--allow-minor-skip")
    assert result.returncode == 0, result.stderr
    assert host_read(host_root, "/usr/local/bin/k3s") == b"k3s v1.31.2+k3s1\n"


@pytest.mark.parametrize("node, rbac, why", [
    ("n2", ONLY_GET_NODES, "404 Not Found: nodes \"n2\" not found"),
    ("n1", [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch"]}],
     "403 Forbidden (RBAC must allow verb 'get' on resource 'nodes' in the core API group cluster-wide)"),
])
def test_a_node_that_cannot_be_read_fails_the_run_naming_it_and_changes_nothing(k3s_node, host_root, tmp_path,
                                                                                node, rbac, why):
    k3s_node[0].rbac = rbac
    before = manifest_without(host_root, "run/hoist")
    result = upgrade_k3s_in_job(k3s_node, host_root, tmp_path, "v1.31.2+k3s1", *FROM_NODE, node=node)
    assert result.returncode == 1, result.stderr
    assert f"k3s: cannot tell the installed version (--installed-version-from node): the Node {node}'s " \
           "kubeletVersion: failed to get nodes on '" in result.stderr, result.stderr
    assert why in result.stderr
    assert manifest_without(host_root, "run/hoist") == before


def test_a_node_kubelet_version_outside_the_scheme_fails_the_run(k3s_node, host_root, tmp_path):
    k3s_node[0].set_kubelet("n1", "v1.31")
    before = manifest_without(host_root, "run/hoist")
    result = upgrade_k3s_in_job(k3s_node, host_root, tmp_path, "v1.31.2+k3s1", *FROM_NODE)
    assert result.returncode == 1, result.stderr
    assert "k3s: cannot tell the installed version (--installed-version-from node): the Node n1's kubeletVersion " \
           "is 'v1.31', not a k3s version" in result.stderr
    assert manifest_without(host_root, "run/hoist") == before


def test_the_node_as_a_source_outside_a_job_is_refused_before_anything_changes(host_root, tmp_path):
    before = tree_manifest(host_root)
    result = upgrade_k3s(host_root, tmp_path, "v1.31.2+k3s1", *FROM_NODE, check=2)
    assert "--installed-version-from node needs SYSTEM_UPGRADE_NODE_NAME (set in every SUC Job) to know its Node" \
        in result.stderr
    result = upgrade(host_root, "--component", "k3s", "--kind", "file", "--source",
                     k3s_payload(tmp_path, "v1.31.2+k3s1"), "--destination", "/usr/local/bin/k3s", "--version",
                     "v1.31.2+k3s1", "--version-scheme", "k3s", *FROM_NODE, env={"SYSTEM_UPGRADE_NODE_NAME": "n1"},
                     check=2)
    assert "--installed-version-from node needs the Kubernetes API as a pod sees it, and KUBERNETES_SERVICE_HOST, " \
           "KUBERNETES_SERVICE_PORT" in result.stderr
    release = tmp_path / "release"
    release.mkdir()
    (release / "k3s").write_bytes(b"k3s v1.31.2+k3s1\n")
    (release / "manifest.json").write_text(json.dumps({"schema": 1, "version": "v1.31.2+k3s1", "components": [
        {"name": "k3s", "kind": "file", "source": "k3s", "destination": "/usr/local/bin/k3s",
         "version_scheme": "k3s", "installed_version_from": "node"}]}))
    result = upgrade(host_root, "--manifest", release / "manifest.json", check=2)
    assert f"manifest '{release / 'manifest.json'}': $.components[0].installed_version_from 'node' needs " \
           "SYSTEM_UPGRADE_NODE_NAME" in result.stderr
    assert tree_manifest(host_root) == before
