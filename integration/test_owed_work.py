"""What an earlier run left owed (restarts, health checks, a reboot record) when the next run's Plan, version or
host actions differ (docs/how-it-works.md, "What an earlier run left owed"): the run that runs now says what is
owed, so nothing is left that only deleting hoist's state on the host could clear. Through the binary."""

import signal

import pytest

from dbus_harness import system_bus  # noqa: F401 (a fixture)
from payloads import make_tree, rollback, state_of, upgrade
from test_exit_codes import args, current
from test_health import FAST, healthz  # noqa: F401 (a fixture)
from test_restart_reboot import finish, spawn


@pytest.fixture
def payloads(tmp_path):
    v1 = make_tree(tmp_path / "payloads/v1", {"bin/app": "one\n"}, 1)
    v2 = make_tree(tmp_path / "payloads/v2", {"bin/app": "two\n"}, 2)
    return v1, v2


def owe_a_restart(host_root, source, version, system_bus, *extra):
    """A run killed after its switch, before its restart ended: the restart of k3s.service is owed. Then the host
    loses its system bus (a node without systemd): that restart can never be done."""
    stuck = system_bus.start("systemd_manager", delays={"k3s.service": -1})
    process = spawn(host_root, *args(source, version, "--restart", "k3s", "--restart-timeout", "60", *extra))
    stuck.wait_for_call("RestartUnit")
    process.send_signal(signal.SIGKILL)
    finish(process)
    system_bus.stop()
    (host_root / "run/dbus/system_bus_socket").unlink(missing_ok=True)
    assert state_of(host_root, "app")["owed_restarts"] == ["k3s.service"]


def test_an_owed_restart_a_run_no_longer_asks_for_is_dropped(host_root, payloads, system_bus):
    # Every later run failed first with "doing the restarts an earlier run owes (k3s.service)", whatever its Plan:
    # only deleting hoist's state on the host cleared it.
    v1, _ = payloads
    owe_a_restart(host_root, v1, "1.0.0", system_bus)
    # The same Plan still asks for it: still owed, still failing.
    failing = upgrade(host_root, *args(v1, "1.0.0", "--restart", "k3s"), check=1)
    assert "app: doing the restarts an earlier run owes (k3s.service)" in failing.stderr
    # A Plan that no longer restarts k3s.service drops it.
    result = upgrade(host_root, *args(v1, "1.0.0"), check=0)
    note = "dropped the restarts an earlier run owed that this run does not ask for: k3s.service"
    assert f"app: {note}" in result.stderr
    state = state_of(host_root, "app")
    assert (state["current"], state["owed_restarts"]) == ("1.0.0", [])
    assert (state["last_result"]["outcome"], state["last_result"]["message"]) == ("unchanged", note)


def test_a_new_version_replaces_what_the_old_one_owed_with_its_own(host_root, payloads, system_bus):
    v1, v2 = payloads
    owe_a_restart(host_root, v1, "1.0.0", system_bus)
    result = upgrade(host_root, *args(v2, "2.0.0"), check=0)
    assert "doing the restarts" not in result.stderr
    assert current(host_root) == "2.0.0"
    state = state_of(host_root, "app")
    assert (state["current"], state["owed_restarts"], state["last_result"]["outcome"]) == \
        ("2.0.0", [], "succeeded")


def test_rollback_to_the_current_version_keeps_it_and_settles_what_is_owed(host_root, payloads, system_bus,
                                                                           healthz):
    v1, v2 = payloads
    upgrade(host_root, *args(v1, "1.0.0"), check=0)
    owe_a_restart(host_root, v2, "2.0.0", system_bus, "--health-check", f"http:{healthz.url}")
    assert state_of(host_root, "app")["owed_health_checks"] == [f"http:{healthz.url}"]
    # The operator keeps 2.0.0 with a one-off Plan: `hoist rollback --component app --to 2.0.0`.
    result = rollback(host_root, "--component", "app", "--to", "2.0.0", check=0)
    assert "app: already at 2.0.0, nothing to switch" in result.stderr
    assert f"app: keeping 2.0.0: dropped the owed restarts of k3s.service; dropped the owed health checks " \
           f"http:{healthz.url}" in result.stderr
    assert current(host_root) == "2.0.0"
    state = state_of(host_root, "app")
    assert (state["current"], state["owed_restarts"], state["owed_health_checks"]) == ("2.0.0", [], [])
    assert (state["last_result"]["command"], state["last_result"]["outcome"]) == ("rollback", "unchanged")
    # And the Plan's next pod (no restart asked) finds nothing owed.
    upgrade(host_root, *args(v2, "2.0.0"), check=0)


def test_owed_checks_are_replaced_by_the_checks_the_run_asks_for(host_root, payloads, healthz):
    v1, _ = payloads
    # A first install whose check never passes: nothing to go back to, so it stays and owes the check.
    healthz.handler.status = 500
    upgrade(host_root, *args(v1, "1.0.0", "--health-check", f"http:{healthz.url}", *FAST), check=1)
    assert state_of(host_root, "app")["owed_health_checks"] == [f"http:{healthz.url}"]
    # A Plan with a check that passes replaces it; before, the owed one was checked again and failed every run.
    healthz.handler.status = 200
    other = healthz.url.replace("/healthz", "/livez")
    result = upgrade(host_root, *args(v1, "1.0.0", "--health-check", f"http:{other}", *FAST), check=0)
    assert f"app: replaced the health checks an earlier run owed (http:{healthz.url}) with this run's" \
        in result.stderr
    state = state_of(host_root, "app")
    assert state["owed_health_checks"] == [] and state["health"]["verdict"] == "passed"
    assert state["health"]["detail"] == f"http:{other}"


def test_owed_checks_a_run_no_longer_asks_for_are_dropped(host_root, payloads, healthz):
    v1, _ = payloads
    healthz.handler.status = 500
    upgrade(host_root, *args(v1, "1.0.0", "--health-check", f"http:{healthz.url}", *FAST), check=1)
    result = upgrade(host_root, *args(v1, "1.0.0"), check=0)
    assert f"app: dropped the health checks an earlier run owed (http:{healthz.url}): this run asks for none" \
        in result.stderr
    assert "health:" not in result.stderr
    assert state_of(host_root, "app")["owed_health_checks"] == []
