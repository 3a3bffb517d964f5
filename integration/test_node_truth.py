"""What a real node and SUC's kubelet put around hoist: the pod's downward-API
files as the kubelet writes them, and a container that forgot the host's root."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import HOIST_BIN, run_recorded, tree_manifest
from payloads import make_tree

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
