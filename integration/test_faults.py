"""Faults around a run: many hoist processes at once on one host, what an
earlier crash left behind (stale partials, a stale pending reboot), a state file
that is corrupt or from a newer hoist, and EIO from the disk (device-mapper's
`error` target, where the kernel has device-mapper). Each ends in a clear exit
code and a host that is whole: one complete version current, or untouched."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import HOIST_BIN, SANITIZER_ENV, record_output, run_hoist
from payloads import make_tree, manifest_without, read_tree, state_of, upgrade

V1 = {"bin/app": "v1\n", "etc/app.conf": "a=1\n", "lib/common.so": "common\n"}
V2 = {"bin/app": "v2 is longer\n", "etc/app.conf": "a=2\n", "lib/common.so": "common\n", "lib/new.so": "new\n"}
V3 = {"bin/app": "v3\n", "lib/common.so": "common\n"}


def tree_args(source, version, *extra):
    return ["--component", "app", "--kind", "tree", "--source", source, "--destination", "/opt/app",
            "--version", version, *extra]


@pytest.fixture
def trees(tmp_path):
    return (make_tree(tmp_path / "v1", V1, 1), make_tree(tmp_path / "v2", V2, 2), make_tree(tmp_path / "v3", V3, 3))


def leftovers(directory):
    return sorted(p.name for p in Path(directory).iterdir() if p.name.startswith("."))


def assert_whole(host_root, expected):
    """`current` names a complete version whose tree is `expected[version]`; nothing half-made is left."""
    app = host_root / "opt/app"
    current = os.readlink(app / "current")
    assert current in expected, current
    assert read_tree(app / current) == read_tree(expected[current])
    assert leftovers(app) == []
    state = state_of(host_root, "app")
    assert state["current"] == current
    return current


def spawn_all(host_root, argvs):
    procs = [subprocess.Popen([HOIST_BIN, "upgrade", "--host-root", str(host_root), *map(str, argv)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", **SANITIZER_ENV}) for argv in argvs]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=180)
        record_output(proc.args, out, err)
        results.append((proc.returncode, err))
    return results


# --- concurrent runs ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("count", [2, 5, 10])
def test_concurrent_runs_of_one_upgrade_serialize_on_the_lock(host_root, trees, count):
    v1, v2, _ = trees
    upgrade(host_root, *tree_args(v1, "1.0.0"), check=0)
    results = spawn_all(host_root, [["--lock-timeout", "120", *tree_args(v2, "2.0.0")]] * count)
    assert [code for code, _ in results] == [0] * count, results
    switched = [err for _, err in results if "switched" in err]
    assert len(switched) == 1, results
    assert assert_whole(host_root, {"2.0.0": v2}) == "2.0.0"
    assert state_of(host_root, "app")["previous"] == "1.0.0"


@pytest.mark.parametrize("count", [2, 10])
def test_concurrent_runs_that_cannot_wait_exit_4_or_finish_the_job(host_root, trees, count):
    v1, v2, _ = trees
    upgrade(host_root, *tree_args(v1, "1.0.0"), check=0)
    results = spawn_all(host_root, [["--lock-timeout", "0", *tree_args(v2, "2.0.0")]] * count)
    codes = [code for code, _ in results]
    assert set(codes) <= {0, 4} and 0 in codes, results
    for code, err in results:
        if code == 4:
            assert "hoist.lock" in err, err
    assert assert_whole(host_root, {"2.0.0": v2}) == "2.0.0"


def test_concurrent_runs_for_two_targets_end_on_the_newer_one(host_root, trees):
    v1, v2, v3 = trees
    upgrade(host_root, *tree_args(v1, "1.0.0"), check=0)
    argvs = [["--lock-timeout", "120", *tree_args(v2 if i % 2 else v3, "2.0.0" if i % 2 else "3.0.0")]
             for i in range(8)]
    results = spawn_all(host_root, argvs)
    for (code, err), argv in zip(results, argvs):
        if "3.0.0" in argv:
            assert code == 0, err
        else:
            # Before any 3.0.0 run: installed; after one: a downgrade, refused.
            assert code in (0, 3), err
    assert assert_whole(host_root, {"2.0.0": v2, "3.0.0": v3}) == "3.0.0"


# --- what a crash left behind ---------------------------------------------------------------------------------


def test_a_stale_partial_of_the_target_is_replaced(host_root, trees):
    v1, v2, _ = trees
    upgrade(host_root, *tree_args(v1, "1.0.0"), check=0)
    partial = host_root / "opt/app/.2.0.0.partial"
    (partial / "bin").mkdir(parents=True)
    (partial / "bin/app").write_text("half-written junk")
    (partial / "junk-only-here").write_text("x")
    (partial / "locked").mkdir()
    os.chmod(partial / "locked", 0)
    upgrade(host_root, *tree_args(v2, "2.0.0"), check=0)
    assert assert_whole(host_root, {"2.0.0": v2}) == "2.0.0"


def test_a_stale_partial_of_another_version_does_not_get_in_the_way(host_root, trees):
    v1, v2, v3 = trees
    upgrade(host_root, *tree_args(v1, "1.0.0"), check=0)
    stale = host_root / "opt/app/.3.0.0.partial"
    stale.mkdir()
    (stale / "half").write_text("x")
    upgrade(host_root, *tree_args(v2, "2.0.0"), check=0)
    app = host_root / "opt/app"
    assert os.readlink(app / "current") == "2.0.0"
    assert read_tree(app / "2.0.0") == read_tree(v2)
    # The next upgrade to that version replaces it.
    upgrade(host_root, *tree_args(v3, "3.0.0"), check=0)
    assert assert_whole(host_root, {"3.0.0": v3}) == "3.0.0"


def forge_stale_pending_reboot(host_root, target):
    """Writes into app's state the reboot record of a run that died before a boot (another boot id)."""
    state_file = host_root / "var/lib/hoist/app/state.json"
    state = json.loads(state_file.read_text())
    state["pending_reboot"] = {"target": target, "boot_id": "00000000-0000-4000-8000-000000000000",
                               "requested_at": "2020-01-01T00:00:00Z"}
    state_file.write_text(json.dumps(state))


def test_a_stale_pending_reboot_from_before_a_boot_is_settled(host_root, trees):
    v1, v2, _ = trees
    upgrade(host_root, *tree_args(v1, "1.0.0"), check=0)
    upgrade(host_root, *tree_args(v2, "2.0.0"), check=0)
    # An earlier run asked for a reboot into 2.0.0 and died; the host has booted since (another boot id).
    forge_stale_pending_reboot(host_root, "2.0.0")
    result = upgrade(host_root, *tree_args(v2, "2.0.0"), check=0)
    assert "rebooted into" in result.stderr, result
    assert state_of(host_root, "app")["pending_reboot"] is None
    assert assert_whole(host_root, {"2.0.0": v2}) == "2.0.0"


def test_a_stale_pending_reboot_into_a_version_that_is_not_current_fails_once(host_root, trees):
    v1, v2, v3 = trees
    upgrade(host_root, *tree_args(v1, "1.0.0"), check=0)
    forge_stale_pending_reboot(host_root, "2.0.0")
    before = manifest_without(host_root, "run/hoist", "var/lib/hoist/app/state.json")
    result = upgrade(host_root, *tree_args(v2, "2.0.0"), check=1)
    assert "came back on the old version" in result.stderr, result
    assert manifest_without(host_root, "run/hoist", "var/lib/hoist/app/state.json") == before
    # A run for another target drops the stale record and installs.
    upgrade(host_root, *tree_args(v3, "3.0.0"), check=0)
    assert assert_whole(host_root, {"3.0.0": v3}) == "3.0.0"
    assert state_of(host_root, "app")["pending_reboot"] is None


# --- a state file that cannot be trusted -----------------------------------------------------------------------

CORRUPT = {
    "empty": b"",
    "garbage": bytes(range(256)) * 4,
    "truncated": None,  # the real state, cut in half
    "not-an-object": b"[1, 2, 3]\n",
    "schema-string": None,
    "schema-zero": None,
    "missing-current": None,
    "versions-not-array": None,
    "nul-bytes": b"{\"schema\": 1\x00\x00}",
    "deep-nesting": b"[" * 100000 + b"]" * 100000,
    "number-overflow": b'{"schema": 1e400}',  # found by fuzz/manifest.cpp in the manifest's parser
}


def corrupt(state_file, kind):
    text = state_file.read_text()
    state = json.loads(text)
    if kind == "truncated":
        return text[: len(text) // 2].encode()
    if kind == "schema-string":
        state["schema"] = "1"
    elif kind == "schema-zero":
        state["schema"] = 0
    elif kind == "missing-current":
        del state["current"]
    elif kind == "versions-not-array":
        state["versions"] = {"1.0.0": True}
    else:
        return CORRUPT[kind]
    return json.dumps(state).encode()


@pytest.mark.parametrize("kind", list(CORRUPT))
def test_a_corrupt_state_file_fails_clearly_and_touches_nothing(host_root, trees, kind):
    v1, v2, _ = trees
    upgrade(host_root, *tree_args(v1, "1.0.0"), check=0)
    state_file = host_root / "var/lib/hoist/app/state.json"
    state_file.write_bytes(corrupt(state_file, kind))
    before = manifest_without(host_root, "run/hoist")
    result = upgrade(host_root, *tree_args(v2, "2.0.0"))
    assert result.returncode == 1, result
    assert f"corrupt state file '{state_file}'" in result.stderr, result
    assert manifest_without(host_root, "run/hoist") == before
    for argv in (["rollback", "--host-root", host_root, "--lock-timeout", "5", "--component", "app"],
                 ["status", "--host-root", host_root], ["status", "--host-root", host_root, "--json"]):
        other = run_hoist(*argv)
        assert other.returncode == 1 and "corrupt state file" in other.stderr, other
        assert manifest_without(host_root, "run/hoist") == before


@pytest.mark.parametrize("schema", [2, 99, 2**40])
def test_a_state_file_from_a_newer_hoist_is_left_alone(host_root, trees, schema):
    v1, v2, _ = trees
    upgrade(host_root, *tree_args(v1, "1.0.0"), check=0)
    state_file = host_root / "var/lib/hoist/app/state.json"
    state = json.loads(state_file.read_text())
    state["schema"] = schema
    state["a_field_from_the_future"] = {"x": 1}
    state_file.write_text(json.dumps(state))
    before = manifest_without(host_root, "run/hoist")
    result = upgrade(host_root, *tree_args(v2, "2.0.0"))
    assert result.returncode == 1, result
    assert "was written by a newer hoist" in result.stderr and "refusing to touch it" in result.stderr, result
    assert manifest_without(host_root, "run/hoist") == before
    other = run_hoist("rollback", "--host-root", host_root, "--lock-timeout", "5", "--component", "app")
    assert other.returncode == 1 and "newer hoist" in other.stderr, other
    assert manifest_without(host_root, "run/hoist") == before


# --- EIO from the device ---------------------------------------------------------------------------------------


def test_eio_from_the_disk_fails_the_run_on_the_old_version(host_root, trees, tmp_path):
    dmsetup = shutil.which("dmsetup")
    if dmsetup is None:
        pytest.skip("dmsetup is not installed")
    probe = subprocess.run([dmsetup, "targets"], capture_output=True, text=True)
    if probe.returncode != 0 or "error" not in probe.stdout:
        reason = (probe.stderr or probe.stdout).strip().splitlines()
        pytest.skip("device-mapper is not usable here: " + (reason[0] if reason else f"exit {probe.returncode}"))
    pytest.skip("device-mapper works here, but the EIO scenario is not written yet")  # pragma: no cover
