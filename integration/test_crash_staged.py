"""Crash consistency of the two-phase upgrade, by test_crash.py's method: strace lists every rename a run makes
(its commit points: the staged record's state save, the content index, the staging's rename, the last result's
save; then the switch-only upgrade's intent, link and record), and a SIGKILL lands at each, one run per point.

After a kill of `hoist stage`: the host still runs what it ran (status names the host's current version), a
staged version is either complete with its index or shown as incomplete, a re-run of the stage converges (staged,
complete, nothing left behind) and the upgrade then switches to it. After a kill of the upgrade that switches to
a staged version: test_crash.py's three properties (status names what the host names, rollback goes exactly one
version back, a re-run converges) and no staged record left once it converges."""

import os
import signal
import shutil

import pytest

from conftest import HOIST_BIN, run_recorded
from dbus_harness import system_bus  # noqa: F401 (a fixture: the sysext kind's refresh goes to its systemd double)
from payloads import state_of
from test_crash import (RENAMES, check_three_properties, installed_and_copied, kill_command, make_kind,
                        restore, snapshot, status_of, traced_calls)

pytestmark = pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")

STAGED_KINDS = ["tree", "file", "sysext"]


def stage_argv(kind, host_root, version="3.0.0"):
    return [HOIST_BIN, "stage", "--host-root", host_root, "--lock-timeout", "5", *kind.args(version)]


def upgrade_argv(kind, host_root, version="3.0.0"):
    return [HOIST_BIN, "upgrade", "--host-root", host_root, "--lock-timeout", "5", *kind.args(version)]


def run(argv):
    return run_recorded(list(map(str, argv)), capture_output=True, text=True, timeout=60)


def staged_on_host(kind, host_root):
    """Whether the host holds 3.0.0 complete among the versions (its final name, which only a rename makes)."""
    return "3.0.0" in kind.on_disk(host_root)


@pytest.mark.parametrize("kind_name", STAGED_KINDS)
def test_sigkill_at_each_commit_point_of_a_stage_leaves_the_host_on_its_version_and_a_rerun_converges(
        host_root, tmp_path, request, kind_name):
    kind = make_kind(kind_name, tmp_path, request)
    pristine = installed_and_copied(host_root, kind, tmp_path)
    points = traced_calls(stage_argv(kind, host_root), RENAMES, tmp_path)
    # The record, the index (not sysext's), the staging, the last result: every one of them a commit point.
    assert len(points) >= 3, points
    for name, occurrence, line in points:
        restore(host_root, pristine)
        killed = kill_command(stage_argv(kind, host_root), name, occurrence)
        where = f"{kind_name} stage killed at {name} #{occurrence} ({line[:160]})"
        assert killed.returncode == -signal.SIGKILL, f"{where}: rc={killed.returncode} {killed.stderr[-300:]}"
        # The host runs what it ran, and status says so; a staged record is complete exactly when the host holds
        # the version under its final name.
        assert kind.host_version(host_root) == "2.0.0", where
        status = status_of(host_root, kind.component)
        assert status["current"] == "2.0.0", where
        assert [v["version"] for v in status["versions"]] == ["0.0.0", "1.0.0", "2.0.0"], where
        if status["staged"] is not None:
            assert status["staged"]["version"] == "3.0.0", where
            assert status["staged"]["complete"] == staged_on_host(kind, host_root), where
        else:
            assert not staged_on_host(kind, host_root), f"{where}: a complete 3.0.0 no state names"
        # The stage again: complete, nothing of the killed run left behind.
        again = run(stage_argv(kind, host_root))
        assert again.returncode == 0, f"{where}: {again.stderr[-400:]}"
        assert kind.leftovers(host_root) == [], where
        # status prints the state's record, empty values as null, and says it is complete.
        staged = {name: value if value != "" else None
                  for name, value in state_of(host_root, kind.component)["staged"].items()}
        assert status_of(host_root, kind.component)["staged"] == {**staged, "complete": True}, where
        # And the upgrade switches to what was staged.
        switched = run(upgrade_argv(kind, host_root))
        assert switched.returncode == 0, f"{where}: {switched.stderr[-400:]}"
        assert "as `hoist stage` staged it at" in switched.stderr, where
        assert kind.host_version(host_root) == "3.0.0", where
        assert state_of(host_root, kind.component)["staged"] is None, where
        assert kind.leftovers(host_root) == [], where


@pytest.mark.parametrize("kind_name", STAGED_KINDS)
def test_sigkill_at_each_commit_point_of_the_switch_after_a_stage_leaves_status_rollback_and_rerun_right(
        host_root, tmp_path, request, kind_name):
    kind = make_kind(kind_name, tmp_path, request)
    installed_and_copied(host_root, kind, tmp_path)
    assert run(stage_argv(kind, host_root)).returncode == 0
    pristine = tmp_path / "staged"
    snapshot(host_root, pristine)
    command = upgrade_argv
    points = traced_calls(command(kind, host_root), RENAMES, tmp_path)
    # The switch-only run stages nothing: no staging rename, only the intent, the link (and previous), the record.
    assert not any(".partial" in line for _, _, line in points), points
    for name, occurrence, line in points:
        restore(host_root, pristine)
        killed = kill_command(command(kind, host_root), name, occurrence)
        where = f"{kind_name} switch after a stage killed at {name} #{occurrence} ({line[:160]})"
        assert killed.returncode == -signal.SIGKILL, f"{where}: rc={killed.returncode} {killed.stderr[-300:]}"
        check_three_properties(kind, host_root, "upgrade", lambda k, root: command(k, root), where,
                               tmp_path / "after-kill")
        assert state_of(host_root, kind.component)["staged"] is None, where


def test_a_stage_killed_after_its_record_and_a_plan_moved_on_leaves_nothing_behind(host_root, tmp_path, request):
    # The staged 3.0.0 is complete, the Plan now asks for another version: the upgrade to it removes 3.0.0 (it is
    # no kept version) with its index.
    kind = make_kind("tree", tmp_path, request)
    installed_and_copied(host_root, kind, tmp_path)
    assert run(stage_argv(kind, host_root)).returncode == 0
    kind.sources["4.0.0"] = kind.sources["3.0.0"]
    upgraded = run(upgrade_argv(kind, host_root, "4.0.0"))
    assert upgraded.returncode == 0, upgraded.stderr
    assert "app: removed 3.0.0, which `hoist stage` staged at " in upgraded.stderr
    assert kind.on_disk(host_root) == ["1.0.0", "2.0.0"]  # 4.0.0 is no VERSIONS name: on_disk lists those only
    assert not os.path.exists(host_root / "var/lib/hoist/app/.index/3.0.0")
    assert state_of(host_root, "app")["staged"] is None
