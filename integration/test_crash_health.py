"""Crash consistency of the health phase and the automatic switch back: an upgrade to 2.0.0 whose unit dies after
every restart (the systemd test double on a real system bus), so its check never passes and hoist switches back to
1.0.0. SIGKILL at each rename of the health phase and the switch back (read from an strace log) and at random
instants of the run (seeded), SIGTERM at random instants of the checks; after each: the host is on 1.0.0 or 2.0.0
and `status` agrees, `rollback` goes exactly one version back, and a re-run of the same command ends with 1.0.0
current, 2.0.0 failed and quarantined, its checks never counted as passed."""

import os
import random
import shutil
import signal
import subprocess
import time

import pytest

from conftest import record_output, run_recorded
from dbus_harness import system_bus  # noqa: F401 (a fixture)
from payloads import make_tree, read_tree, rollback, state_of
from test_crash import RENAMES, STRACE, hoist_argv, kill_command, restore, snapshot, status_of, traced_calls

pytestmark = pytest.mark.skipif(STRACE is None, reason="strace is not installed")

VERSIONS = ["0.0.0", "1.0.0", "2.0.0"]
# The unit dies 200 ms after each restart, so it never stays up the 1 s it must: the check fails after 2 s.
CHECKS = ["--restart", "k3s", "--health-check", "unit:k3s", "--health-settle", "1", "--health-timeout", "2"]
WHY = "health check unit:k3s did not pass within 2 s: k3s.service is failed (failed)"
# HOIST_CRASH_KILLS sets the random SIGKILLs (default 8), HOIST_CRASH_SEED the seed (default: a new one, printed
# and named in every failure).
RANDOM_KILLS = int(os.environ.get("HOIST_CRASH_KILLS", "8"))
SIGTERMS = 3


class Host:
    """Versions 0.0.0 and 1.0.0 installed (no checks), the unit dying after every restart; `argv` upgrades to
    2.0.0 with the check. Copies of the host root are kept and put back while the bus stays up (test_crash's
    snapshot and restore)."""

    def __init__(self, host_root, tmp_path):
        self.root = host_root
        self.tmp = tmp_path
        self.trees = {}
        self.sources = {}
        for i, version in enumerate(VERSIONS):
            source = make_tree(tmp_path / "payloads" / version,
                               {f"d{j % 3}/f{j}": f"{version} file {j}\n" * (j + 1) for j in range(i, i + 6)}, i)
            self.sources[version] = source
            self.trees[version] = read_tree(source)
        for version in VERSIONS[:2]:
            run_recorded(self.argv(version, "--restart", "k3s"), check=True, capture_output=True)
        self.save("pristine")

    def argv(self, version="2.0.0", *extra):
        return list(map(str, hoist_argv(self.root, "--component", "app", "--kind", "tree", "--destination",
                                        "/opt/app", "--source", self.sources[version], "--version", version,
                                        *(extra or CHECKS))))

    def save(self, name):
        copy = self.tmp / name
        shutil.rmtree(copy, ignore_errors=True)
        snapshot(self.root, copy)

    def restore(self, name):
        restore(self.root, self.tmp / name)

    def current(self):
        return os.readlink(self.root / "opt/app/current")

    def leftovers(self):
        return sorted(name for name in os.listdir(self.root / "opt/app") if name.startswith("."))


@pytest.fixture
def host(host_root, tmp_path, system_bus):  # noqa: F811 (a fixture)
    systemd = system_bus.start("systemd_manager", dies={"k3s.service": 200})
    host = Host(host_root, tmp_path)
    host.restarts = lambda: len(systemd.called("RestartUnit"))
    return host


def traced_renames(host, tmp_path):
    """The renames of one whole run (the switch, the failed checks, the switch back), from an strace log."""
    # traced_calls wants a run that exits 0; this one exits 1 by design.
    host.restore("pristine")
    points = traced_calls(["/bin/sh", "-c", '"$@" || true', "sh", *host.argv()], RENAMES, tmp_path)
    host.restore("pristine")
    return points


def links(points):
    """The indexes in `points` of the renames of the `current` link: the switch, then the switch back."""
    found = [i for i, (_, _, line) in enumerate(points) if '"current"' in line]
    assert len(found) == 2, points
    return found


def state_saves_after(points, index):
    return [i for i in range(index, len(points)) if '"state.json"' in points[i][2]]


def finished(host, rerun, where, owed=()):
    """The run after a kill ended with 1.0.0 current and restarted, 2.0.0 failed and quarantined for its check;
    no restart owed but `owed`."""
    assert host.current() == "1.0.0", f"{where}: {rerun.stderr[-600:]}"
    state = state_of(host.root, "app")
    assert (state["current"], state.get("rollback"), state["owed_health_checks"], state["owed_restarts"]) == \
        ("1.0.0", None, [], list(owed)), where
    assert [q["version"] for q in state["quarantined"]] == ["2.0.0"], where
    assert state["quarantined"][0]["reason"] == WHY, f"{where}: {state['quarantined']}"
    assert (state["health"]["version"], state["health"]["verdict"], state["health"]["check"]) == \
        ("2.0.0", "failed", "unit:k3s"), where
    if rerun.returncode == 1:  # a re-run refused (2.0.0 is quarantined) records its refusal instead
        result = state["last_result"]
        assert (result["outcome"], result["version"], result["message"]) == \
            ("rolled-back", "2.0.0", f"{WHY}; switched back to 1.0.0"), f"{where}: {result}"


def never_passed(state):
    health = state.get("health") or {}
    return not (health.get("version") == "2.0.0" and health.get("verdict") == "passed")


def check_after_kill(host, where):
    """The three properties after a run was killed or stopped; the host is left as the re-run made it, which is
    returned."""
    # The host is on one version or the other, whole, and `status` says which.
    current = host.current()
    assert current in ("1.0.0", "2.0.0"), where
    assert read_tree(host.root / "opt/app" / current) == host.trees[current], where
    status = status_of(host.root, "app")
    assert status["current"] == current, f"{where}: status says {status['current']}, the host has {current}"
    state = state_of(host.root, "app")
    assert never_passed(state), f"{where}: {state['health']}"
    host.save("after-kill")

    # `rollback` goes exactly one version back: it walks back from the version `status` names (2.0.0 to 1.0.0,
    # 1.0.0 to 0.0.0, never forward to the quarantined 2.0.0), or it finishes the switch back that the killed run
    # began (to 1.0.0, one back from 2.0.0).
    expected = "1.0.0" if state.get("rollback") or current == "2.0.0" else "0.0.0"
    rolled = rollback(host.root, "--component", "app")
    assert rolled.returncode == 0, f"{where}: {rolled}"
    assert host.current() == expected, f"{where}: rollback went to {host.current()}: {rolled.stderr[-400:]}"
    assert status_of(host.root, "app")["current"] == expected, where
    assert host.leftovers() == [], where

    # The same command again (SUC's next pod) completes: the checks run again and fail, 1.0.0 ends current and
    # 2.0.0 quarantined; or it was already switched back, and 2.0.0 is refused as quarantined.
    host.restore("after-kill")
    rerun = run_recorded(host.argv(), capture_output=True, text=True, timeout=60)
    assert rerun.returncode in (1, 3), f"{where}: re-run: rc={rerun.returncode} {rerun.stderr[-600:]}"
    if rerun.returncode == 1:
        assert f"app: {WHY}; switching back to 1.0.0" in rerun.stderr, f"{where}: {rerun.stderr[-600:]}"
    else:
        assert "refusing 2.0.0: it is quarantined since" in rerun.stderr, f"{where}: {rerun.stderr[-600:]}"
    # A kill between the old version's restart and its record leaves the restart owed; the re-run, refused since
    # 2.0.0 is quarantined, does nothing more (a refused run changes nothing), so it stays owed.
    recorded_back = state["current"] == "1.0.0" and not state.get("rollback")
    finished(host, rerun, where, owed=state["owed_restarts"] if recorded_back else ())
    assert read_tree(host.root / "opt/app/1.0.0") == host.trees["1.0.0"], where
    assert host.leftovers() == [], where
    assert status_of(host.root, "app")["current"] == "1.0.0", where
    return rerun


def test_a_run_killed_between_its_switch_and_its_record_leaves_its_restarts_and_checks_owed(host, tmp_path):
    # The link names 2.0.0, the state still 1.0.0: the re-run recorded the switch and found nothing to do, exit 0,
    # 2.0.0 never restarted and never checked.
    points = traced_renames(host, tmp_path)
    name, occurrence, _ = points[state_saves_after(points, links(points)[0])[0]]
    assert kill_command(host.argv(), name, occurrence).returncode == -signal.SIGKILL
    assert host.current() == "2.0.0" and state_of(host.root, "app")["current"] == "1.0.0"
    before = host.restarts()
    rerun = run_recorded(host.argv(), capture_output=True, text=True, timeout=60)
    assert rerun.returncode == 1, rerun.stderr
    assert f"app: {WHY}; switching back to 1.0.0" in rerun.stderr
    assert host.restarts() == before + 2  # 2.0.0, then 1.0.0 after the switch back
    finished(host, rerun, "re-run")


def test_a_switch_back_killed_at_each_of_its_renames_is_finished_as_it_would_have_been(host, tmp_path):
    # Killed after its intent's save (which had already dropped the owed checks) and before the link moved: the
    # re-run dropped the intent and kept 2.0.0, exit 0. Killed after the link moved: the re-run recorded a plain
    # rollback (quarantined "rolled back to 1.0.0", last result "rollback succeeded") and never restarted 1.0.0.
    points = traced_renames(host, tmp_path)
    back = links(points)[1]
    intent = [i for i in range(back) if '"state.json"' in points[i][2]][-1]
    record = state_saves_after(points, back)[0]
    for name, occurrence, line in points[intent + 1:record + 1]:
        host.restore("pristine")
        where = f"killed at {name} #{occurrence} ({line[:160]})"
        assert kill_command(host.argv(), name, occurrence).returncode == -signal.SIGKILL, where
        before = host.restarts()
        rerun = run_recorded(host.argv(), capture_output=True, text=True, timeout=60)
        assert rerun.returncode in (1, 3), f"{where}: rc={rerun.returncode} {rerun.stderr[-600:]}"
        assert host.restarts() > before, f"{where}: 1.0.0 was never restarted: {rerun.stderr[-600:]}"
        finished(host, rerun, where)


def test_sigkill_at_each_rename_of_the_health_phase_and_the_switch_back(host, tmp_path):
    points = traced_renames(host, tmp_path)
    # The health phase begins with the state save that records the switch and the checks it owes: the first
    # state.json rename after the `current` link's.
    phase = points[state_saves_after(points, links(points)[0])[0]:]
    assert len(phase) >= 4, phase
    print(f"{len(phase)} renames from the save of the owed checks on: " + ", ".join(f"{n} #{k}" for n, k, _ in phase))
    for name, occurrence, line in phase:
        host.restore("pristine")
        killed = kill_command(host.argv(), name, occurrence)
        where = f"killed at {name} #{occurrence} ({line[:160]})"
        assert killed.returncode == -signal.SIGKILL, f"{where}: rc={killed.returncode} {killed.stderr[-300:]}"
        check_after_kill(host, where)


def seed():
    value = int(os.environ.get("HOIST_CRASH_SEED", str(random.SystemRandom().randrange(1 << 32))))
    print(f"HOIST_CRASH_SEED={value}")
    return value


def measured(host):
    """The length of one whole run: the switch, the failing checks, the switch back."""
    host.restore("pristine")
    start = time.monotonic()
    result = run_recorded(host.argv(), capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and f"app: {WHY}; switching back to 1.0.0" in result.stderr, result.stderr
    return time.monotonic() - start


def stopped(host, sig, delay):
    host.restore("pristine")
    proc = subprocess.Popen(host.argv(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(delay)
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=60)
    record_output(proc.args, "", stderr.decode(errors="replace"))
    return proc.returncode, stderr.decode(errors="replace")


def test_sigkill_at_random_instants_of_a_run_that_switches_back(host):
    value = seed()
    rng = random.Random(value)
    length = measured(host)
    inside = 0
    for i in range(RANDOM_KILLS):
        delay = rng.uniform(0, length)
        code, _ = stopped(host, signal.SIGKILL, delay)
        inside += code == -signal.SIGKILL
        where = f"killed after {delay:.3f} s of {length:.3f} s (HOIST_CRASH_SEED={value}, kill {i}, rc={code})"
        check_after_kill(host, where)
    print(f"{inside} of {RANDOM_KILLS} kills landed inside the run ({length:.3f} s)")


def test_sigterm_during_the_checks_leaves_the_new_version_and_its_checks_owed(host):
    value = seed()
    rng = random.Random(value)
    for i in range(SIGTERMS):
        host.restore("pristine")
        proc = subprocess.Popen(host.argv(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_for_checks(host)
        delay = rng.uniform(0, 1.5)
        time.sleep(delay)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
        stderr = stderr.decode(errors="replace")
        record_output(proc.args, "", stderr)
        where = f"SIGTERM {delay:.3f} s into the checks (HOIST_CRASH_SEED={value}, SIGTERM {i}, rc={proc.returncode})"
        assert proc.returncode == 1, f"{where}: {stderr[-400:]}"
        assert "stopped by SIGTERM" in stderr, f"{where}: {stderr[-400:]}"
        state = state_of(host.root, "app")
        assert host.current() == "2.0.0" and state["current"] == "2.0.0", where
        assert state["owed_health_checks"] == ["unit:k3s"], where
        # the next run checks again: they fail, and it switches back
        assert check_after_kill(host, where).returncode == 1, where


def wait_for_checks(host, timeout=20):
    """Waits until the run is in its checks: 2.0.0 current in the state, its checks owed, its restarts done."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = state_of(host.root, "app")
            if state["current"] == "2.0.0" and state["owed_health_checks"] and not state["owed_restarts"]:
                return
        except (FileNotFoundError, ValueError, KeyError):
            pass
        time.sleep(0.02)
    raise AssertionError("hoist never recorded its owed health checks")
