"""Exit 1 and the host it leaves (README, "Exit codes"; docs/how-it-works.md, "What exit 1 leaves on the host"):
for each way a run that switched ends in 1, the link, the state and what systemd and logind were asked, through
the binary. A restart that fails, a reboot that does not come, is handled as a failed health check is (those are in
test_health.py): the run switches back. Where it cannot, the test holds it to what the docs say instead."""

import os
import shutil
import signal

import pytest

from conftest import HOIST_BIN, run_recorded
from dbus_harness import system_bus  # noqa: F401 (a fixture)
from payloads import make_tree, rollback, state_of, upgrade
from test_restart_reboot import BOOT_1, finish, set_boot_id, spawn

STRACE = shutil.which("strace")


@pytest.fixture
def payloads(tmp_path):
    v1 = make_tree(tmp_path / "payloads/v1", {"bin/app": "one\n"}, 1)
    v2 = make_tree(tmp_path / "payloads/v2", {"bin/app": "two\n"}, 2)
    return v1, v2


def args(source, version, *extra):
    return ["--component", "app", "--kind", "tree", "--source", source, "--destination", "/opt/app",
            "--version", version, *extra]


def current(host_root):
    return os.readlink(host_root / "opt/app/current")


def quarantined(host_root):
    return [q["version"] for q in state_of(host_root, "app")["quarantined"]]


def kept(host_root):
    return sorted(p.name for p in (host_root / "opt/app").iterdir() if not p.name.startswith(".")
                  and not p.is_symlink())


# ---- before the switch ---------------------------------------------------------------------------------------------

def test_no_system_bus_for_the_restart_fails_before_anything_changes(host_root, payloads):
    # A k3s server Plan with no system bus switched /usr/local/bin/k3s to the new version, then exited 1.
    v1, v2 = payloads
    upgrade(host_root, *args(v1, "1.0.0"), check=0)
    result = upgrade(host_root, *args(v2, "2.0.0", "--restart", "k3s"), check=1)
    assert (f"app: cannot restart k3s.service after the switch to 2.0.0: failed to find the system bus socket "
            f"'{host_root}/run/dbus/system_bus_socket': No such file or directory") in result.stderr
    assert current(host_root) == "1.0.0"
    assert kept(host_root) == ["1.0.0"]  # nothing was staged
    state = state_of(host_root, "app")
    assert (state["current"], state["owed_restarts"], state["quarantined"]) == ("1.0.0", [], [])
    assert state["last_result"]["outcome"] == "failed"


# ---- a restart that fails after the switch -------------------------------------------------------------------------

def test_a_unit_that_fails_on_the_new_version_is_switched_back_restarted_and_quarantined(host_root, payloads,
                                                                                        system_bus):
    v1, v2 = payloads
    # k3s.service's second job (2.0.0's restart) fails; the first and the third (1.0.0's) are done.
    systemd = system_bus.start("systemd_manager", failed_jobs={"k3s.service": [2]})
    upgrade(host_root, *args(v1, "1.0.0", "--restart", "k3s"), check=0)
    result = upgrade(host_root, *args(v2, "2.0.0", "--restart", "k3s"), check=1)
    why = ("failed to restart k3s.service: the job's result is 'failed' (ActiveState failed, SubState failed, "
           "Result exit-code) (app 2.0.0 switched)")
    assert f"app: {why}; switching back to 1.0.0" in result.stderr
    assert f"{why}; switched back to app 1.0.0" in result.stderr
    assert current(host_root) == "1.0.0"
    assert systemd.called("RestartUnit") == ['RestartUnit "k3s.service" "replace"'] * 3
    state = state_of(host_root, "app")
    assert (state["current"], state["previous"], state["owed_restarts"]) == ("1.0.0", "2.0.0", [])
    assert state["last_result"]["outcome"] == "rolled-back"
    assert state["last_result"]["message"] == f"{why}; switched back to 1.0.0"
    assert quarantined(host_root) == ["2.0.0"]
    # SUC's next pod: refused at once, nothing restarted.
    again = upgrade(host_root, *args(v2, "2.0.0", "--restart", "k3s"), check=3)
    assert "refusing 2.0.0: it is quarantined since" in again.stderr
    assert len(systemd.called("RestartUnit")) == 3


def test_a_restart_systemd_refuses_switches_back_restarting_only_what_was_restarted(host_root, payloads,
                                                                                   system_bus):
    v1, v2 = payloads
    systemd = system_bus.start("systemd_manager", missing=["nope.service"])
    upgrade(host_root, *args(v1, "1.0.0", "--restart", "k3s"), check=0)
    result = upgrade(host_root, *args(v2, "2.0.0", "--restart", "k3s", "--restart", "nope"), check=1)
    assert "failed to restart nope.service (RestartUnit on unix:path=" in result.stderr
    assert current(host_root) == "1.0.0"
    # k3s was restarted on 2.0.0, so again on 1.0.0; nope was never restarted.
    assert systemd.called("RestartUnit").count('RestartUnit "k3s.service" "replace"') == 3
    state = state_of(host_root, "app")
    assert (state["current"], state["owed_restarts"]) == ("1.0.0", [])
    assert state["last_result"]["outcome"] == "rolled-back"
    # Nothing was tried and failed: 2.0.0 is not quarantined, and a Plan that no longer restarts nope installs it.
    assert quarantined(host_root) == []
    upgrade(host_root, *args(v2, "2.0.0", "--restart", "k3s"), check=0)
    assert current(host_root) == "2.0.0"


def test_when_the_old_version_cannot_be_restarted_either_it_stays_current_with_its_restart_owed(
        host_root, payloads, system_bus):
    v1, v2 = payloads
    system_bus.start("systemd_manager", failed_jobs={"k3s.service": [2, 3]})
    upgrade(host_root, *args(v1, "1.0.0", "--restart", "k3s"), check=0)
    result = upgrade(host_root, *args(v2, "2.0.0", "--restart", "k3s"), check=1)
    assert "; switched back to app 1.0.0; then failed to restart k3s.service: the job's result is 'failed'" \
        in result.stderr
    assert current(host_root) == "1.0.0"
    state = state_of(host_root, "app")
    assert (state["current"], state["owed_restarts"]) == ("1.0.0", ["k3s.service"])


def test_a_first_install_whose_restart_fails_stays_with_the_restart_owed(host_root, payloads, system_bus):
    # Nothing to go back to (the docs' table says so): it stays, and the next run restarts it again.
    v1, _ = payloads
    system_bus.start("systemd_manager", failed_jobs={"k3s.service": [1]})
    result = upgrade(host_root, *args(v1, "1.0.0", "--restart", "k3s"), check=1)
    assert "; app 1.0.0 stays, with no previous version" in result.stderr
    assert current(host_root) == "1.0.0"
    state = state_of(host_root, "app")
    assert (state["current"], state["owed_restarts"], state["last_result"]["outcome"]) == \
        ("1.0.0", ["k3s.service"], "failed")
    upgrade(host_root, *args(v1, "1.0.0", "--restart", "k3s"), check=0)
    assert state_of(host_root, "app")["owed_restarts"] == []


def test_sigterm_during_the_restart_leaves_the_new_version_and_its_restart_owed(host_root, payloads, system_bus):
    # Stopped, not failed: the kubelet's grace period is no time to go back; the next run finishes the restart.
    v1, v2 = payloads
    systemd = system_bus.start("systemd_manager", delays={"k3s.service": -1})
    upgrade(host_root, *args(v1, "1.0.0"), check=0)
    process = spawn(host_root, *args(v2, "2.0.0", "--restart", "k3s", "--restart-timeout", "60"))
    systemd.wait_for_call("RestartUnit")
    process.send_signal(signal.SIGTERM)
    code, _, err = finish(process)
    assert code == 1, err
    assert "stopped by SIGTERM" in err
    assert current(host_root) == "2.0.0"
    state = state_of(host_root, "app")
    assert (state["current"], state["owed_restarts"], state["quarantined"]) == ("2.0.0", ["k3s.service"], [])


# ---- a reboot that does not come ----------------------------------------------------------------------------------

def test_a_refused_reboot_is_switched_back_without_quarantine(host_root, payloads, system_bus):
    v1, v2 = payloads
    logind = system_bus.start("logind_manager", refuse="org.freedesktop.DBus.Error.AccessDenied")
    system_bus.start("systemd_manager", missing=["reboot.target"])
    upgrade(host_root, *args(v1, "1.0.0"), check=0)
    result = upgrade(host_root, *args(v2, "2.0.0", "--reboot", "if-needed"), check=1)
    assert "failed to reboot the host: logind: refused by the test" in result.stderr
    assert "; switched back to app 1.0.0" in result.stderr
    assert current(host_root) == "1.0.0"
    state = state_of(host_root, "app")
    assert (state["current"], state["pending_reboot"], state["quarantined"]) == ("1.0.0", None, [])
    assert state["last_result"]["outcome"] == "rolled-back"
    # Going back needs no reboot: the host never booted 2.0.0.
    assert len(logind.called("RebootWithFlags")) == 1


def test_a_reboot_an_earlier_run_owed_that_does_not_come_is_switched_back(host_root, payloads, system_bus):
    v1, v2 = payloads
    logind = system_bus.start("logind_manager", blocked_calls=-1)
    system_bus.start("systemd_manager")  # a fallback that can never reach reboot(2)
    upgrade(host_root, *args(v1, "1.0.0"), check=0)
    set_boot_id(host_root, BOOT_1)
    process = spawn(host_root, *args(v2, "2.0.0", "--reboot", "if-needed", "--reboot-timeout", "60"))
    logind.wait_for_call("RebootWithFlags")
    process.send_signal(signal.SIGTERM)  # the pod deleted, the host still up
    assert finish(process)[0] == 1
    assert current(host_root) == "2.0.0" and state_of(host_root, "app")["pending_reboot"]["target"] == "2.0.0"
    # The next pod asks again (same boot id); the inhibitor stays.
    result = upgrade(host_root, *args(v2, "2.0.0", "--reboot", "if-needed", "--reboot-timeout", "2"), check=1)
    assert "blocked by an inhibitor lock until the --reboot-timeout ran out" in result.stderr
    assert current(host_root) == "1.0.0"
    state = state_of(host_root, "app")
    assert (state["current"], state["pending_reboot"], state["quarantined"]) == ("1.0.0", None, [])


# ---- where going back is not possible -----------------------------------------------------------------------------

@pytest.mark.skipif(STRACE is None, reason="strace is not installed (it injects the failing save)")
def test_a_state_that_cannot_be_saved_after_the_switch_leaves_the_new_version_and_its_intent(host_root, payloads,
                                                                                           tmp_path):
    v1, v2 = payloads
    upgrade(host_root, *args(v1, "1.0.0"), check=0)
    twin = tmp_path / "twin"
    shutil.copytree(host_root, twin, symlinks=True)
    argv = [HOIST_BIN, "--host-root", str(twin), "upgrade", *map(str, args(v2, "2.0.0"))]
    log = tmp_path / "strace.log"
    run_recorded([STRACE, "-f", "-qq", "-o", str(log), "-e", "trace=rename,renameat,renameat2", *argv],
                 check=True, capture_output=True)
    renames = [line for line in log.read_text().splitlines() if "rename" in line and "resumed>" not in line]
    switch = next(i for i, line in enumerate(renames) if '"current"' in line)
    record = next(i for i, line in enumerate(renames) if i > switch and '"state.json"' in line)
    name = renames[record].split("(", 1)[0].split()[-1]
    occurrence = sum(1 for line in renames[:record + 1] if line.split("(", 1)[0].split()[-1] == name)
    result = run_recorded([STRACE, "-f", "-qq", "-o", "/dev/null", "-e", f"trace={name}",
                           "-e", f"inject={name}:error=ENOSPC:when={occurrence}",
                           HOIST_BIN, "--host-root", str(host_root), "upgrade", *map(str, args(v2, "2.0.0"))],
                          capture_output=True, text=True, timeout=60)
    assert result.returncode == 1, result.stderr
    assert "No space left on device" in result.stderr
    # The switch stands; the state still says 1.0.0 and holds the switch's intent.
    assert current(host_root) == "2.0.0"
    state = state_of(host_root, "app")
    assert state["current"] == "1.0.0" and state["switching"]["to"] == "2.0.0"
    # The next run records the switch from the host's link.
    upgrade(host_root, *args(v2, "2.0.0"), check=0)
    state = state_of(host_root, "app")
    assert (state["current"], state["previous"], state["switching"]) == ("2.0.0", "1.0.0", None)


def test_a_rollback_whose_restart_fails_stands_with_the_restart_owed(host_root, payloads, system_bus):
    # The operator asked for that version: the rollback is not undone; its restart stays owed to the next run.
    v1, v2 = payloads
    system_bus.start("systemd_manager", failed_jobs={"k3s.service": [3]})
    upgrade(host_root, *args(v1, "1.0.0", "--restart", "k3s"), check=0)
    upgrade(host_root, *args(v2, "2.0.0", "--restart", "k3s"), check=0)
    result = rollback(host_root, "--component", "app", "--restart", "k3s", check=1)
    assert "failed to restart k3s.service: the job's result is 'failed'" in result.stderr
    assert current(host_root) == "1.0.0"
    state = state_of(host_root, "app")
    assert (state["current"], state["owed_restarts"]) == ("1.0.0", ["k3s.service"])
