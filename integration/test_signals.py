"""SIGTERM (SUC deleting a Job, the node shutting down) and SIGINT at the steps
of a run: the run stops at its next safe point, undoes what it switched,
removes what it staged, puts remounts back, releases the lock, exits 1, and the
log says where it stopped. Signals are delivered at exact points with strace's
signal injection, or while hoist blocks in a wait."""

import fcntl
import os
import shutil
import signal
import subprocess
import textwrap
import time

import pytest

from conftest import HOIST_BIN, SANITIZER_ENV, RecordedPopen, run_recorded
from dbus_harness import system_bus  # noqa: F401 (a fixture)
from payloads import make_tree, state_of, upgrade

ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}


@pytest.fixture
def payloads(tmp_path):
    v1 = make_tree(tmp_path / "payloads/v1", {"bin/app": "one\n", "etc/app.conf": "1\n"}, 1)
    v2 = make_tree(tmp_path / "payloads/v2", {"bin/app": "two\n", "etc/app.conf": "2\n"}, 2)
    return v1, v2


def args(source, version, *extra):
    return ["--component", "app", "--kind", "tree", "--source", str(source), "--destination", "/opt/app",
            "--version", version, *extra]


def spawn(host_root, *arguments, env=None):
    return RecordedPopen([HOIST_BIN, "--host-root", str(host_root), *map(str, arguments)],
                         env={**ENV, **SANITIZER_ENV, **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)


def with_signal_at(syscall, signame, host_root, *arguments, env=None):
    """hoist under strace, which sends `signame` to it when it first makes `syscall`."""
    if not shutil.which("strace"):
        pytest.skip("needs strace")
    cmd = ["strace", "-f", "-o", "/dev/null", "-e", f"trace={syscall}", "-e",
           f"inject={syscall}:signal={signame}:when=1", HOIST_BIN, "--host-root", str(host_root),
           *map(str, arguments)]
    return run_recorded(cmd, env={**ENV, **SANITIZER_ENV, **(env or {})}, capture_output=True, text=True, timeout=120)


def test_sigterm_while_waiting_for_the_lock_ends_the_wait_at_once(host_root, payloads):
    v1, _ = payloads
    lock_path = host_root / "run/hoist/hoist.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        process = spawn(host_root, "--lock-timeout", "120", "upgrade", *args(v1, "1.0.0"))
        time.sleep(1.0)
        start = time.monotonic()
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
        assert time.monotonic() - start < 5
    assert process.returncode == 1, err
    assert f"failed to lock '{lock_path}': stopped by SIGTERM while waiting for it" in err
    assert not (host_root / "opt/app").exists()


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT"])
def test_a_signal_while_staging_stops_before_the_switch_and_leaves_nothing(host_root, payloads, signame):
    v1, v2 = payloads
    upgrade(host_root, *args(v1, "1.0.0"), check=0)
    # syncfs makes the staged version durable: the signal comes in the middle of staging.
    result = with_signal_at("syncfs", signame, host_root, "upgrade", *args(v2, "1.1.0"))
    assert result.returncode == 1, result
    assert f"stopped by {signame} before switching app" in result.stderr
    app = host_root / "opt/app"
    assert os.readlink(app / "current") == "1.0.0"
    assert sorted(os.listdir(app)) == ["1.0.0", "current"]
    state = state_of(host_root, "app")
    assert state["current"] == "1.0.0"
    assert state["last_result"]["outcome"] == "failed"
    assert state["last_result"]["message"] == f"stopped by {signame} before switching app"
    # The lock is free and the next run finishes the job.
    upgrade(host_root, *args(v2, "1.1.0"), check=0)
    assert os.readlink(app / "current") == "1.1.0"


def test_a_signal_between_two_switches_undoes_the_first(host_root, tmp_path):
    """Two components: SIGTERM as the first one's link is switched stops the run
    before the second's switch, and the first is switched back."""
    import json
    a1 = make_tree(tmp_path / "a1", {"f": "a1\n"}, 1)
    b1 = make_tree(tmp_path / "b1", {"f": "b1\n"}, 1)
    a2 = make_tree(tmp_path / "a2", {"f": "a2\n"}, 2)
    b2 = make_tree(tmp_path / "b2", {"f": "b2\n"}, 2)

    def manifest(a, b, version):
        m = tmp_path / f"manifest-{version}.json"
        m.write_text(json.dumps({"schema": 1, "version": version, "components": [
            {"name": "a", "kind": "tree", "source": str(a), "destination": "/opt/a"},
            {"name": "b", "kind": "tree", "source": str(b), "destination": "/opt/b"}]}))
        return m

    upgrade(host_root, "--manifest", manifest(a1, b1, "1.0.0"), check=0)
    # symlinkat: the first syscall of the first switch (the temporary link).
    result = with_signal_at("symlinkat", "SIGTERM", host_root, "upgrade", "--manifest", manifest(a2, b2, "2.0.0"))
    assert result.returncode == 1, result
    assert "stopped by SIGTERM before switching b" in result.stderr
    assert "a: switched back to 1.0.0" in result.stderr
    assert os.readlink(host_root / "opt/a/current") == "1.0.0"
    assert os.readlink(host_root / "opt/b/current") == "1.0.0"


def test_sigterm_while_a_restart_is_waited_for(host_root, payloads, system_bus):
    v1, _ = payloads
    system_bus.start("systemd_manager", delays={"slow.service": -1})
    process = spawn(host_root, "upgrade", *args(v1, "1.0.0", "--restart", "slow"))
    deadline = time.monotonic() + 20
    while not os.path.exists(host_root / "opt/app/current") and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 1, err
    assert "stopped by SIGTERM before the restart of slow.service finished" in err
    # The switch stands; the state says the restart did not finish.
    state = state_of(host_root, "app")
    assert state["current"] == "1.0.0" and state["last_result"]["outcome"] == "failed"
    # The lock was released.
    with open(host_root / "run/hoist/hoist.lock") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_sigterm_with_a_remount_puts_the_mount_back(tmp_path, payloads):
    if os.geteuid() != 0 or not shutil.which("strace") or not shutil.which("unshare"):
        pytest.skip("needs root, strace and unshare")
    _, v2 = payloads
    host = tmp_path / "host"
    for d in ["run", "etc", "opt", "var/lib"]:
        (host / d).mkdir(parents=True)
    image = tmp_path / "opt.img"
    subprocess.run(["truncate", "-s", "16M", str(image)], check=True)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True, capture_output=True)
    script = textwrap.dedent(f"""
        mount -o loop {image} {host}/opt && mount -o remount,ro {host}/opt
        export HOIST_HOST_MOUNT_NAMESPACE=/proc/self/ns/mnt
        set +e
        strace -f -o /dev/null -e trace=syncfs -e inject=syncfs:signal=SIGTERM:when=1 \\
            {HOIST_BIN} --host-root {host} upgrade {' '.join(args(v2, '1.1.0', '--remount'))}
        echo "exit=$?"
        grep " {host}/opt " /proc/self/mountinfo
        ls -A {host}/opt
    """)
    result = run_recorded(["unshare", "-m", "--propagation", "private", "bash", "-c", script],
                            capture_output=True, text=True, timeout=120)
    assert "exit=1" in result.stdout, result
    assert "stopped by SIGTERM before switching app" in result.stderr
    assert "is read-only again" in result.stderr
    line = [l for l in result.stdout.splitlines() if f" {host}/opt " in l][0]
    assert line.split()[5].startswith("ro")
