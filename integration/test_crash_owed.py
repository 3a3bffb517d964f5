"""What a switch owes survives a kill between the switch and the state save that records it: the restarts
(`--restart`, a sysext's refresh) and the health checks travel in the intent saved before the switch, so the
run that finds the switch (reconciliation) owes them and does them."""

import signal

import pytest

from conftest import HOIST_BIN
from dbus_harness import system_bus  # noqa: F401 (a fixture: the systemd double counts the restarts)
from payloads import rollback, state_of, upgrade
from test_crash import (KINDS, RENAMES, VERSIONS, Kind, hoist_argv, kill_command, restore, save_after_switch, snapshot,
                        traced_calls)


def restarts(systemd, unit):
    return [call for call in systemd.called("RestartUnit") if f'"{unit}"' in call]


def refreshes(systemd):
    return systemd.called("ReloadOrRestartUnit")


@pytest.fixture
def installed(host_root, tmp_path, system_bus, request):
    """0.0.0, 1.0.0 and 2.0.0 of the kind installed, the systemd double running, a copy of the host taken."""
    kind_name = request.param
    systemd = system_bus.start("systemd_manager")
    kind = Kind(kind_name, tmp_path)
    for version in VERSIONS[:3]:
        upgrade(host_root, *kind.args(version), check=0)
    pristine = tmp_path / "pristine"
    snapshot(host_root, pristine)
    return kind, systemd, pristine


@pytest.mark.parametrize("installed", KINDS, indirect=True)
def test_an_upgrade_killed_at_the_save_after_its_switch_leaves_its_restarts_to_the_rerun(host_root, tmp_path,
                                                                                          installed):
    # The save that records the switch also recorded the restarts it owes; killed at it, the re-run found the host
    # switched, recorded it, had nothing to install, and restarted nothing: the unit kept running 2.0.0.
    kind, systemd, pristine = installed
    argv = hoist_argv(host_root, *kind.args("3.0.0", "--restart", "app.service"))
    point = save_after_switch(kind.kind, traced_calls(argv, RENAMES, tmp_path))
    restore(host_root, pristine)
    before = (len(restarts(systemd, "app.service")), len(refreshes(systemd)))
    killed = kill_command(argv, *point)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-400:]
    assert kind.host_version(host_root) == "3.0.0"
    assert (len(restarts(systemd, "app.service")), len(refreshes(systemd))) == before

    rerun = upgrade(host_root, *kind.args("3.0.0", "--restart", "app.service"))
    assert rerun.returncode == 0, rerun.stderr[-600:]
    assert "a run stopped after its switch (killed, or its switch could not be undone); recording 3.0.0" in rerun.stderr
    assert len(restarts(systemd, "app.service")) == before[0] + 1, rerun.stderr[-600:]
    # A sysext's refresh is owed by the switch too, with or without --restart.
    assert len(refreshes(systemd)) == before[1] + (kind.kind == "sysext"), rerun.stderr[-600:]
    state = state_of(host_root, kind.component)
    assert (state["current"], state["owed_restarts"], state["switching"]) == ("3.0.0", [], None)

    # Done once: a further re-run restarts nothing.
    upgrade(host_root, *kind.args("3.0.0", "--restart", "app.service"), check=0)
    assert len(restarts(systemd, "app.service")) == before[0] + 1


@pytest.mark.parametrize("installed", KINDS, indirect=True)
@pytest.mark.parametrize("next_run", ["rollback", "upgrade"])
def test_a_rollback_killed_at_the_save_after_its_switch_leaves_its_restarts_to_the_next_run(host_root, tmp_path,
                                                                                            installed, next_run):
    # The rollback's intent did not carry its restarts: the next rollback finished it with its own (none without
    # --restart), and an upgrade run recorded it with none, so the unit kept running 2.0.0.
    kind, systemd, pristine = installed
    argv = [HOIST_BIN, "rollback", "--host-root", host_root, "--lock-timeout", "5", "--component", kind.component,
            "--restart", "app.service"]
    point = save_after_switch(kind.kind, traced_calls(argv, RENAMES, tmp_path))
    restore(host_root, pristine)
    before = (len(restarts(systemd, "app.service")), len(refreshes(systemd)))
    killed = kill_command(argv, *point)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-400:]
    assert kind.host_version(host_root) == "1.0.0"
    assert (len(restarts(systemd, "app.service")), len(refreshes(systemd))) == before

    if next_run == "rollback":
        result = rollback(host_root, "--component", kind.component)
        assert "finished the interrupted rollback from 2.0.0 to 1.0.0" in result.stderr, result.stderr[-600:]
    else:
        result = upgrade(host_root, *kind.args("1.0.0"))
    assert result.returncode == 0, result.stderr[-600:]
    assert kind.host_version(host_root) == "1.0.0"
    assert len(restarts(systemd, "app.service")) == before[0] + 1, result.stderr[-600:]
    assert len(refreshes(systemd)) == before[1] + (kind.kind == "sysext"), result.stderr[-600:]
    state = state_of(host_root, kind.component)
    assert (state["current"], state["owed_restarts"], state["rollback"]) == ("1.0.0", [], None)
