"""Crash consistency: SIGKILL at many points of an upgrade (strace's fault
injection kills the process when it enters the N-th call of a syscall), then
check the invariant: `current` names a complete version, exactly v1's or v2's
tree; and a re-run finishes the upgrade and leaves nothing behind."""

import json
import os
import random
import re
import shutil
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest

from conftest import HOIST_BIN, record_output, run_hoist, run_recorded, run_status
from dbus_harness import system_bus  # noqa: F401 (a fixture: the sysext kind's refresh goes to its systemd double)
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


def traced_calls(argv, names, tmp_path):
    """The calls of `names` that one run of `argv` makes, in order: [(name, occurrence, strace's line)]."""
    log = tmp_path / "strace.log"
    run_recorded([STRACE, "-f", "-qq", "-o", str(log), "-e", "trace=" + ",".join(names), *map(str, argv)],
                 check=True, capture_output=True)
    counts = {}
    sequence = []
    for line in log.read_text().splitlines():
        match = re.match(r"^(?:\d+\s+)?(\w+)\(", line)
        if not match or "resumed>" in line:
            continue
        name = match.group(1)
        if name not in names:
            continue  # strace shows the calls it has no name for (syscall_0x1d1: listxattrat) whatever it traces
        counts[name] = counts.get(name, 0) + 1
        sequence.append((name, counts[name], line))
    return sequence


def syscall_sequence(host_root, args, tmp_path):
    """The writing syscalls of one upgrade, in order: [(name, occurrence)]."""
    return [(name, n) for name, n, _ in traced_calls(hoist_argv(host_root, *args), WRITING, tmp_path)]


def kill_command(argv, name, occurrence):
    """Runs `argv`, SIGKILLed when it enters the `occurrence`-th `name`."""
    return run_recorded([STRACE, "-f", "-qq", "-o", "/dev/null", "-e", f"trace={name}",
                         "-e", f"inject={name}:signal=KILL:when={occurrence}", *map(str, argv)],
                        capture_output=True, text=True, timeout=60)


def kill_at(host_root, args, name, occurrence):
    """Runs the upgrade, SIGKILLed when it enters the `occurrence`-th `name`."""
    return kill_command(hoist_argv(host_root, *args), name, occurrence)


def spread(sequence, count):
    """`count` points spread evenly over the sequence (all of them if fewer)."""
    if len(sequence) <= count:
        return sequence
    step = len(sequence) / count
    return [sequence[int(i * step)] for i in range(count)]


def _sockets(directory, names):
    return [name for name in names if stat.S_ISSOCK(os.lstat(os.path.join(directory, name)).st_mode)]


def snapshot(host_root, copy):
    """A copy of the host root for `restore`; sockets (the test's system bus) are not copied."""
    shutil.copytree(host_root, copy, symlinks=True, ignore=_sockets)


def restore(host_root, pristine):
    """The host root back to the copy taken before the kills. The system bus's socket (run/dbus), when a test
    runs one, stays where it is: its daemon and the systemd double live across the kills."""
    bus = Path(host_root) / "run/dbus"
    aside = Path(host_root).parent / ".bus-aside"
    if bus.is_dir():
        os.rename(bus, aside)
    shutil.rmtree(host_root)
    shutil.copytree(pristine, host_root, symlinks=True, ignore=_sockets)
    if aside.is_dir():
        if bus.is_dir():
            shutil.rmtree(bus)
        os.rename(aside, bus)


def leftovers(directory):
    """Names a killed run left in `directory`. `.index` is hoist's own (the file kind's content indexes, one a
    version); a temporary there, or the index of a version not in `directory`, is a leftover."""
    directory = Path(directory)
    left = [p.name for p in directory.iterdir() if p.name.startswith(".") and p.name != ".index"]
    if (directory / ".index").is_dir():
        left += [f".index/{p.name}" for p in (directory / ".index").iterdir()
                 if p.name.startswith(".") or not (directory / p.name).is_dir()]
    return sorted(left)


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
    snapshot(host_root, pristine)
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
    snapshot(host_root, pristine)

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
    snapshot(host_root, pristine)
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
    snapshot(host_root, pristine)
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


# The commit points: every rename an operation makes (a staging, a link, a sync journal name, a state save, a
# removal's rename to trash), read from strace, a SIGKILL at each. After each kill, the three properties.
RENAMES = ["rename", "renameat", "renameat2"]
VERSIONS = ["0.0.0", "1.0.0", "2.0.0", "3.0.0"]


# A sysext directory extension's release file, matching the host root's os-release (conftest's host_root).
SYSEXT_RELEASE = "usr/lib/extension-release.d/extension-release.tools"


class Kind:
    """One kind's component: its arguments, its payloads, and what the host says is current."""

    def __init__(self, kind, tmp_path, files=3):
        self.kind = kind
        self.component = {"tree": "app", "file": "tool", "sync": "conf", "sysext": "tools"}[kind]
        self.destination = {"tree": "/opt/app", "file": "/usr/local/bin/tool", "sync": "/etc/app",
                            "sysext": "/etc/extensions/tools"}[kind]
        self.sources = {}
        self.trees = {}
        for i, version in enumerate(VERSIONS):
            if kind == "file":
                source = tmp_path / "payloads" / version / "tool"
                source.parent.mkdir(parents=True)
                source.write_bytes(f"tool {version}\n".encode() * (i + 1) * files * 200)
            else:
                extension = {SYSEXT_RELEASE: "ID=debian\nVERSION_ID=12\n"} if kind == "sysext" else {}
                source = make_tree(tmp_path / "payloads" / version,
                                   {**{f"d{j % (files // 50 + 2)}/f{j}": f"{version} file {j}\n" * (j % 40 + 1)
                                       for j in range(i, i + files)}, **extension}, i)
                self.trees[version] = read_tree(source)
            self.sources[version] = source

    def args(self, version, *extra, threads=("--threads", "1")):
        return ["--component", self.component, "--kind", self.kind, "--destination", self.destination, *threads,
                "--source", self.sources[version], "--version", version, *extra]

    def host_version(self, host_root):
        """The version the host has by its own commit points; for sync, whose content it holds ("mixed": none)."""
        dest = Path(host_root) / self.destination.lstrip("/")
        if self.kind == "tree":
            return os.readlink(dest / "current")
        if self.kind == "file":
            return Path(os.readlink(dest)).parent.name
        if self.kind == "sysext":
            return Path(os.readlink(dest)).name.removeprefix("tools-")
        tree = read_tree(dest)
        return next((v for v, t in self.trees.items() if t == tree), "mixed")

    def journal(self, host_root):
        backups = Path(host_root) / "etc/.app.hoist-sync"
        return sorted(p.name for p in backups.iterdir()) if backups.is_dir() else []

    def on_disk(self, host_root):
        """The versions the host keeps (sync keeps none: its backups are not versions)."""
        if self.kind == "sync":
            return None
        where = Path(host_root) / ("opt/app" if self.kind == "tree" else f"var/lib/hoist/{self.component}")
        prefix = "tools-" if self.kind == "sysext" else ""
        return sorted(p.name.removeprefix(prefix) for p in where.iterdir() if p.name.removeprefix(prefix) in VERSIONS)

    def leftovers(self, host_root):
        """Names that only a killed run leaves: stagings, temporary links, trash."""
        dirs = {"tree": ["opt/app"], "file": [f"var/lib/hoist/{self.component}", "usr/local/bin"],
                "sync": ["etc", "etc/.app.hoist-sync"],
                "sysext": [f"var/lib/hoist/{self.component}", "etc/extensions"]}[self.kind]
        return [f"{d}/{name}" for d in dirs for name in leftovers(Path(host_root) / d) if name != ".app.hoist-sync"]


def make_kind(kind_name, tmp_path, request, files=3):
    """A Kind; for sysext, with the systemd double on the host's system bus, which its refresh calls."""
    if kind_name == "sysext":
        request.getfixturevalue("system_bus").start("systemd_manager")
    return Kind(kind_name, tmp_path, files)


def installed_and_copied(host_root, kind, tmp_path, **args):
    """The host with the first three VERSIONS of `kind` installed (`args` go to Kind.args), copied for `restore`;
    returns the copy."""
    for version in VERSIONS[:3]:
        upgrade(host_root, *kind.args(version, **args), check=0)
    pristine = tmp_path / "pristine"
    snapshot(host_root, pristine)
    return pristine


def status_of(host_root, component):
    result = run_status(host_root, "--component", component, "--json")
    return json.loads(result.stdout)["components"][0]


def one_back(kind, version):
    return VERSIONS[VERSIONS.index(version) - 1]


def check_after_kill(kind, host_root, where, before):
    """`status` names the version the host's commit points name."""
    status = status_of(host_root, kind.component)
    host = kind.host_version(host_root)
    if kind.kind == "sync" and any(name.startswith("pending.") for name in kind.journal(host_root)):
        # A sync that the next run undoes: the version before it is the truth.
        assert status["current"] == before, where
    elif kind.kind == "sync" and any(name.startswith("restoring.") for name in kind.journal(host_root)):
        # A rollback past its commit, which the next run finishes: its target is the truth.
        assert status["current"] == "1.0.0", where
    else:
        assert status["current"] == host, f"{where}: status says {status['current']}, the host has {host}"
    return status["current"]


OPERATIONS = {
    # name: (the command after 0.0.0, 1.0.0, 2.0.0 are installed, the version it ends on)
    "upgrade": (lambda kind, root: hoist_argv(root, *kind.args("3.0.0")), "3.0.0"),
    "keep": (lambda kind, root: hoist_argv(root, *kind.args("3.0.0", "--keep", "2")), "3.0.0"),
    "rollback": (lambda kind, root: [HOIST_BIN, "rollback", "--host-root", root, "--lock-timeout", "5",
                                     "--component", kind.component], "1.0.0"),
}


def check_three_properties(kind, host_root, operation, command, where, after_kill):
    """After a kill: `status` names what the host names; `rollback` goes exactly one version back (or finishes
    the killed rollback); a re-run of the operation converges, removing what the killed run left."""
    final = OPERATIONS[operation][1]
    state = state_of(host_root, kind.component)
    # A kill that came after the rollback's last save (a random one can) met a finished rollback: the next
    # rollback is a second one, which walks further back (tree, file, sysext: to 0.0.0, never forward to the
    # quarantined 2.0.0) or has no backup left (sync).
    finished = (operation == "rollback" and state.get("rollback") is None and state["current"] == "1.0.0"
                and state["last_result"]["command"] == "rollback")
    current = check_after_kill(kind, host_root, where, "2.0.0")
    if after_kill.exists():
        shutil.rmtree(after_kill)
    snapshot(host_root, after_kill)

    # A rollback goes exactly one version back: from what status said, or, for a rollback that was
    # killed, it finishes that rollback (to 1.0.0, which is one back from where it began).
    rolled = rollback(host_root, "--component", kind.component)
    if finished and kind.kind == "sync":
        assert rolled.returncode == 2 and "has no previous version" in rolled.stderr, f"{where}: {rolled}"
    else:
        assert rolled.returncode == 0, f"{where}: {rolled}"
    expected = ("1.0.0" if kind.kind == "sync" else "0.0.0") if finished else \
        "1.0.0" if operation == "rollback" else one_back(kind, current)
    assert kind.host_version(host_root) == expected, f"{where}: after the rollback: {rolled.stderr[-400:]}"
    assert status_of(host_root, kind.component)["current"] == expected, where
    assert kind.leftovers(host_root) == [], where

    if finished:
        return  # a finished rollback has nothing to converge to; a re-run is a second rollback, checked above
    # A re-run of the operation converges.
    restore(host_root, after_kill)
    rerun = run_recorded(list(map(str, command(kind, host_root))), capture_output=True, text=True, timeout=60)
    assert rerun.returncode == 0, f"{where}: re-run: {rerun.stderr[-400:]}"
    assert kind.host_version(host_root) == final, where
    status = status_of(host_root, kind.component)
    assert status["current"] == final, where
    assert state_of(host_root, kind.component)["current"] == final, where
    assert state_of(host_root, kind.component).get("rollback") is None, where
    if operation != "rollback":
        # What --keep removes is gone from the host and the state, and nothing of the killed run is left.
        kept = ["1.0.0", "2.0.0", "3.0.0"] if operation == "upgrade" else ["2.0.0", "3.0.0"]
        assert [v["version"] for v in state_of(host_root, kind.component)["versions"]] == kept, where
        assert kind.on_disk(host_root) in (None, kept), where
        assert kind.leftovers(host_root) == [], where
        if kind.kind == "sync":
            assert kind.journal(host_root) == ["undo.3.0.0@2.0.0"], where


KINDS = ["tree", "file", "sync", "sysext"]


@pytest.mark.parametrize("kind_name", KINDS)
@pytest.mark.parametrize("operation", ["upgrade", "rollback", "keep"])
def test_sigkill_at_each_commit_point_leaves_status_rollback_and_rerun_right(host_root, tmp_path, request, kind_name,
                                                                           operation):
    kind = make_kind(kind_name, tmp_path, request)
    pristine = installed_and_copied(host_root, kind, tmp_path)
    command = OPERATIONS[operation][0]
    points = traced_calls(command(kind, host_root), RENAMES, tmp_path)
    assert len(points) >= 2, points
    for name, occurrence, line in points:
        restore(host_root, pristine)
        killed = kill_command(command(kind, host_root), name, occurrence)
        where = f"{kind_name} {operation} killed at {name} #{occurrence} ({line[:160]})"
        assert killed.returncode == -signal.SIGKILL, f"{where}: rc={killed.returncode} {killed.stderr[-300:]}"
        check_three_properties(kind, host_root, operation, command, where, tmp_path / "after-kill")


def state_saves(points):
    """The points of `traced_calls` that rename a new state.json into place."""
    return [(name, n) for name, n, line in points if '"state.json"' in line]


# The rename that switches each kind's component (Kind): its link, or the sync's journal commit.
SWITCH_NAMES = {"tree": {'"current"'}, "file": {'"tool"'}, "sysext": {'"tools"'},
                "sync": {'"undo.3.0.0@2.0.0"', '"restoring.2.0.0"'}}


def save_after_switch(kind_name, points):
    """The first rename onto state.json after the switch's rename in `traced_calls`: the save that records the
    switch (an upgrade saves its intent before the switch)."""
    switched = False
    for name, occurrence, line in points:
        if any(target in line for target in SWITCH_NAMES[kind_name]):
            switched = True
        elif switched and '"state.json"' in line:
            return name, occurrence
    raise AssertionError(f"no state save after the switch: {points}")


@pytest.mark.parametrize("kind_name", KINDS)
def test_a_rollback_after_an_upgrade_killed_before_its_state_save_goes_exactly_one_version_back(
        host_root, tmp_path, request, kind_name):
    # The switch to 3.0.0 is committed, the state still says 2.0.0: the rollback must go to 2.0.0 (it went to
    # 1.0.0, skipping it; a sync applied 2.0.0's backup to 3.0.0's content and left a mix of the two).
    kind = make_kind(kind_name, tmp_path, request)
    pristine = installed_and_copied(host_root, kind, tmp_path)
    argv = hoist_argv(host_root, *kind.args("3.0.0"))
    recording_save = save_after_switch(kind_name, traced_calls(argv, RENAMES, tmp_path))
    restore(host_root, pristine)
    assert kill_command(argv, *recording_save).returncode == -signal.SIGKILL
    assert kind.host_version(host_root) == "3.0.0"
    rolled = rollback(host_root, "--component", kind.component, check=0)
    assert "rolled back from 3.0.0 to 2.0.0" in rolled.stderr, rolled
    if kind_name == "sync":
        assert read_tree(host_root / "etc/app") == kind.trees["2.0.0"]
    assert kind.host_version(host_root) == "2.0.0"
    state = state_of(host_root, kind.component)
    assert (state["current"], state["previous"]) == ("2.0.0", "" if kind_name == "sync" else "3.0.0")


@pytest.mark.parametrize("kind_name", KINDS)
def test_a_rollback_killed_before_its_state_save_is_finished_by_the_next_rollback(host_root, tmp_path, request,
                                                                                  kind_name):
    # The backup was used (sync) or the link switched, the state not saved: the next rollback finishes it, exit 0
    # (a sync's next rollbacks all exited 2, "the backup ... does not exist").
    kind = make_kind(kind_name, tmp_path, request)
    pristine = installed_and_copied(host_root, kind, tmp_path)
    argv = [HOIST_BIN, "rollback", "--host-root", host_root, "--lock-timeout", "5", "--component", kind.component]
    # The saves: the intent, then the one that records the rollback (sysext: then the one that strikes its refresh).
    recording_save = state_saves(traced_calls(argv, RENAMES, tmp_path))[1]
    restore(host_root, pristine)
    assert kill_command(argv, *recording_save).returncode == -signal.SIGKILL
    assert kind.host_version(host_root) == "1.0.0"
    assert status_of(host_root, kind.component)["current"] == "1.0.0"
    finished = rollback(host_root, "--component", kind.component)
    assert finished.returncode == 0, finished
    assert kind.host_version(host_root) == "1.0.0"
    state = state_of(host_root, kind.component)
    assert (state["current"], state["previous"]) == ("1.0.0", "" if kind_name == "sync" else "2.0.0")
    assert state["last_result"]["command"] == "rollback" and state["last_result"]["outcome"] == "succeeded"


def plan_rollback_argv(host_root, plan_hash):
    """`hoist rollback` as the Job of the Plan app-rollback at `plan_hash` runs it."""
    return ["env", "SYSTEM_UPGRADE_PLAN_NAME=app-rollback", f"SYSTEM_UPGRADE_PLAN_LATEST_HASH={plan_hash}",
            "SYSTEM_UPGRADE_NODE_NAME=n1", HOIST_BIN, "rollback", "--host-root", str(host_root), "--lock-timeout",
            "5", "--component", "app"]


@pytest.mark.parametrize("next_run", ["the same plan", "an upgrade, then the same plan"])
def test_a_plans_rollback_killed_at_each_save_and_switch_walks_back_exactly_once(host_root, tmp_path, next_run):
    # The Plan's Job is run again after a kill (SUC's next pod): it ends exactly one version back, whichever
    # commit point the kill came before, and a third run of that Job does nothing. An upgrade in between (another
    # Plan) records a rollback the kill left switched and unsaved, with the Plan that began it.
    kind = Kind("tree", tmp_path, 3)
    pristine = installed_and_copied(host_root, kind, tmp_path)
    argv = plan_rollback_argv(host_root, "h1")
    points = traced_calls(argv, RENAMES, tmp_path)
    intent_save, recording_save = state_saves(points)[:2]
    switch = next((name, n) for name, n, line in points if '"current"' in line)
    for point in (intent_save, switch, recording_save):
        where = f"killed at {point}, then {next_run}"
        restore(host_root, pristine)
        assert kill_command(argv, *point).returncode == -signal.SIGKILL, where
        if next_run != "the same plan":
            upgrade(host_root, *kind.args(kind.host_version(host_root)), check=0)
        rerun = run_recorded(argv, capture_output=True, text=True, timeout=60)
        assert rerun.returncode == 0, f"{where}: {rerun.stderr[-600:]}"
        assert kind.host_version(host_root) == "1.0.0", where
        state = state_of(host_root, "app")
        assert (state["current"], state["previous"], state["rollback"]) == ("1.0.0", "2.0.0", None), where
        assert [q["version"] for q in state["quarantined"]] == ["2.0.0"], where
        assert (state["last_rollback"]["to"], state["last_rollback"]["plan_hash"]) == ("1.0.0", "h1"), where
        third = run_recorded(argv, capture_output=True, text=True, timeout=60)
        assert third.returncode == 0 and "already rolled back from 2.0.0 to 1.0.0" in third.stderr, where
        assert kind.host_version(host_root) == "1.0.0", where
        assert state_of(host_root, "app")["rollbacks"] == 1, where


def test_an_upgrade_rerun_after_a_killed_sync_rollback_does_not_undo_it(host_root, tmp_path):
    # The rollback's backup was used and the state not saved: the re-run of the upgrade "repaired" the drift back to
    # 2.0.0, silently undoing the operator's rollback. Now the rollback is recorded and 2.0.0 quarantined: exit 3.
    kind = Kind("sync", tmp_path)
    pristine = installed_and_copied(host_root, kind, tmp_path)
    argv = [HOIST_BIN, "rollback", "--host-root", host_root, "--lock-timeout", "5", "--component", kind.component]
    last_save = state_saves(traced_calls(argv, RENAMES, tmp_path))[-1]
    restore(host_root, pristine)
    assert kill_command(argv, *last_save).returncode == -signal.SIGKILL
    refused = upgrade(host_root, *kind.args("2.0.0"), check=3)
    assert "refusing 2.0.0: it is quarantined since" in refused.stderr
    assert read_tree(host_root / "etc/app") == kind.trees["1.0.0"]
    assert state_of(host_root, kind.component)["current"] == "1.0.0"



# Random kills: SIGKILL after a delay drawn uniformly over the measured length of the run, on the default thread
# pool. HOIST_CRASH_KILLS sets the kills per kind and operation (default 6: 48 in all), HOIST_CRASH_SEED the seed
# (default: a new one, printed, and named in every failure).
RANDOM_KILLS = int(os.environ.get("HOIST_CRASH_KILLS", "6"))


@pytest.mark.parametrize("kind_name", KINDS)
@pytest.mark.parametrize("operation", ["upgrade", "rollback"])
def test_sigkill_at_random_instants_leaves_status_rollback_and_rerun_right(host_root, tmp_path, request, kind_name,
                                                                           operation):
    seed = int(os.environ.get("HOIST_CRASH_SEED", str(random.SystemRandom().randrange(1 << 32))))
    print(f"HOIST_CRASH_SEED={seed}")
    rng = random.Random(seed)
    # A sysext stages as a tree does (killed at 300 files there); its own windows are the link, the saves and the
    # refresh, which a shorter staging leaves more of the run to.
    kind = make_kind(kind_name, tmp_path, request, files=100 if kind_name == "sysext" else 300)
    default_pool = ()
    pristine = installed_and_copied(host_root, kind, tmp_path, threads=default_pool)
    if operation == "upgrade":
        def command(k, root):
            return hoist_argv(root, *k.args("3.0.0", threads=default_pool))
    else:
        command = OPERATIONS[operation][0]
    start = time.monotonic()
    run_recorded(list(map(str, command(kind, host_root))), check=True, capture_output=True)
    length = time.monotonic() - start
    killed = 0
    for i in range(RANDOM_KILLS):
        restore(host_root, pristine)
        delay = rng.uniform(0, length)
        proc = subprocess.Popen(list(map(str, command(kind, host_root))), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        _, stderr = proc.communicate(timeout=60)
        record_output(proc.args, "", stderr.decode(errors="replace"))
        killed += proc.returncode == -signal.SIGKILL
        where = (f"{kind_name} {operation} killed after {delay:.4f} s of {length:.4f} s (HOIST_CRASH_SEED={seed}, "
                 f"kill {i}, rc={proc.returncode})")
        check_three_properties(kind, host_root, operation, command, where, tmp_path / "after-kill")
    print(f"{killed} of {RANDOM_KILLS} kills landed inside the run ({length:.3f} s)")
