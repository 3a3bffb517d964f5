"""Restarts and reboots over a real system bus: a dbus-daemon started by the
test, with test doubles of systemd's and logind's managers on it
(dbus_harness.py). hoist finds the bus inside the host root, calls the
managers through sd-bus, and waits for their signals; the tests read the
calls the doubles recorded and play the host going down (SIGTERM)."""

import json
import os
import signal
import subprocess
import time

import pytest

from conftest import HOIST_BIN, SANITIZER_ENV, RecordedPopen, run_recorded
from dbus_harness import system_bus  # noqa: F401 (a fixture)
from payloads import make_tree, state_of, upgrade

BOOT_1 = "11111111-2222-4333-8444-555555555555"
BOOT_2 = "99999999-8888-4777-8666-555555555555"


@pytest.fixture
def payloads(tmp_path):
    v1 = make_tree(tmp_path / "payloads/v1", {"bin/app": "one\n"}, 1)
    v2 = make_tree(tmp_path / "payloads/v2", {"bin/app": "two\n"}, 2)
    return v1, v2


def args(source, version, *extra):
    return ["--component", "app", "--kind", "tree", "--source", source, "--destination", "/opt/app",
            "--version", version, *extra]


def spawn(host_root, *arguments, env=None):
    """hoist in the background, for the tests that must signal it."""
    full_env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", **SANITIZER_ENV, **(env or {})}
    return RecordedPopen([HOIST_BIN, "--host-root", str(host_root), "upgrade", *map(str, arguments)],
                         env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(process, timeout=30):
    out, err = process.communicate(timeout=timeout)
    return process.returncode, out, err


def set_boot_id(host_root, boot_id):
    (host_root / "proc/sys/kernel/random/boot_id").write_text(boot_id + "\n")


# Restarts

def test_a_change_restarts_the_unit_and_waits_for_its_job(host_root, payloads, system_bus):
    v1, v2 = payloads
    systemd = system_bus.start("systemd_manager")
    result = upgrade(host_root, *args(v1, "1.0.0", "--restart", "k3s"), check=0)
    assert systemd.called("RestartUnit") == ['RestartUnit "k3s.service" "replace"']
    assert "k3s.service: RestartUnit queued as job /org/freedesktop/systemd1/job/1" in result.stderr
    assert "k3s.service: restarted (done)" in result.stderr
    # An unchanged re-run restarts nothing.
    upgrade(host_root, *args(v1, "1.0.0", "--restart", "k3s"), check=0)
    assert len(systemd.called("RestartUnit")) == 1
    # Several units, in order.
    upgrade(host_root, *args(v2, "1.1.0", "--restart", "a.service", "--restart", "b.socket"), check=0)
    assert systemd.called("RestartUnit")[1:] == ['RestartUnit "a.service" "replace"',
                                                 'RestartUnit "b.socket" "replace"']
    assert not systemd.called("Reboot")


def test_a_job_that_ends_before_the_call_returns_is_not_missed(host_root, payloads, system_bus):
    v1, _ = payloads
    systemd = system_bus.start("systemd_manager", early=["k3s.service"])
    result = upgrade(host_root, *args(v1, "1.0.0", "--restart", "k3s.service", "--restart-timeout", "5"), check=0)
    assert "k3s.service: restarted (done)" in result.stderr
    assert systemd.called("RestartUnit")


def test_a_failed_unit_is_reported_with_its_name_and_result(host_root, payloads, system_bus):
    v1, _ = payloads
    system_bus.start("systemd_manager", results={"k3s.service": "failed"})
    result = upgrade(host_root, *args(v1, "1.0.0", "--restart", "k3s"), check=1)
    message = ("failed to restart k3s.service: the job's result is 'failed' "
               "(ActiveState failed, SubState failed, Result exit-code) (app 1.0.0 switched)")
    assert message in result.stderr
    state = state_of(host_root, "app")
    # A first install has nothing to go back to: it stays, and the state says so (an upgrade switches back:
    # test_exit_codes.py).
    assert state["current"] == "1.0.0"
    assert state["last_result"]["outcome"] == "failed"
    assert state["last_result"]["message"] == message + "; no previous version to switch back to"


def replace_service(system_bus, service, template, **parameters):
    """Stops a test double and starts another in its place: the unit that failed works now."""
    service.process.send_signal(signal.SIGTERM)
    service.process.wait(timeout=10)
    deadline = time.monotonic() + 10
    while system_bus._has_owner(service.name) and time.monotonic() < deadline:
        time.sleep(0.05)
    service.log.unlink(missing_ok=True)
    return system_bus.start(template, **parameters)


def test_a_failed_restart_is_owed_and_done_by_the_next_run(host_root, payloads, system_bus):
    v1, _ = payloads
    failing = system_bus.start("systemd_manager", results={"k3s.service": "failed"})
    upgrade(host_root, *args(v1, "1.0.0", "--restart", "k3s"), check=1)
    state = state_of(host_root, "app")
    assert state["owed_restarts"] == ["k3s.service"]
    assert state["last_result"]["outcome"] == "failed"
    # SUC's next pod runs the same command: before, it said "nothing to do", exited 0 and forgot the failure.
    systemd = replace_service(system_bus, failing, "systemd_manager")
    result = upgrade(host_root, *args(v1, "1.0.0", "--restart", "k3s"), check=0)
    assert "app: doing the restarts an earlier run owes (k3s.service)" in result.stderr
    assert systemd.called("RestartUnit") == ['RestartUnit "k3s.service" "replace"']
    state = state_of(host_root, "app")
    assert state["owed_restarts"] == []
    assert state["last_result"]["outcome"] == "succeeded"
    assert state["last_result"]["message"] == "restarted what an earlier run owed: k3s.service"
    # Paid: the next identical run has nothing to do.
    upgrade(host_root, *args(v1, "1.0.0", "--restart", "k3s"), check=0)
    assert len(systemd.called("RestartUnit")) == 1
    assert state_of(host_root, "app")["last_result"]["outcome"] == "unchanged"


def test_a_run_killed_between_its_switch_and_its_restart_leaves_the_restart_owed(host_root, payloads, system_bus):
    v1, _ = payloads
    stuck = system_bus.start("systemd_manager", delays={"k3s.service": -1})
    process = spawn(host_root, *args(v1, "1.0.0", "--restart", "k3s", "--restart-timeout", "60"),
                    env=system_bus.env())
    stuck.wait_for_call("RestartUnit")
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=30)
    assert os.readlink(host_root / "opt/app/current") == "1.0.0"
    assert state_of(host_root, "app")["owed_restarts"] == ["k3s.service"]
    systemd = replace_service(system_bus, stuck, "systemd_manager")
    upgrade(host_root, *args(v1, "1.0.0", "--restart", "k3s"), check=0)
    assert systemd.called("RestartUnit") == ['RestartUnit "k3s.service" "replace"']
    assert state_of(host_root, "app")["owed_restarts"] == []


def test_a_job_that_never_ends_times_out(host_root, payloads, system_bus):
    v1, _ = payloads
    system_bus.start("systemd_manager", delays={"slow.service": -1})
    start = time.monotonic()
    result = upgrade(host_root, *args(v1, "1.0.0", "--restart", "slow", "--restart-timeout", "1"), check=1)
    assert time.monotonic() - start < 15
    assert "failed to restart slow.service: job /org/freedesktop/systemd1/job/1 did not finish within 1 s " \
           "(--restart-timeout)" in result.stderr


def test_an_unknown_unit_is_reported_with_systemds_error(host_root, payloads, system_bus):
    v1, _ = payloads
    system_bus.start("systemd_manager", missing=["nope.service"])
    result = upgrade(host_root, *args(v1, "1.0.0", "--restart", "nope"), check=1)
    assert "failed to restart nope.service (RestartUnit on unix:path=" in result.stderr
    assert "Unit nope.service not found. (org.freedesktop.systemd1.NoSuchUnit)" in result.stderr


def test_no_system_bus_is_an_error_naming_the_socket_inside_the_host_root(host_root, payloads):
    v1, _ = payloads
    result = upgrade(host_root, *args(v1, "1.0.0", "--restart", "k3s"), check=1)
    assert f"failed to find the system bus socket '{host_root}/run/dbus/system_bus_socket': No such file or " \
           "directory" in result.stderr


def test_dbus_system_bus_address_overrides_the_socket(host_root, payloads, system_bus, tmp_path):
    v1, _ = payloads
    systemd = system_bus.start("systemd_manager")
    moved = tmp_path / "elsewhere.sock"
    os.rename(system_bus.socket, moved)
    result = upgrade(host_root, *args(v1, "1.0.0", "--restart", "k3s"),
                     env={"DBUS_SYSTEM_BUS_ADDRESS": f"unix:path={moved}"}, check=0)
    assert "restarted (done)" in result.stderr
    assert systemd.called("RestartUnit")
    os.rename(moved, system_bus.socket)


def test_invalid_unit_names_and_policies_are_usage_errors(host_root, payloads):
    v1, _ = payloads
    assert "invalid unit name '../x'" in upgrade(host_root, *args(v1, "1.0.0", "--restart", "../x"), check=2).stderr
    assert "--reboot: expects never, if-needed, always or delegate, not 'sometimes'" in \
        upgrade(host_root, *args(v1, "1.0.0", "--reboot", "sometimes"), check=2).stderr


# Reboots and the handshake with SUC

def test_reboot_through_logind_then_the_run_after_the_boot_exits_0_without_a_second_reboot(
        host_root, payloads, system_bus):
    v1, _ = payloads
    logind = system_bus.start("logind_manager")
    systemd = system_bus.start("systemd_manager")
    process = spawn(host_root, *args(v1, "1.0.0", "--restart", "k3s", "--reboot", "if-needed"))
    logind.wait_for_call("RebootWithFlags")
    assert logind.called("RebootWithFlags") == ["RebootWithFlags 1"]  # SD_LOGIND_ROOT_CHECK_INHIBITORS
    # The restart came first, and the handshake's first half is on disk before the request.
    assert systemd.called("RestartUnit")
    state = state_of(host_root, "app")
    assert state["pending_reboot"]["target"] == "1.0.0"
    assert state["pending_reboot"]["boot_id"] == BOOT_1
    assert state["last_result"]["outcome"] == "rebooting"
    # Still waiting: it must not exit 0 before the node goes down.
    time.sleep(0.5)
    assert process.poll() is None
    # The node goes down: SIGTERM, exit 1 (not 0: SUC would call the Job done).
    process.send_signal(signal.SIGTERM)
    code, _, err = finish(process)
    assert code == 1, err
    assert "stopped by SIGTERM while waiting for the reboot into app 1.0.0" in err
    assert "asked for the reboot through logind RebootWithFlags" in err

    # The Job's next pod, after the boot.
    set_boot_id(host_root, BOOT_2)
    result = upgrade(host_root, *args(v1, "1.0.0", "--restart", "k3s", "--reboot", "if-needed"), check=0)
    assert f"app: the host rebooted into 1.0.0 (boot id {BOOT_1} → {BOOT_2}): done, no second reboot" in result.stderr
    assert len(logind.called("RebootWithFlags")) == 1
    assert len(systemd.called("RestartUnit")) == 1
    state = state_of(host_root, "app")
    assert state["pending_reboot"] is None
    # As after a rollback's reboot: the run that saw the new boot records the upgrade as done.
    assert state["last_result"]["outcome"] == "succeeded", state["last_result"]
    assert state["last_result"]["version"] == "1.0.0"
    assert state["last_result"]["message"] == "rebooted into 1.0.0"
    assert not systemd.called("Reboot")


def test_a_run_killed_before_the_reboot_came_asks_again(host_root, payloads, system_bus):
    v1, _ = payloads
    logind = system_bus.start("logind_manager")
    system_bus.start("systemd_manager")  # a fallback that can never reach reboot(2)
    process = spawn(host_root, *args(v1, "1.0.0", "--reboot", "if-needed"))
    logind.wait_for_call("RebootWithFlags")
    process.send_signal(signal.SIGTERM)
    assert finish(process)[0] == 1
    # Same boot: the pod was deleted, the host did not reboot. The next run asks again.
    process = spawn(host_root, *args(v1, "1.0.0", "--reboot", "if-needed"))
    assert len(logind.wait_for_call("RebootWithFlags", timeout=20, count=2)) == 2
    process.send_signal(signal.SIGTERM)
    code, _, err = finish(process)
    assert code == 1
    assert "app: the reboot into 1.0.0 asked for at" in err and "has not happened" in err


def test_a_host_that_came_back_on_the_old_version_fails_plainly(host_root, payloads, system_bus):
    v1, v2 = payloads
    logind = system_bus.start("logind_manager")
    system_bus.start("systemd_manager")  # a fallback that can never reach reboot(2)
    upgrade(host_root, *args(v1, "1.0.0"), check=0)
    process = spawn(host_root, *args(v2, "1.1.0", "--reboot", "if-needed"))
    logind.wait_for_call("RebootWithFlags")
    process.send_signal(signal.SIGTERM)
    assert finish(process)[0] == 1
    # The host booted, but something (a boot fallback) put 1.0.0 back.
    state_file = host_root / "var/lib/hoist/app/state.json"
    state = json.loads(state_file.read_text())
    state["current"], state["previous"] = "1.0.0", "1.1.0"
    state_file.write_text(json.dumps(state))
    os.unlink(host_root / "opt/app/current")
    os.symlink("1.0.0", host_root / "opt/app/current")
    set_boot_id(host_root, BOOT_2)
    result = upgrade(host_root, *args(v2, "1.1.0", "--reboot", "if-needed"), check=1)
    assert (f"the host rebooted (boot id {BOOT_1} → {BOOT_2}) but app is at 1.0.0, not 1.1.0: the host came back "
            "on the old version; not rebooting again") in result.stderr
    assert len(logind.called("RebootWithFlags")) == 1
    assert os.readlink(host_root / "opt/app/current") == "1.0.0"


def test_older_logind_gets_reboot_false(host_root, payloads, system_bus):
    v1, _ = payloads
    logind = system_bus.start("logind_manager", legacy=True)
    systemd = system_bus.start("systemd_manager")
    process = spawn(host_root, *args(v1, "1.0.0", "--reboot", "always"))
    logind.wait_for_call("Reboot")
    assert logind.called("Reboot") == ["Reboot False"]
    process.send_signal(signal.SIGTERM)
    code, _, err = finish(process)
    assert code == 1
    assert "logind has no RebootWithFlags" in err and "through logind Reboot" in err
    assert not systemd.calls()


def test_without_logind_systemd_starts_reboot_target_irreversibly(host_root, payloads, system_bus):
    v1, _ = payloads
    systemd = system_bus.start("systemd_manager")
    process = spawn(host_root, *args(v1, "1.0.0", "--reboot", "always"))
    systemd.wait_for_call("StartUnit")
    assert systemd.called("StartUnit") == ['StartUnit "reboot.target" "replace-irreversibly"']
    process.send_signal(signal.SIGTERM)
    code, _, err = finish(process)
    assert code == 1
    assert "through systemd StartUnit reboot.target" in err
    assert not systemd.called("Reboot")


def test_a_stop_while_the_reboot_request_is_on_its_way_is_the_hosts_going_down_not_a_refusal(
        host_root, payloads, system_bus):
    # The kubelet stops the Job's pod when the host goes down for this very reboot, sometimes before systemd's answer
    # to StartUnit is read: the call ended with EINTR, and hoist took it for a refusal ("failed to reboot the host:
    # ...; systemd: Interrupted system call"), switched back to 1.0.0 and exited 1 while the reboot went on.
    v1, v2 = payloads
    upgrade(host_root, *args(v1, "1.0.0"), check=0)
    systemd = system_bus.start("systemd_manager", slow_starts={"reboot.target": 3000})
    process = spawn(host_root, *args(v2, "1.1.0", "--reboot", "always"))
    systemd.wait_for_call("StartUnit")
    process.send_signal(signal.SIGTERM)
    code, _, err = finish(process)
    assert code == 1
    assert "stopped by SIGTERM while asking for the reboot through systemd StartUnit reboot.target (the host is " \
           "going down; the run after the boot checks it)" in err, err
    assert "failed to reboot the host" not in err and "switching back" not in err
    state = state_of(host_root, "app")
    assert state["current"] == "1.1.0"
    assert state["pending_reboot"]["target"] == "1.1.0"
    assert os.readlink(host_root / "opt/app/current") == "1.1.0"


@pytest.mark.parametrize("flavour", ["BlockedByInhibitorLock", "AccessDenied"])
def test_an_inhibitor_is_waited_out(host_root, payloads, system_bus, flavour):
    v1, _ = payloads
    inhibitor = ["shutdown:sleep", "backup-tool", "backup in progress", "block", 0, 4242]
    logind = system_bus.start("logind_manager", blocked_calls=2, blocked_error=flavour, inhibitors=[inhibitor])
    system_bus.start("systemd_manager")  # a fallback that can never reach reboot(2)
    process = spawn(host_root, *args(v1, "1.0.0", "--reboot", "if-needed", "--reboot-timeout", "60"))
    assert len(logind.wait_for_call("RebootWithFlags", timeout=30, count=3)) == 3
    time.sleep(0.3)
    process.send_signal(signal.SIGTERM)
    code, _, err = finish(process)
    assert code == 1
    assert "the reboot is blocked by an inhibitor lock held by 'backup-tool' (backup in progress; what " \
           "shutdown:sleep, mode block, uid 0, pid 4242)" in err
    assert "asked for the reboot through logind RebootWithFlags" in err


def test_an_inhibitor_that_stays_fails_the_run_naming_it(host_root, payloads, system_bus):
    v1, _ = payloads
    inhibitors = [["shutdown", "etcd-defrag", "defragmenting", "block", 0, 77],
                  ["sleep", "desktop", "not shutdown", "block", 1000, 78],
                  ["shutdown", "kubelet", "graceful node shutdown", "delay", 0, 79]]
    system_bus.start("logind_manager", blocked_calls=-1, inhibitors=inhibitors)
    system_bus.start("systemd_manager")  # a fallback that can never reach reboot(2)
    start = time.monotonic()
    result = upgrade(host_root, *args(v1, "1.0.0", "--reboot", "if-needed", "--reboot-timeout", "3"), check=1)
    assert time.monotonic() - start < 20
    assert ("failed to reboot the host: blocked by an inhibitor lock until the --reboot-timeout ran out "
            "(Operation denied due to active block inhibitor (org.freedesktop.login1.BlockedByInhibitorLock)); "
            "held by: 'etcd-defrag' (defragmenting; what shutdown, mode block, uid 0, pid 77)") in result.stderr


def test_a_reboot_that_never_comes_fails_after_the_timeout(host_root, payloads, system_bus):
    v1, _ = payloads
    system_bus.start("logind_manager")
    system_bus.start("systemd_manager")  # a fallback that can never reach reboot(2)
    start = time.monotonic()
    result = upgrade(host_root, *args(v1, "1.0.0", "--reboot", "if-needed", "--reboot-timeout", "2"), check=1)
    assert 2 <= time.monotonic() - start < 20
    assert "the host did not reboot within 2 s (--reboot-timeout) after the reboot into app 1.0.0 was asked for" \
        in result.stderr


def test_reboot_always_reboots_an_unchanged_host_once(host_root, payloads, system_bus):
    v1, _ = payloads
    upgrade(host_root, *args(v1, "1.0.0"), check=0)
    logind = system_bus.start("logind_manager")
    process = spawn(host_root, *args(v1, "1.0.0", "--reboot", "always"))
    system_bus.start("systemd_manager")  # a fallback that can never reach reboot(2)
    logind.wait_for_call("RebootWithFlags")
    process.send_signal(signal.SIGTERM)
    assert finish(process)[0] == 1
    set_boot_id(host_root, BOOT_2)
    result = upgrade(host_root, *args(v1, "1.0.0", "--reboot", "always"), check=0)
    assert "no reboot: the host already rebooted into this version" in result.stderr
    assert len(logind.called("RebootWithFlags")) == 1


def test_reboot_if_needed_does_not_reboot_an_unchanged_host(host_root, payloads, system_bus):
    v1, _ = payloads
    logind = system_bus.start("logind_manager")
    upgrade(host_root, *args(v1, "1.0.0"), check=0)
    result = upgrade(host_root, *args(v1, "1.0.0", "--reboot", "if-needed"), check=0)
    assert "nothing to do" in result.stderr
    assert not logind.calls()


def test_without_a_system_bus_reboot_2_is_the_last_resort(host_root, payloads):
    """In a PID namespace of its own, where reboot(2) ends the namespace (its
    init, hoist, is killed) instead of rebooting the machine."""
    v1, _ = payloads
    probe = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("cannot make a PID namespace here: " + probe.stderr.decode())
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "DBUS_SYSTEM_BUS_ADDRESS": "unix:path=/nonexistent/bus"}
    result = run_recorded(["unshare", "--pid", "--fork", "--mount-proc", "--kill-child", HOIST_BIN,
                             "--host-root", str(host_root), "upgrade", *args(v1, "1.0.0", "--reboot", "always")],
                            env=env, capture_output=True, text=True, timeout=60)
    # The namespace's init died of the "reboot" (SIGHUP from reboot_pid_ns), not by its own exit.
    assert result.returncode in (128 + signal.SIGHUP, -signal.SIGHUP), result
    assert "rebooting with sync(2) and reboot(2), without a clean shutdown" in result.stderr
    assert "failed to connect to the system bus at 'unix:path=/nonexistent/bus'" in result.stderr
    assert state_of(host_root, "app")["pending_reboot"]["target"] == "1.0.0"


def test_a_refusing_logind_falls_back_to_systemd_and_two_refusals_fail_the_run(host_root, payloads, system_bus):
    v1, v2 = payloads
    logind = system_bus.start("logind_manager", refuse="org.freedesktop.DBus.Error.AccessDenied")
    systemd = system_bus.start("systemd_manager", missing=["reboot.target"])
    result = upgrade(host_root, *args(v1, "1.0.0", "--reboot", "if-needed"), check=1)
    assert ("failed to reboot the host: logind: refused by the test (org.freedesktop.DBus.Error.AccessDenied); "
            "systemd: Unit reboot.target not found. (org.freedesktop.systemd1.NoSuchUnit)") in result.stderr
    assert logind.called("RebootWithFlags") and systemd.called("StartUnit")
    assert "reboot(2)" not in result.stderr


# --reboot delegate (kured)

SENTINEL = "run/reboot-required"  # /var/run/reboot-required: /var/run is /run in the host root


def test_reboot_delegate_writes_kureds_sentinel_waits_for_the_boot_and_the_run_after_it_exits_0(
        host_root, payloads, system_bus):
    v1, _ = payloads
    logind = system_bus.start("logind_manager")
    systemd = system_bus.start("systemd_manager")
    process = spawn(host_root, *args(v1, "1.0.0", "--restart", "k3s", "--reboot", "delegate"))
    deadline = time.monotonic() + 20
    while not (host_root / SENTINEL).exists():
        assert time.monotonic() < deadline and process.poll() is None, "no sentinel"
        time.sleep(0.05)
    assert (host_root / SENTINEL).read_text() == "hoist: reboot into app 1.0.0\n"
    state = state_of(host_root, "app")
    assert state["pending_reboot"]["target"] == "1.0.0" and state["pending_reboot"]["boot_id"] == BOOT_1
    # Waiting for kured: no reboot asked of logind or systemd, and no exit 0 before the node goes down.
    time.sleep(0.5)
    assert process.poll() is None
    process.send_signal(signal.SIGTERM)
    code, _, err = finish(process)
    assert code == 1, err
    assert f"reboot delegated: wrote {host_root}/var/run/reboot-required for kured to reboot the node" in err
    assert "stopped by SIGTERM while waiting for the reboot into app 1.0.0" in err
    assert not logind.called("RebootWithFlags") and not logind.called("Reboot") and not systemd.called("Reboot")
    # kured rebooted the node (the sentinel went with /run); the Job's next pod confirms the boot.
    (host_root / SENTINEL).unlink()
    set_boot_id(host_root, BOOT_2)
    result = upgrade(host_root, *args(v1, "1.0.0", "--restart", "k3s", "--reboot", "delegate"), check=0)
    assert f"app: the host rebooted into 1.0.0 (boot id {BOOT_1} → {BOOT_2}): done, no second reboot" in result.stderr
    assert not (host_root / SENTINEL).exists()
    state = state_of(host_root, "app")
    assert state["pending_reboot"] is None and state["last_result"]["message"] == "rebooted into 1.0.0"


def test_a_delegated_reboot_that_does_not_come_goes_back_and_takes_its_sentinel_away(host_root, payloads,
                                                                                    system_bus):
    v1, v2 = payloads
    logind = system_bus.start("logind_manager")
    system_bus.start("systemd_manager")
    upgrade(host_root, *args(v1, "1.0.0"), check=0)
    result = upgrade(host_root, *args(v2, "2.0.0", "--reboot", "delegate", "--reboot-timeout", "2",
                                      "--reboot-sentinel", "/run/custom/reboot-needed"), check=1)
    assert f"reboot delegated: wrote {host_root}/run/custom/reboot-needed for kured" in result.stderr
    assert "the host did not reboot within 2 s (--reboot-timeout) after the reboot into app 2.0.0 was asked for" \
        in result.stderr
    # Switched back as after a refused reboot, not quarantined, and nothing left for kured to reboot for.
    assert os.readlink(host_root / "opt/app/current") == "1.0.0"
    assert not (host_root / "run/custom/reboot-needed").exists()
    state = state_of(host_root, "app")
    assert state["current"] == "1.0.0" and state["pending_reboot"] is None and state["quarantined"] == []
    assert not logind.called("RebootWithFlags")


def test_reboot_delegate_does_not_reboot_an_unchanged_host_and_refuses_a_relative_sentinel(host_root, payloads,
                                                                                        system_bus):
    v1, _ = payloads
    system_bus.start("logind_manager")
    upgrade(host_root, *args(v1, "1.0.0"), check=0)
    result = upgrade(host_root, *args(v1, "1.0.0", "--reboot", "delegate"), check=0)
    assert "no reboot: nothing changed (--reboot delegate)" in result.stderr
    assert not (host_root / SENTINEL).exists()
    result = upgrade(host_root, *args(v1, "1.0.0", "--reboot", "delegate", "--reboot-sentinel", "run/x"), check=2)
    assert "--reboot-sentinel: 'run/x' is not an absolute path to a file on the host" in result.stderr
