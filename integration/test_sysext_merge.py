"""A refreshed sysext is merged, or it is switched back: after the refresh, hoist looks in the host's mount
namespace for the extension's release file under /usr/lib/extension-release.d (the `sysext:DEST` check every sysext
switch owes). The systemd double's reload of systemd-sysext.service lets the real systemd-sysext 252 decide what it
merges and shows that in the host root's /usr (dbus_mocks/systemd_manager.py, refresh_sysext()); an image that only
matches the host through ID_LIKE passes hoist's own check and is skipped by systemd 252, which compares ID only."""

import json
import os
import shutil
import signal
import subprocess
import time

import pytest

from dbus_harness import system_bus  # noqa: F401 (a fixture)
from conftest import run_hoist, run_status
from payloads import state_of, upgrade
from test_restart_reboot import finish, spawn
from test_sysext import extension_tree, needs_loop, squashfs, sysext_args

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("systemd-sysext") or not shutil.which("unshare"),
    reason="needs root, systemd-sysext and unshare (the double merges with the real systemd-sysext)")

DEST = "/etc/extensions/tools"
LINK = "etc/extensions/tools"
MERGED = "usr/lib/extension-release.d/extension-release.tools"
# hoist runs in the test's own mount namespace, where the double's merge shows under the host root.
OWN = {"HOIST_HOST_MOUNT_NAMESPACE": "/proc/self/ns/mnt"}
# A host whose ID is not debian, but like it: systemd 252 merges only images of its own ID.
UBUNTU = "ID=ubuntu\nID_LIKE=debian\nVERSION_ID=12\n"


def release(version, os_id="debian"):
    return f"ID={os_id}\nVERSION_ID=12\nSYSEXT_VERSION_ID={version}\n"


def tree(tmp_path, version, os_id="debian"):
    return extension_tree(tmp_path / f"tools-{version}", release(version, os_id), tool=f"tool {version}\n")


def quarantined(state):
    return {q["version"]: q["reason"] for q in state["quarantined"]}


def test_a_merged_extension_passes_and_each_upgrade_is_checked(host_root, tmp_path, system_bus):
    systemd = system_bus.start("systemd_manager")
    result = upgrade(host_root, *sysext_args(tree(tmp_path, "1.0"), "1.0", DEST), env=OWN, check=0)
    assert (host_root / MERGED).read_text() == release("1.0")
    assert f"health: sysext:{DEST} passed: extension 'tools' (SYSEXT_VERSION_ID=1.0) is merged: " \
           f"'/{MERGED}' under '{host_root}' is its release file" in result.stderr
    result = upgrade(host_root, *sysext_args(tree(tmp_path, "1.1"), "1.1", DEST), env=OWN, check=0)
    assert "extension 'tools' (SYSEXT_VERSION_ID=1.1) is merged" in result.stderr
    assert (host_root / MERGED).read_text() == release("1.1")
    state = state_of(host_root, "tools")
    assert state["current"] == "1.1" and state["owed_health_checks"] == []
    assert state["health"]["verdict"] == "passed" and state["health"]["detail"] == f"sysext:{DEST}"
    assert len(systemd.called("ReloadOrRestartUnit")) == 2


def test_a_merged_squashfs_image_passes(host_root, tmp_path, system_bus):
    needs_loop()
    system_bus.start("systemd_manager")
    image = squashfs(tmp_path, "v1", release("1.0"))
    result = upgrade(host_root, *sysext_args(image, "1.0"), env=OWN, check=0)
    assert "health: sysext:/etc/extensions/tools.raw passed: extension 'tools' (SYSEXT_VERSION_ID=1.0) is merged" \
        in result.stderr
    assert (host_root / MERGED).read_text() == release("1.0")


def test_an_extension_systemd_skips_is_switched_back_and_quarantined(host_root, tmp_path, system_bus):
    (host_root / "etc/os-release").write_text(UBUNTU)
    systemd = system_bus.start("systemd_manager")
    upgrade(host_root, *sysext_args(tree(tmp_path, "1.0", "ubuntu"), "1.0", DEST), env=OWN, check=0)
    assert (host_root / MERGED).read_text() == release("1.0", "ubuntu")
    # 1.1 says ID=debian: hoist's check lets it through the host's ID_LIKE, systemd 252 does not merge it.
    result = upgrade(host_root, *sysext_args(tree(tmp_path, "1.1"), "1.1", DEST), env=OWN, check=1)
    why = (f"health check sysext:{DEST} failed: extension 'tools' (SYSEXT_VERSION_ID=1.1) is "
           f"not merged: '/{MERGED}' does not exist under '{host_root}' after the refresh (systemd-sysext skipped "
           "the image)")
    assert f"tools: {why}; switching back to 1.0" in result.stderr
    assert f"{why}; switched back to tools 1.0" in result.stderr
    # Switched back as `hoist rollback` does: the link, a second refresh, the old extension merged again.
    assert os.readlink(host_root / LINK) == "/var/lib/hoist/tools/tools-1.0"
    assert len(systemd.called("ReloadOrRestartUnit")) == 3
    assert (host_root / MERGED).read_text() == release("1.0", "ubuntu")
    state = state_of(host_root, "tools")
    assert state["current"] == "1.0" and state["previous"] == "1.1"
    assert state["owed_health_checks"] == [] and state["owed_restarts"] == []
    assert state["last_result"]["outcome"] == "rolled-back"
    assert state["last_result"]["message"] == why + "; switched back to 1.0"
    assert quarantined(state) == {"1.1": why}
    assert state["health"]["verdict"] == "failed" and state["health"]["version"] == "1.1"
    # The same upgrade again is refused by the quarantine, naming why.
    again = upgrade(host_root, *sysext_args(tree(tmp_path, "1.1"), "1.1", DEST), env=OWN, check=3)
    assert "tools: refusing 1.1: it is quarantined since" in again.stderr and why in again.stderr
    status = json.loads(run_status(host_root, "--json").stdout)
    assert status["components"][0]["quarantined"][0]["reason"] == why


def test_a_first_install_that_does_not_merge_leaves_no_extension_linked(host_root, tmp_path, system_bus):
    (host_root / "etc/os-release").write_text(UBUNTU)
    systemd = system_bus.start("systemd_manager")
    result = upgrade(host_root, *sysext_args(tree(tmp_path, "1.0"), "1.0", DEST), env=OWN, check=1)
    why = f"health check sysext:{DEST} failed: extension 'tools' (SYSEXT_VERSION_ID=1.0) is " \
          "not merged"
    assert why in result.stderr
    assert "withdrew tools 1.0, which had no previous version" in result.stderr
    assert not os.path.lexists(host_root / LINK)
    assert not (host_root / MERGED).exists()
    # Refreshed again once the link was gone: nothing of it stays merged on the next boot either.
    assert len(systemd.called("ReloadOrRestartUnit")) == 2
    state = state_of(host_root, "tools")
    assert state["current"] == "" and state["owed_health_checks"] == [] and state["owed_restarts"] == []
    assert state["last_result"]["outcome"] == "rolled-back"
    assert "1.0" in quarantined(state) and why in quarantined(state)["1.0"]
    upgrade(host_root, *sysext_args(tree(tmp_path, "1.0"), "1.0", DEST), env=OWN, check=3)
    assert not os.path.lexists(host_root / LINK)


def test_a_run_killed_before_the_check_leaves_it_owed_to_the_next_run(host_root, tmp_path, system_bus):
    (host_root / "etc/os-release").write_text(UBUNTU)
    # Each refresh's job ends 2 s after it was queued: time to kill hoist while it waits for it.
    systemd = system_bus.start("systemd_manager", delays={"systemd-sysext.service": 2000})
    upgrade(host_root, *sysext_args(tree(tmp_path, "1.0", "ubuntu"), "1.0", DEST), env=OWN, check=0)
    process = spawn(host_root, "--lock-timeout", "5", *sysext_args(tree(tmp_path, "1.1"), "1.1", DEST), env=OWN)
    systemd.wait_for_call('ReloadOrRestartUnit "systemd-sysext.service" "replace"')
    while len(systemd.called("ReloadOrRestartUnit")) < 2:
        assert process.poll() is None, finish(process)
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    code, _, _ = finish(process)
    assert code == -signal.SIGKILL
    state = state_of(host_root, "tools")
    assert state["current"] == "1.1" and state["owed_health_checks"] == [f"sysext:{DEST}"]
    # SUC's next pod, the same command: nothing to install, the refresh and the check still owed; it fails.
    result = upgrade(host_root, *sysext_args(tree(tmp_path, "1.1"), "1.1", DEST), env=OWN, check=1)
    assert f"health check sysext:{DEST} failed: extension 'tools' (SYSEXT_VERSION_ID=1.1) is not merged" \
        in result.stderr
    assert os.readlink(host_root / LINK) == "/var/lib/hoist/tools/tools-1.0"
    assert (host_root / MERGED).read_text() == release("1.0", "ubuntu")
    assert "1.1" in quarantined(state_of(host_root, "tools"))


def test_the_check_reads_the_host_s_mount_namespace(host_root, tmp_path, system_bus):
    # A namespace whose root is the host root, as the host's is for a hostPID pod: hoist's helper enters it.
    system_bus.start("systemd_manager")
    script = 'mount --bind "$1" "$1" && cd "$1" && mkdir -p .old && pivot_root . .old && echo "$$" && read x'
    holder = subprocess.Popen(["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh",
                               str(host_root)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        pid = holder.stdout.readline().strip()
        assert pid.isdigit(), "the namespace holder did not start"
        env = {"HOIST_HOST_MOUNT_NAMESPACE": f"/proc/{pid}/ns/mnt"}
        result = upgrade(host_root, *sysext_args(tree(tmp_path, "1.0"), "1.0", DEST), env=env, check=0)
        assert f"'/{MERGED}' in the host's mount namespace is its release file" in result.stderr
        (host_root / MERGED).unlink()  # what a refresh that skipped it would leave
        result = upgrade(host_root, *sysext_args(tree(tmp_path, "1.0"), "1.0", DEST), env=env, check=0)
        assert "nothing to do" in result.stderr  # checked once, with its switch: not again
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)


def test_a_dry_run_lists_the_check(host_root, tmp_path, system_bus):
    result = upgrade(host_root, *sysext_args(tree(tmp_path, "1.0"), "1.0", DEST, "--dry-run"), check=0)
    assert f"tools: then health checks: sysext:{DEST} (units up 30s, at most 300s)" in result.stdout
    assert not os.path.lexists(host_root / LINK)
