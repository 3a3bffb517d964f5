"""--remount on real read-only mounts, in private mount namespaces (`unshare
-m`) so that nothing leaks to the machine: a loop-mounted ext4 image mounted
read-only (the filesystem itself read-only), a read-only bind mount of a
writable directory (only the mount point), a squashfs (cannot be written), and
the SUC shape: a "host" mount namespace with the read-only mount and a "pod"
namespace that sees it through a recursive bind at /host, where hoist must
remount in the host's namespace (setns in a helper) and in its own copy.

Needs root, util-linux's unshare, losetup and mkfs.ext4 (and mksquashfs)."""

import json
import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from conftest import HOIST_BIN, RecordedPopen, run_recorded

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("mkfs.ext4"),
                                reason="needs root, unshare and mkfs.ext4")

PYTHON = "/usr/bin/python3"


def make_ext4(path, size_mb=16, seed=None):
    subprocess.run(["truncate", "-s", f"{size_mb}M", str(path)], check=True)
    cmd = ["mkfs.ext4", "-q", "-F", "-E", "root_owner=0:0"]
    if seed:
        cmd += ["-d", str(seed)]
    subprocess.run(cmd + [str(path)], check=True, capture_output=True)
    return path


def in_namespace(script, timeout=120):
    """Runs a bash script in a private mount namespace; returns the result (kept for the log audit)."""
    return run_recorded(["unshare", "-m", "--propagation", "private", "bash", "-euo", "pipefail", "-c", script],
                        capture_output=True, text=True, timeout=timeout)


def host_skeleton(root):
    for d in ["run", "etc", "opt", "var/lib", "proc/sys/kernel/random"]:
        (root / d).mkdir(parents=True, exist_ok=True)
    (root / "etc/os-release").write_text("ID=debian\nVERSION_ID=12\n")
    (root / "proc/sys/kernel/random/boot_id").write_text("11111111-2222-4333-8444-555555555555\n")


def hoist_cmd(host_root, *args):
    return " ".join([HOIST_BIN, "--host-root", str(host_root), *map(str, args)])


def mount_options(mountinfo_text, target):
    """(per-mount options, superblock options) of `target` in a mountinfo text (the last mount there)."""
    found = None
    for line in mountinfo_text.splitlines():
        fields = line.split()
        if len(fields) > 4 and fields[4] == str(target):
            sep = fields.index("-")
            found = (fields[5], fields[sep + 3])
    assert found, f"{target} not mounted:\n{mountinfo_text}"
    return found


@pytest.fixture
def payload(tmp_path):
    p = tmp_path / "payload"
    (p / "bin").mkdir(parents=True)
    (p / "bin/app").write_text("new\n")
    return p


def test_a_read_only_filesystem_is_made_writable_and_put_back(tmp_path, payload):
    host = tmp_path / "host"
    host_skeleton(host)
    image = make_ext4(tmp_path / "opt.img")
    script = textwrap.dedent(f"""
        mount -o loop {image} {host}/opt && mount -o remount,ro {host}/opt
        export HOIST_HOST_MOUNT_NAMESPACE=/proc/self/ns/mnt
        {hoist_cmd(host, "upgrade", "--component", "app", "--kind", "tree", "--source", payload,
                   "--destination", "/opt/app", "--version", "1.0.0", "--remount")}
        cat {host}/opt/app/current/bin/app
        grep " {host}/opt " /proc/self/mountinfo
        touch {host}/opt/after 2>/dev/null && echo WRITABLE || echo READONLY
    """)
    result = in_namespace(script)
    assert result.returncode == 0, result
    assert "new\n" in result.stdout
    assert "READONLY" in result.stdout
    per_mount, superblock = mount_options(result.stdout, host / "opt")
    assert per_mount.startswith("ro") and superblock.startswith("ro")
    assert "is this process's own mount namespace" in result.stderr
    assert f"remount: made '{host}/opt' (ext4 on /dev/loop" in result.stderr
    assert "the filesystem itself was read-only and is remounted read-write" in result.stderr
    assert "is read-only again in this process's mount namespace" in result.stderr


def test_a_read_only_bind_mount_is_remounted_as_that_mount_point_only(tmp_path, payload):
    host = tmp_path / "host"
    host_skeleton(host)
    (tmp_path / "backing").mkdir()
    script = textwrap.dedent(f"""
        mount --bind {tmp_path}/backing {host}/opt
        mount -o remount,bind,ro,nosuid,nodev {host}/opt
        export HOIST_HOST_MOUNT_NAMESPACE=/proc/self/ns/mnt
        {hoist_cmd(host, "upgrade", "--component", "app", "--kind", "tree", "--source", payload,
                   "--destination", "/opt/app", "--version", "1.0.0", "--remount")}
        grep " {host}/opt " /proc/self/mountinfo
    """)
    result = in_namespace(script)
    assert result.returncode == 0, result
    per_mount, superblock = mount_options(result.stdout, host / "opt")
    # Read-only again, and its other flags kept.
    assert per_mount.split(",")[:3] == ["ro", "nosuid", "nodev"], per_mount
    assert superblock.startswith("rw")
    assert "(this mount point only)" in result.stderr
    assert (tmp_path / "backing/app/current/bin/app").read_text() == "new\n"


def test_a_failed_run_puts_the_mount_back_too(tmp_path):
    host = tmp_path / "host"
    host_skeleton(host)
    image = make_ext4(tmp_path / "opt.img", size_mb=4)
    big = tmp_path / "big"
    (big / "bin").mkdir(parents=True)
    (big / "bin/app").write_bytes(os.urandom(8 << 20))  # more than the filesystem holds
    script = textwrap.dedent(f"""
        mount -o loop {image} {host}/opt && mount -o remount,ro {host}/opt
        export HOIST_HOST_MOUNT_NAMESPACE=/proc/self/ns/mnt
        set +e
        {hoist_cmd(host, "upgrade", "--component", "app", "--kind", "tree", "--source", big,
                   "--destination", "/opt/app", "--version", "1.0.0", "--remount")}
        echo "exit=$?"
        grep " {host}/opt " /proc/self/mountinfo
        ls -A {host}/opt/app
    """)
    result = in_namespace(script)
    assert "exit=1" in result.stdout, result
    assert "No space left on device" in result.stderr
    per_mount, superblock = mount_options(result.stdout, host / "opt")
    assert per_mount.startswith("ro") and superblock.startswith("ro")
    assert "is read-only again" in result.stderr


def test_a_squashfs_cannot_be_made_writable(tmp_path, payload):
    if not shutil.which("mksquashfs"):
        pytest.skip("needs mksquashfs")
    host = tmp_path / "host"
    host_skeleton(host)
    (tmp_path / "seed").mkdir()
    subprocess.run(["mksquashfs", str(tmp_path / "seed"), str(tmp_path / "opt.sqfs"), "-quiet", "-noappend"],
                   check=True, capture_output=True)
    script = textwrap.dedent(f"""
        mount -o loop {tmp_path}/opt.sqfs {host}/opt
        export HOIST_HOST_MOUNT_NAMESPACE=/proc/self/ns/mnt
        set +e
        {hoist_cmd(host, "upgrade", "--component", "app", "--kind", "tree", "--source", payload,
                   "--destination", "/opt/app", "--version", "1.0.0", "--remount")}
        echo "exit=$?"
        grep " {host}/opt " /proc/self/mountinfo
    """)
    result = in_namespace(script)
    assert "exit=1" in result.stdout, result
    assert f"failed to make '{host}/opt' (squashfs on /dev/loop" in result.stderr
    assert "it is still read-only after the remount (squashfs cannot be written)" in result.stderr
    per_mount, _ = mount_options(result.stdout, host / "opt")
    assert per_mount.startswith("ro")


def test_an_unreadable_host_namespace_falls_back_to_our_own_and_says_so(tmp_path, payload):
    host = tmp_path / "host"
    host_skeleton(host)
    image = make_ext4(tmp_path / "opt.img")
    script = textwrap.dedent(f"""
        mount -o loop {image} {host}/opt && mount -o remount,ro {host}/opt
        export HOIST_HOST_MOUNT_NAMESPACE=/nonexistent/ns/mnt
        {hoist_cmd(host, "upgrade", "--component", "app", "--kind", "tree", "--source", payload,
                   "--destination", "/opt/app", "--version", "1.0.0", "--remount")}
    """)
    result = in_namespace(script)
    assert result.returncode == 0, result
    assert "remount: cannot open the host's mount namespace (failed to open mount namespace " \
           "'/nonexistent/ns/mnt': No such file or directory); remounting in this process's own mount namespace" \
        in result.stderr


# The SUC shape: a host namespace and a pod namespace.

HOST_INIT = r"""
import ctypes, os, sys, time
root = sys.argv[1]
libc = ctypes.CDLL(None, use_errno=True)
number = {"x86_64": 155, "aarch64": 41}[os.uname().machine]
os.chdir(root)
os.makedirs(".old", exist_ok=True)
if libc.syscall(number, b".", b".old") != 0:
    sys.exit("pivot_root: " + os.strerror(ctypes.get_errno()))
os.chdir("/")
# A host has procfs at /proc (hoist's helper remounts through /proc/self/fd).
os.makedirs("/proc", exist_ok=True)
if libc.mount(b"proc", b"/proc", b"proc", 0, None) != 0:
    sys.exit("mount /proc: " + os.strerror(ctypes.get_errno()))
# A mount that only the host has: made after the pod's namespace was copied.
if libc.mount(b"none", b"/srv", b"tmpfs", 0, None) != 0:
    sys.exit("mount /srv: " + os.strerror(ctypes.get_errno()))
print("ready", flush=True)
time.sleep(3600)
"""


class HostNamespace:
    """A process whose mount namespace plays the host's: its root is `root`
    (pivot_root), with /opt a read-only ext4 and /srv a tmpfs of its own."""

    def __init__(self, root):
        self.process = subprocess.Popen(["unshare", "-m", "--propagation", "private", PYTHON, "-c", HOST_INIT,
                                         str(root)], stdout=subprocess.PIPE, text=True)
        line = self.process.stdout.readline()
        assert line.strip() == "ready", line
        self.pid = self.process.pid
        # unshare execs python: the pid is the namespace's process.

    def mountinfo(self):
        return Path(f"/proc/{self.pid}/mountinfo").read_text()

    def stop(self):
        self.process.kill()
        self.process.wait()


def test_in_a_pod_the_remount_happens_in_the_hosts_namespace_and_in_the_pods_copy(tmp_path, payload):
    work = tmp_path
    hostfs = work / "hostfs"
    host_skeleton(hostfs)
    (hostfs / "srv").mkdir()
    image = make_ext4(work / "opt.img")
    pod_root = work / "pod"
    (pod_root / "host").mkdir(parents=True)
    # Everything happens inside one private namespace of the test.
    # Its output carries hoist's (in the report), which communicate() keeps for the log audit.
    outer = RecordedPopen(["unshare", "-m", "--propagation", "private", PYTHON, "-c", textwrap.dedent(f"""
        import subprocess, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        subprocess.run(["mount", "--bind", {str(hostfs)!r}, {str(hostfs)!r}], check=True)
        subprocess.run(["mount", "-o", "loop", {str(image)!r}, {str(hostfs / 'opt')!r}], check=True)
        subprocess.run(["mount", "-o", "remount,ro", {str(hostfs / 'opt')!r}], check=True)
        import test_remount
        test_remount._pod_scenario({str(hostfs)!r}, {str(pod_root)!r}, {str(payload)!r})
    """)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = outer.communicate(timeout=180)
    assert outer.returncode == 0, out + err
    report = json.loads(out.strip().splitlines()[-1])
    upgrade, refused = report["upgrade"], report["refused"]
    assert upgrade["code"] == 0, upgrade["stderr"]
    assert "remount: entering the host's mount namespace" in upgrade["stderr"]
    assert "writable in the host's mount namespace" in upgrade["stderr"]
    assert "writable in this process's mount namespace" in upgrade["stderr"]
    assert "the filesystem itself was read-only" in upgrade["stderr"]
    # In the host's namespace: the files, and the mount read-only again.
    assert report["host_file"] == "new\n"
    assert report["host_opt"][0].startswith("ro") and report["host_opt"][1].startswith("ro")
    # The pod's copy was put back too (checked before the pod's namespace ended).
    assert report["pod_opt"][0].startswith("ro")
    # A host mount the pod cannot see is refused, not written around.
    assert refused["code"] == 1, refused
    assert "this mount namespace does not see that mount" in refused["stderr"]
    assert report["srv_entries"] == []


def _read_or_none(path):
    try:
        return path.read_text()
    except OSError:
        return None


def _pod_scenario(hostfs, pod_root, payload):
    """Runs inside the test's private namespace (see above); prints a JSON report."""
    host = HostNamespace(hostfs)
    try:
        def pod(*args):
            script = textwrap.dedent(f"""
                mount --rbind {hostfs} {pod_root}/host
                export HOIST_HOST_MOUNT_NAMESPACE=/proc/{host.pid}/ns/mnt
                set +e
                {hoist_cmd(pod_root + "/host", *args)}
                echo "exit=$?"
                grep " {pod_root}/host/opt " /proc/self/mountinfo
            """)
            r = in_namespace(script)
            code = int([l for l in r.stdout.splitlines() if l.startswith("exit=")][0][5:])
            return {"code": code, "stderr": r.stderr, "stdout": r.stdout}

        upgrade = pod("upgrade", "--component", "app", "--kind", "tree", "--source", payload,
                      "--destination", "/opt/app", "--version", "1.0.0", "--remount")
        refused = pod("upgrade", "--component", "srv", "--kind", "tree", "--source", payload,
                      "--destination", "/srv/app", "--version", "1.0.0", "--remount")
        pod_opt = mount_options(upgrade["stdout"], Path(pod_root) / "host/opt") if upgrade["code"] == 0 else ["?"]
        report = {
            "upgrade": upgrade, "refused": refused,
            "host_file": _read_or_none(Path(f"/proc/{host.pid}/root/opt/app/current/bin/app")),
            "host_opt": mount_options(host.mountinfo(), "/opt"),
            "pod_opt": pod_opt,
            "srv_entries": sorted(os.listdir(f"/proc/{host.pid}/root/srv")),
        }
        print(json.dumps(report))
    finally:
        host.stop()


def test_a_switch_back_after_failed_health_checks_remounts_again(tmp_path, payload):
    # after_switch() puts the mount back read-only before the checks; the switch back must make it writable again
    host = tmp_path / "host"
    host_skeleton(host)
    (tmp_path / "backing").mkdir()
    v2 = tmp_path / "v2"
    (v2 / "bin").mkdir(parents=True)
    (v2 / "bin/app").write_text("broken\n")
    common = ["--component", "app", "--kind", "tree", "--destination", "/opt/app", "--remount"]
    script = textwrap.dedent(f"""
        mount --bind {tmp_path}/backing {host}/opt
        mount -o remount,bind,ro {host}/opt
        export HOIST_HOST_MOUNT_NAMESPACE=/proc/self/ns/mnt
        {hoist_cmd(host, "upgrade", *common, "--source", payload, "--version", "1.0.0")}
        {hoist_cmd(host, "upgrade", *common, "--source", v2, "--version", "2.0.0",
                   "--health-check", "http:http://127.0.0.1:1/", "--health-timeout", "1")} && exit 9 || echo "rc=$?"
        readlink {host}/opt/app/current
        grep " {host}/opt " /proc/self/mountinfo
    """)
    result = in_namespace(script)
    assert result.returncode == 0, result
    assert "rc=1\n1.0.0\n" in result.stdout, result
    assert "switching back to 1.0.0" in result.stderr
    assert "app: rolled back from 2.0.0 to 1.0.0" in result.stderr
    per_mount, _ = mount_options(result.stdout, host / "opt")
    assert per_mount.startswith("ro"), per_mount


@pytest.mark.skipif(not shutil.which("strace"), reason="strace is not installed (it injects the failed remount)")
@pytest.mark.parametrize("shape", ["filesystem", "bind"])
def test_a_mount_not_put_back_read_only_after_the_switch_goes_back_and_is_put_back(tmp_path, payload, shape):
    # The kernel refuses to make a filesystem read-only (EBUSY) while a file on it is open for writing; strace makes
    # the remount after the switch meet that refusal, at that call only.
    host = tmp_path / "host"
    host_skeleton(host)
    v2 = tmp_path / "v2"
    (v2 / "bin").mkdir(parents=True)
    (v2 / "bin/app").write_text("two\n")
    if shape == "filesystem":
        setup = f"mount -o loop {make_ext4(tmp_path / 'opt.img')} {host}/opt && mount -o remount,ro {host}/opt"
    else:
        (tmp_path / "backing").mkdir()
        setup = f"mount --bind {tmp_path}/backing {host}/opt && mount -o remount,bind,ro,nosuid,nodev {host}/opt"
    common = ["--component", "app", "--kind", "tree", "--destination", "/opt/app", "--remount"]
    script = textwrap.dedent(f"""
        {setup}
        grep " {host}/opt " /proc/self/mountinfo
        export HOIST_HOST_MOUNT_NAMESPACE=/proc/self/ns/mnt
        {hoist_cmd(host, "upgrade", *common, "--source", payload, "--version", "1.0.0")}
        set +e
        strace -f -qq -o {tmp_path}/strace.log -e trace=mount -e inject=mount:error=EBUSY:when=2 \\
            {hoist_cmd(host, "upgrade", *common, "--source", v2, "--version", "2.0.0")}
        echo "exit=$?"
        readlink {host}/opt/app/current
        cat {host}/opt/app/current/bin/app
        grep " {host}/opt " /proc/self/mountinfo
    """)
    result = in_namespace(script)
    assert "exit=1\n1.0.0\nnew\n" in result.stdout, result
    injected = [line for line in (tmp_path / "strace.log").read_text().splitlines() if "INJECTED" in line]
    assert len(injected) == 1 and "MS_RDONLY" in injected[0], injected
    assert "failed to put a mount back read-only" in result.stderr
    assert "Device or resource busy; switching back to 1.0.0" in result.stderr
    assert "app: rolled back from 2.0.0 to 1.0.0" in result.stderr
    assert "is still writable in this process's mount namespace since it could not be put back" in result.stderr
    # Read-only again, as before the run, with its other flags.
    before, after = [line for line in result.stdout.splitlines() if f" {host}/opt " in line]
    assert before.split()[5] == after.split()[5], (before, after)
    assert after.split()[-1].split(",")[0] == before.split()[-1].split(",")[0]
    state = json.loads((host / "var/lib/hoist/app/state.json").read_text())
    assert state["current"] == "1.0.0"
    assert state["last_result"]["outcome"] == "rolled-back"
    assert state["quarantined"] == []  # nothing ran on 2.0.0: it may be tried again
