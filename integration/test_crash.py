"""Crash consistency: SIGKILL at many points of an upgrade (strace's fault
injection kills the process when it enters the N-th call of a syscall), then
check the invariant: `current` names a complete version, exactly v1's or v2's
tree; and a re-run finishes the upgrade and leaves nothing behind."""

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import HOIST_BIN, record_output, run_recorded
from payloads import host_read, make_tree, read_tree, rollback, state_of, upgrade

STRACE = shutil.which("strace")
pytestmark = pytest.mark.skipif(STRACE is None, reason="strace is not installed")

# Every syscall by which hoist (and the transfer engine) changes a filesystem.
WRITING = ["openat", "mkdirat", "mkdir", "write", "pwrite64", "renameat", "renameat2", "rename", "symlinkat",
           "symlink", "linkat", "link", "unlinkat", "unlink", "rmdir", "fsync", "fdatasync", "syncfs", "fchmod",
           "fchmodat", "fchown", "fchownat", "utimensat", "copy_file_range", "sendfile", "ioctl", "ftruncate",
           "fsetxattr", "lsetxattr", "setxattr"]


def hoist_argv(host_root, *args):
    return [HOIST_BIN, "upgrade", "--host-root", str(host_root), "--lock-timeout", "5", *map(str, args)]


def syscall_sequence(host_root, args, tmp_path):
    """The writing syscalls of one run, in order: [(name, occurrence)]."""
    log = tmp_path / "strace.log"
    run_recorded([STRACE, "-f", "-qq", "-o", str(log), "-e", "trace=" + ",".join(WRITING),
                    *hoist_argv(host_root, *args)], check=True, capture_output=True)
    counts = {}
    sequence = []
    for line in log.read_text().splitlines():
        match = re.match(r"^(?:\d+\s+)?(\w+)\(", line)
        if not match or "resumed>" in line:
            continue
        name = match.group(1)
        if name not in WRITING:
            continue  # strace shows the calls it has no name for (syscall_0x1d1: listxattrat) whatever it traces
        counts[name] = counts.get(name, 0) + 1
        sequence.append((name, counts[name]))
    return sequence


def kill_at(host_root, args, name, occurrence):
    """Runs the upgrade, SIGKILLed when it enters the `occurrence`-th `name`."""
    return run_recorded([STRACE, "-f", "-qq", "-o", "/dev/null", "-e", f"trace={name}",
                           "-e", f"inject={name}:signal=KILL:when={occurrence}", *hoist_argv(host_root, *args)],
                          capture_output=True, text=True, timeout=60)


def spread(sequence, count):
    """`count` points spread evenly over the sequence (all of them if fewer)."""
    if len(sequence) <= count:
        return sequence
    step = len(sequence) / count
    return [sequence[int(i * step)] for i in range(count)]


def restore(host_root, pristine):
    """The host root back to the copy taken before the kills."""
    shutil.rmtree(host_root)
    shutil.copytree(pristine, host_root, symlinks=True)


def leftovers(directory):
    return sorted(p.name for p in Path(directory).iterdir() if p.name.startswith("."))


@pytest.fixture
def trees(tmp_path):
    v1 = make_tree(tmp_path / "v1", {f"dir{i % 4}/file{i}": f"v1 content {i}\n" * (i + 1) for i in range(24)}, 1)
    v2 = make_tree(tmp_path / "v2", {**{f"dir{i % 4}/file{i}": f"v2 content {i}!\n" * (i + 1) for i in range(0, 24, 2)},
                                     **{f"new/file{i}": f"new {i}\n" for i in range(6)}}, 2)
    return v1, v2


def test_sigkill_at_any_point_of_a_tree_upgrade_leaves_a_complete_current_version(host_root, trees, tmp_path):
    v1, v2 = trees
    base = ["--component", "app", "--kind", "tree", "--destination", "/opt/app", "--threads", "1"]
    v1_args = [*base, "--source", v1, "--version", "1.0.0"]
    v2_args = [*base, "--source", v2, "--version", "2.0.0"]
    expected = {"1.0.0": read_tree(v1), "2.0.0": read_tree(v2)}

    pristine = tmp_path / "pristine"
    upgrade(host_root, *v1_args, check=0)
    shutil.copytree(host_root, pristine, symlinks=True)
    sequence = syscall_sequence(host_root, v2_args, tmp_path)
    points = spread(sequence, 60)
    assert len(points) >= 50, f"only {len(points)} writing syscalls: {sequence}"

    outcomes = {"1.0.0": 0, "2.0.0": 0}
    for name, occurrence in points:
        restore(host_root, pristine)
        killed = kill_at(host_root, v2_args, name, occurrence)
        where = f"killed at {name} #{occurrence}: rc={killed.returncode} {killed.stderr[-300:]}"
        # strace counts a syscall's calls per thread: on one thread the N-th call is the N-th of the run.
        assert killed.returncode == -signal.SIGKILL, where
        app = host_root / "opt/app"
        current = os.readlink(app / "current")
        assert current in expected, where
        assert read_tree(app / current) == expected[current], where
        if (app / "previous").is_symlink():
            assert read_tree(app / os.readlink(app / "previous")) == expected[os.readlink(app / "previous")], where
        state_of(host_root, "app")  # always parseable
        outcomes[current] += 1

        upgrade(host_root, *v2_args, check=0)
        assert os.readlink(app / "current") == "2.0.0", where
        assert read_tree(app / "2.0.0") == expected["2.0.0"], where
        assert leftovers(app) == [], where
        assert sorted(p.name for p in app.iterdir()) == ["1.0.0", "2.0.0", "current", "previous"], where
        state = state_of(host_root, "app")
        assert (state["current"], state["previous"]) == ("2.0.0", "1.0.0"), where
    # The kills fell both before and after the switch.
    assert outcomes["1.0.0"] > 0 and outcomes["2.0.0"] > 0, outcomes


def test_sigkill_at_any_instant_of_an_upgrade_on_the_thread_pool_leaves_a_complete_current_version(host_root, tmp_path):
    # The syscall-counted kills above run on one thread. These run on the default pool, where the staging writes
    # come from several threads at once: SIGKILL after a delay spread over the run's measured length.
    v1 = make_tree(tmp_path / "v1", {f"d{i % 30}/f{i}": f"v1 {i}\n" * (i % 50 + 1) for i in range(1500)}, 1)
    v2 = make_tree(tmp_path / "v2", {**{f"d{i % 30}/f{i}": f"v2 {i}\n" * (i % 70 + 1) for i in range(0, 1500, 2)},
                                     **{f"new{i % 10}/g{i}": f"new {i}\n" for i in range(300)}}, 2)
    base = ["--component", "app", "--kind", "tree", "--destination", "/opt/app"]
    v2_args = [*base, "--source", v2, "--version", "2.0.0"]
    expected = {"1.0.0": read_tree(v1), "2.0.0": read_tree(v2)}
    upgrade(host_root, *base, "--source", v1, "--version", "1.0.0", check=0)
    pristine = tmp_path / "pristine"
    shutil.copytree(host_root, pristine, symlinks=True)

    start = time.monotonic()
    upgrade(host_root, *v2_args, check=0)
    length = time.monotonic() - start
    killed = 0
    for i in range(30):
        restore(host_root, pristine)
        proc = subprocess.Popen(hoist_argv(host_root, *v2_args), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(length * (i + 0.5) / 30)
        proc.send_signal(signal.SIGKILL)
        _, stderr = proc.communicate(timeout=60)
        record_output(proc.args, "", stderr.decode(errors="replace"))
        killed += proc.returncode == -signal.SIGKILL
        where = f"killed after {length * (i + 0.5) / 30:.3f} s of {length:.3f} (rc={proc.returncode})"
        app = host_root / "opt/app"
        current = os.readlink(app / "current")
        assert current in expected, where
        assert read_tree(app / current) == expected[current], where
        state_of(host_root, "app")  # always parseable
        upgrade(host_root, *v2_args, check=0)
        assert os.readlink(app / "current") == "2.0.0", where
        assert read_tree(app / "2.0.0") == expected["2.0.0"], where
        assert leftovers(app) == [], where
    # Most delays fall inside the run (a run's length varies, so not all of them).
    assert killed >= 15, killed


def test_sigkill_during_a_file_upgrade_leaves_the_destination_whole(host_root, tmp_path):
    old = tmp_path / "old/k3s"
    new = tmp_path / "new/k3s"
    old.parent.mkdir()
    new.parent.mkdir()
    old.write_bytes(b"old binary\n" * 1000)
    new.write_bytes(b"new binary\n" * 3000)
    base = ["--component", "k3s", "--kind", "file", "--destination", "/usr/local/bin/k3s", "--threads", "1"]
    (host_root / "usr/local/bin").mkdir(parents=True)
    (host_root / "usr/local/bin/k3s").write_bytes(b"installer's binary\n")
    pristine = tmp_path / "pristine"
    shutil.copytree(host_root, pristine, symlinks=True)
    args = [*base, "--source", new, "--version", "2.0.0"]
    points = spread(syscall_sequence(host_root, args, tmp_path), 30)
    valid = {b"installer's binary\n", new.read_bytes()}
    for name, occurrence in points:
        restore(host_root, pristine)
        killed = kill_at(host_root, args, name, occurrence)
        where = f"killed at {name} #{occurrence}: rc={killed.returncode} {killed.stderr[-300:]}"
        assert killed.returncode == -signal.SIGKILL, where
        assert host_read(host_root, "/usr/local/bin/k3s") in valid, where
        upgrade(host_root, *args, check=0)
        assert host_read(host_root, "/usr/local/bin/k3s") == new.read_bytes(), where
        assert leftovers(host_root / "var/lib/hoist/k3s") == [], where
        assert leftovers(host_root / "usr/local/bin") == [], where
        rollback(host_root, "--component", "k3s", check=0)
        assert host_read(host_root, "/usr/local/bin/k3s") == b"installer's binary\n", where


def test_sigkill_during_a_sync_is_undone_or_finished_by_the_next_run(host_root, trees, tmp_path):
    v1, v2 = trees
    base = ["--component", "conf", "--kind", "sync", "--destination", "/etc/app", "--threads", "1"]
    upgrade(host_root, *base, "--source", v1, "--version", "1.0.0", check=0)
    pristine = tmp_path / "pristine"
    shutil.copytree(host_root, pristine, symlinks=True)
    args = [*base, "--source", v2, "--version", "2.0.0"]
    points = spread(syscall_sequence(host_root, args, tmp_path), 30)
    for name, occurrence in points:
        restore(host_root, pristine)
        killed = kill_at(host_root, args, name, occurrence)
        where = f"killed at {name} #{occurrence}: rc={killed.returncode} {killed.stderr[-300:]}"
        assert killed.returncode == -signal.SIGKILL, where
        upgrade(host_root, *args, check=0)
        assert read_tree(host_root / "etc/app") == read_tree(v2), where
        rollback(host_root, "--component", "conf", check=0)
        assert read_tree(host_root / "etc/app") == read_tree(v1), where
        assert list((host_root / "etc/.app.hoist-sync").iterdir()) == [], where
