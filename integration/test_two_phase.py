"""Two-phase upgrades through the static binary: `hoist stage` decides, verifies and stages before the drain (a
Plan's prepare step), `hoist upgrade` then only switches. What stage refuses, it refuses as the upgrade would,
before anything is staged; what it stages is host state that status, the dry run, the retention and the next
stage all see. test_image.py runs the shipped Plans' prepare and upgrade containers as SUC's Job shape runs them, and
test_real_cluster.py as real Jobs."""

import json
import os
import subprocess
from pathlib import Path

import pytest

pytest.register_assert_rewrite("prepare_harness")  # before its import: it is also a plugin

from conftest import SANITIZER_ENV, parse_termination, run_hoist, run_status, termination
from prepare_harness import HOIST_BIN, SERVER_PLAN, Prepare, put_server_plan, suc, wait_for_watches
from payloads import fake_k3s, host_read, make_tree, manifest_without, read_tree, state_of, upgrade, \
    write_sha256sums, sums_for_tree

pytest_plugins = ["prepare_harness"]  # the fixtures: pki, cluster, server, kubeconfig


def stage(host_root, *args, env=None, check=None, timeout=120):
    return run_hoist("stage", "--host-root", host_root, "--lock-timeout", "5", *args, env=env, check=check,
                     timeout=timeout)


def status(host_root, *args):
    return run_status(host_root, *args)


def app_args(source, version, *extra):
    return ["--component", "app", "--kind", "tree", "--destination", "/opt/app", "--source", source, "--version",
            version, *extra]


@pytest.fixture
def trees(tmp_path):
    v1 = make_tree(tmp_path / "v1", {"bin/app": "app one\n", "etc/conf": "same\n"}, 1)
    v2 = make_tree(tmp_path / "v2", {"bin/app": "app two\n", "etc/conf": "same\n", "lib/new": "new\n"}, 2)
    v3 = make_tree(tmp_path / "v3", {"bin/app": "app three\n", "etc/conf": "same\n"}, 3)
    return v1, v2, v3


def test_stage_then_upgrade_switches_to_what_was_staged_and_stages_nothing_again(host_root, trees, tmp_path):
    v1, v2, _ = trees
    upgrade(host_root, *app_args(v1, "1.0.0"), check=0)
    staged = stage(host_root, *app_args(v2, "2.0.0"), check=0)
    assert "gate: app: 1.0.0 -> 2.0.0 (upgrade)" in staged.stderr
    assert "app: staged 2.0.0 beside 1.0.0 in " in staged.stderr
    assert "not switched to" in staged.stderr
    app = host_root / "opt/app"
    assert os.readlink(app / "current") == "1.0.0"
    assert read_tree(app / "2.0.0") == read_tree(v2)
    state = state_of(host_root, "app")
    assert state["current"] == "1.0.0" and [v["version"] for v in state["versions"]] == ["1.0.0"]
    assert state["staged"]["version"] == "2.0.0"
    assert (state["last_result"]["command"], state["last_result"]["outcome"]) == ("stage", "succeeded")
    inode = os.stat(app / "2.0.0/bin/app").st_ino

    switched = upgrade(host_root, *app_args(v2, "2.0.0"), check=0)
    assert "app: switching to 2.0.0 as `hoist stage` staged it at " in switched.stderr
    assert "app: switched " in switched.stderr
    assert os.readlink(app / "current") == "2.0.0"
    assert os.stat(app / "2.0.0/bin/app").st_ino == inode  # taken as it was staged, not written again
    state = state_of(host_root, "app")
    assert state["staged"] is None
    assert (state["current"], state["previous"]) == ("2.0.0", "1.0.0")


def test_status_and_the_dry_run_show_a_staged_version_never_counted_as_installed(host_root, trees):
    v1, v2, _ = trees
    upgrade(host_root, *app_args(v1, "1.0.0"), check=0)
    stage(host_root, *app_args(v2, "2.0.0"), env={"SYSTEM_UPGRADE_PLAN_NAME": "os",
                                                  "SYSTEM_UPGRADE_PLAN_LATEST_HASH": "f00d",
                                                  "SYSTEM_UPGRADE_PLAN_LATEST_VERSION": "2.0.0"}, check=0)
    started = state_of(host_root, "app")["staged"]["started_at"]
    text = status(host_root).stdout
    assert "  current:  1.0.0\n" in text
    assert "  kept:     1.0.0, installed " in text
    assert f"  staged:   2.0.0 at {started} for plan os, not switched to\n" in text
    component = json.loads(status(host_root, "--json").stdout)["components"][0]
    assert component["current"] == "1.0.0"
    assert [v["version"] for v in component["versions"]] == ["1.0.0"]
    assert component["staged"] == {"version": "2.0.0", "started_at": started, "plan": "os", "plan_hash": "f00d",
                                   "complete": True}
    dry = upgrade(host_root, *app_args(v2, "2.0.0"), "--dry-run", check=0)
    assert f"  staged:    2.0.0 at {started} (hoist stage): the switch takes it as it is, nothing to stage\n" \
        in dry.stdout
    # The staged tree went away under hoist's feet: status says its staging did not complete.
    os.rename(host_root / "opt/app/2.0.0", host_root / "opt/app/moved")
    assert f"  staged:   2.0.0 at {started} for plan os, not switched to (its staging did not complete)\n" \
        in status(host_root).stdout
    assert json.loads(status(host_root, "--json").stdout)["components"][0]["staged"]["complete"] is False


def test_stage_refuses_what_the_upgrade_refuses_before_it_stages(host_root, trees, tmp_path):
    v1, v2, _ = trees
    upgrade(host_root, *app_args(v2, "2.0.0"), check=0)
    before = manifest_without(host_root, "var/lib/hoist/app/state.json", "run/hoist")
    message = tmp_path / "termination-log"
    message.write_text("")
    env = {"HOIST_TERMINATION_MESSAGE_PATH": str(message)}
    # A downgrade.
    refused = stage(host_root, *app_args(v1, "1.0.0"), env=env, check=3)
    refusal = "app: refusing to downgrade from 2.0.0 to 1.0.0 (--allow-downgrade allows it)"
    assert refusal in refused.stderr
    assert parse_termination(message.read_text()) == termination("stage", 3, refusal)
    result = state_of(host_root, "app")["last_result"]
    assert (result["command"], result["outcome"], result["message"]) == ("stage", "refused", refusal)
    # A payload that does not match its SHA256SUMS.
    sums = tmp_path / "SHA256SUMS"
    sums.write_text("0" * 64 + "  bin/app\n")
    bad = stage(host_root, *app_args(trees[2], "3.0.0", "--sha256sums", sums), check=5)
    assert "checksum mismatch for 'bin/app'" in bad.stderr or "is not listed in" in bad.stderr
    # Versions that disagree (the Plan's and the command line's).
    disagree = stage(host_root, *app_args(trees[2], "3.0.0"), env={"SYSTEM_UPGRADE_PLAN_LATEST_VERSION": "3.0.1"},
                     check=2)
    assert "versions disagree for component 'app'" in disagree.stderr
    # A minor version skipped under the k3s scheme is the gate's too; a quarantined version: below.
    assert manifest_without(host_root, "var/lib/hoist/app/state.json", "run/hoist") == before
    assert state_of(host_root, "app")["staged"] is None


def test_stage_refuses_a_quarantined_version_and_a_destination_the_switch_could_not_take(host_root, trees):
    v1, v2, v3 = trees
    upgrade(host_root, *app_args(v1, "1.0.0"), check=0)
    upgrade(host_root, *app_args(v2, "2.0.0"), check=0)
    run_hoist("rollback", "--host-root", host_root, "--component", "app", check=0)
    refused = stage(host_root, *app_args(v2, "2.0.0"), check=3)
    assert "app: refusing 2.0.0: it is quarantined since" in refused.stderr
    assert not (host_root / "opt/app/.2.0.0.partial").exists()
    # `previous` is a directory someone made: the switch would have to replace it.
    os.unlink(host_root / "opt/app/previous")
    (host_root / "opt/app/previous").mkdir()
    blocked = stage(host_root, *app_args(v3, "3.0.0"), check=1)
    assert f"'{host_root}/opt/app/previous' is not a symlink; hoist manages it as one" in blocked.stderr
    assert sorted(os.listdir(host_root / "opt/app")) == ["1.0.0", "2.0.0", "current", "previous"]
    assert state_of(host_root, "app")["staged"] is None


def test_stage_refuses_when_the_staging_would_not_fit(host_root, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs as the destination's filesystem needs root")
    big = tmp_path / "big"
    big.mkdir()
    (big / "blob").write_bytes(os.urandom(1 << 20) * 40)  # 40 MiB: with 64 MiB to spare, more than 80 MiB free
    (host_root / "opt").mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=80m", "tmpfs", str(host_root / "opt")], check=True)
    try:
        refused = stage(host_root, *app_args(big, "1.0.0"), check=1)
        assert f"app: not enough free space to stage 1.0.0 in {host_root}/opt: it needs 104.0 MiB (40.0 MiB and " \
               "64 MiB to spare), " in refused.stderr
        assert refused.stderr.rstrip().endswith("are free; nothing was changed")
        assert os.listdir(host_root / "opt") == []
    finally:
        subprocess.run(["umount", str(host_root / "opt")], check=True)


def test_a_file_component_staged_with_its_sums_is_switched_without_reading_the_payload(host_root, tmp_path):
    # The k3s Plans' case: the staged copy's content index and the verified sums say all; the payload file, here
    # changed after the stage (read, it would fail its sums), is not read again.
    old = fake_k3s(host_root, tmp_path, "v1.30.1+k3s1").read_bytes()
    payload = tmp_path / "payload/k3s"
    payload.parent.mkdir()
    payload.write_bytes(b"k3s v1.30.2+k3s1 " * 4096)
    sums = write_sha256sums(tmp_path / "payload/SHA256SUMS", {"k3s": payload})
    args = ["--component", "k3s", "--kind", "file", "--version-scheme", "k3s", "--destination", "/usr/local/bin/k3s",
            "--source", payload, "--sha256sums", sums, "--version", "v1.30.2+k3s1",
            "--installed-version-from", "exec:--version"]
    staged = stage(host_root, *args, check=0)
    assert "gate: k3s: v1.30.1+k3s1 (what '/usr/local/bin/k3s --version' says) -> v1.30.2+k3s1 (upgrade)" \
        in staged.stderr
    assert host_read(host_root, "/usr/local/bin/k3s") == old  # the installer's file, untouched
    index = host_root / "var/lib/hoist/k3s/.index/v1.30.2+k3s1"
    assert index.is_file()
    stamp = os.stat(payload)
    payload.write_bytes(b"k3s v1.30.9+k3s1 " * 4096)
    os.utime(payload, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    switched = upgrade(host_root, *args, check=0)
    assert "k3s: switching to v1.30.2+k3s1 as `hoist stage` staged it at " in switched.stderr
    assert "checked against its verified sums through its content index" in switched.stderr
    assert f"k3s: verified {payload}" not in switched.stderr  # the payload file is not read
    assert host_read(host_root, "/usr/local/bin/k3s") == b"k3s v1.30.2+k3s1 " * 4096
    assert os.readlink(host_root / "usr/local/bin/k3s") == "/var/lib/hoist/k3s/v1.30.2+k3s1/k3s"
    # The installer's file is kept, as by an upgrade that staged itself.
    assert host_read(host_root, "/var/lib/hoist/k3s/pre-hoist/k3s") == old


def test_a_file_staged_copy_changed_on_the_host_is_staged_again_and_verified(host_root, tmp_path):
    payload = tmp_path / "payload/tool"
    payload.parent.mkdir()
    payload.write_bytes(b"tool two\n" * 100)
    sums = write_sha256sums(tmp_path / "payload/SHA256SUMS", {"tool": payload})
    args = ["--component", "tool", "--kind", "file", "--destination", "/usr/local/bin/tool", "--source", payload,
            "--sha256sums", sums, "--version", "2.0.0"]
    stage(host_root, *args, check=0)
    copy = host_root / "var/lib/hoist/tool/2.0.0/tool"
    copy.write_bytes(b"tool tw0\n" * 100)
    switched = upgrade(host_root, *args, check=0)
    assert "tool: the 2.0.0 that `hoist stage` staged at " in switched.stderr
    assert "does not hold the payload: staging it again" in switched.stderr
    assert f"tool: verified {payload} against {sums}" in switched.stderr
    assert host_read(host_root, "/usr/local/bin/tool") == b"tool two\n" * 100


def test_a_sync_is_decided_and_verified_by_stage_and_written_only_by_the_upgrade(host_root, trees, tmp_path):
    v1, v2, _ = trees
    args = ["--component", "conf", "--kind", "sync", "--destination", "/etc/app"]
    upgrade(host_root, *args, "--source", v1, "--version", "1.0.0", check=0)
    before = manifest_without(host_root, "run/hoist")
    sums = sums_for_tree(v2, tmp_path / "v2.SHA256SUMS")
    staged = stage(host_root, *args, "--source", v2, "--version", "2.0.0", "--sha256sums", sums, check=0)
    assert "conf: nothing to stage: a sync writes " in staged.stderr
    assert "which is its switch; 2.0.0 is decided and verified, and the upgrade syncs it" in staged.stderr
    # Nothing on the host changed, not even the state.
    assert manifest_without(host_root, "run/hoist") == before
    upgrade(host_root, *args, "--source", v2, "--version", "2.0.0", "--sha256sums", sums, check=0)
    assert read_tree(host_root / "etc/app") == read_tree(v2)


def test_staging_again_replaces_the_version_staged_for_another_target(host_root, trees):
    v1, v2, v3 = trees
    upgrade(host_root, *app_args(v1, "1.0.0"), check=0)
    stage(host_root, *app_args(v2, "2.0.0"), check=0)
    replaced = stage(host_root, *app_args(v3, "3.0.0"), check=0)
    assert "app: removed 2.0.0, which `hoist stage` staged at " in replaced.stderr
    assert sorted(os.listdir(host_root / "opt/app")) == ["1.0.0", "3.0.0", "current"]
    assert not (host_root / "var/lib/hoist/app/.index/2.0.0").exists()
    # A stage run again for the same target reuses what it staged.
    again = stage(host_root, *app_args(v3, "3.0.0"), check=0)
    assert "app: reusing the complete " in again.stderr
    assert state_of(host_root, "app")["staged"]["version"] == "3.0.0"


def test_stage_waits_for_the_server_plan_first_then_stages_in_the_same_run(host_root, trees, cluster, kubeconfig):
    # An agent Plan's one prepare container: the wait of `hoist prepare k3s-server`, then the gate and the staging.
    v1, v2, _ = trees
    upgrade(host_root, *app_args(v1, "1.0.0"), check=0)
    put_server_plan(cluster)
    argv = [HOIST_BIN, "stage", "--host-root", host_root, "--lock-timeout", "5", *app_args(v2, "2.0.0"),
            "--wait-for-plan", SERVER_PLAN, "--wait-timeout", "30", "--kubeconfig", kubeconfig]
    staging = Prepare(list(map(str, argv)), {"PATH": "/usr/bin:/bin", **SANITIZER_ENV})
    wait_for_watches(cluster, resource="nodes")
    assert staging.running(), staging.stderr
    assert not (host_root / "opt/app/2.0.0").exists()  # nothing staged while the servers are not done
    emulator = suc(cluster, job_seconds=0.2).start()
    assert staging.wait() == 0, staging.stderr
    emulator.join()
    assert staging.exited_at >= max(emulator.labeled_at.values())
    assert "plan 'k3s-server' is complete" in staging.stderr
    assert staging.stderr.index("plan 'k3s-server' is complete") < staging.stderr.index("gate: app: 1.0.0 -> 2.0.0")
    assert "app: staged 2.0.0 beside 1.0.0 in " in staging.stderr
    assert read_tree(host_root / "opt/app/2.0.0") == read_tree(v2)
    assert os.readlink(host_root / "opt/app/current") == "1.0.0"
    assert state_of(host_root, "app")["staged"]["version"] == "2.0.0"


def test_stage_does_not_stage_when_the_plan_it_waits_for_never_completes(host_root, trees, cluster, kubeconfig):
    v1, v2, _ = trees
    upgrade(host_root, *app_args(v1, "1.0.0"), check=0)
    put_server_plan(cluster)
    waited = stage(host_root, *app_args(v2, "2.0.0"), "--wait-for-plan", SERVER_PLAN, "--wait-timeout", "1",
                   "--kubeconfig", kubeconfig, check=1)
    assert "timed out after 1 s waiting for plan 'k3s-server'" in waited.stderr
    assert "gate: " not in waited.stderr
    assert sorted(os.listdir(host_root / "opt/app")) == ["1.0.0", "current"]
    assert state_of(host_root, "app")["staged"] is None
