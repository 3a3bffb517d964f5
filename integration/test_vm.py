"""hoist on a real systemd host: a Debian 12 VM under QEMU (TCG).

scripts/vm-image builds (and caches) the VM: debootstrap'd Debian 12 with
systemd, dbus, logind, systemd-sysext.service enabled, and a unit that runs
`driver` from a second disk at every boot; QEMU boots its kernel and
initramfs directly (-kernel/-initrd). This test writes that disk (the
static hoist, payloads, a demo unit, integration/vm/driver), boots the VM on a
qcow2 overlay of the cached image, and reads what the driver reports on the
second serial port. In the VM hoist runs against the real host (--host-root /),
with the real systemd, logind and systemd-sysext, and really reboots it.

One sequence of five boots covers every scenario (see integration/vm/driver):
upgrades with --restart that are live at once, an upgrade that reboots through
logind and whose re-run exits 0 with the new boot id, a rollback that is current
after the next boot, and two power cuts (QEMU killed while a large tree is
staged, and the moment its `current` link switches) after which the tree is
the old or the new version whole and a re-run completes; then, in the last
boot, a k3s the installer put there before hoist (newer than the payload: the
gate asks the binary) and a restart that fails once and is owed to the re-run;
then a k3s server (a stand-in) whose new version migrates its datastore and fails its checks, restored with k3s
stopped by systemd and switched back; then health checks: an upgrade whose unit stays up passes, and one to a
version whose service fails after the reboot is switched back by the run after
the boot, which reboots into the old version; the run after that boot refuses
the quarantined version and does not reboot again (two boots more).

Skipped (exit 77, with the reason) when QEMU or the tools that make the disks
are missing, or when the image is not cached and cannot be built (not root).
Logs: $HOIST_BUILD_DIR/test_vm/ (console of each QEMU run, the driver's reports).
"""

import base64
import hashlib
import json
import os
import random
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import HOIST_BIN

SOURCE_DIR = Path(os.environ.get("HOIST_SOURCE_DIR", Path(__file__).resolve().parent.parent))
VM_DIR = Path(__file__).resolve().parent / "vm"
QEMU = "qemu-system-x86_64"
# Each QEMU process: the boots it holds, with the workloads (under TCG, on a
# loaded 2-core machine a boot takes 25 to 60 s).
QEMU_TIMEOUT = 900
BIG_FILES = 2000
EXT_RELEASE = "ID=debian\nVERSION_ID=12\n"


# ------------------------------------------------------------------ payloads

# One mtime per version: hoist's quick check (size, mtime, mode, owner), like
# rsync's, takes a file of the same size and mtime as unchanged, and
# `mkfs.ext4 -d` keeps whole seconds only, so two versions written within one
# second would look the same where their sizes are equal.
_MTIMES = {"1.0.0": 1_700_000_000, "2.0.0": 1_700_100_000}


def _write(path, content, mode=0o644, version=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    path.chmod(mode)
    if version:
        os.utime(path, (_MTIMES[version], _MTIMES[version]))


def _demo_binary(version):
    # what the demo unit runs: it says which version it is and keeps its pid
    # (exec keeps it), so the test can tell the running process wrote it
    return ("#!/bin/sh\n"
            "mkdir -p /run/hoist-demo\n"
            f'echo "{version} $$" >/run/hoist-demo/version\n'
            "exec sleep infinity\n")


def _k3s_binary(version):
    # prints its version as `k3s --version` does; the VM has a shell, so a
    # script stands in for the static k3s
    return ("#!/bin/sh\n"
            '[ "$1" = --version ] || { echo "unexpected arguments" >&2; exit 2; }\n'
            f'echo "k3s version {version} (6da14b51)"\n'
            'echo "go version go1.22.8"\n')


def _flaky_binary(version):
    return ("#!/bin/sh\n"
            "mkdir -p /run/hoist-flaky\n"
            f'echo "{version} $$" >/run/hoist-flaky/version\n'
            "exec sleep infinity\n")


def _health_binary(version, healthy):
    # 2.0.0 is the broken release: its service exits 1 as soon as it starts
    return ("#!/bin/sh\n"
            "mkdir -p /run/hoist-health\n"
            f'echo "{version} $$" >/run/hoist-health/version\n'
            + ("exec sleep infinity\n" if healthy else "exit 1\n"))


def _k3s_server(version, broken):
    # A stand-in k3s server (no k3s binary here, and no sqlite3 in the VM image): its datastore is a file at k3s's
    # SQLite path that each version marks with itself when it starts (a migration); it refuses one a newer version
    # marked, as an older k3s fails on a datastore a newer one migrated. The broken version marks it, then exits 1.
    # Debian's sqlite3 and real SQLite databases are test_datastore.py's; here systemd is what is real.
    return ("#!/bin/sh\n"
            f"VERSION={version}\n"
            "DB=/var/lib/rancher/k3s/server/db/state.db\n"
            'case "$1" in\n'
            '--version) echo "k3s version $VERSION (stand-in)" ;;\n'
            "server)\n"
            '    mark=$(cat "$DB")\n'
            '    if [ "$(printf \'%s\\n%s\\n\' "$mark" "$VERSION" | sort -V | tail -n 1)" != "$VERSION" ]; then\n'
            '        echo "refusing to start: the datastore is marked by $mark, newer than $VERSION"; exit 1\n'
            "    fi\n"
            '    echo "$VERSION" >"$DB.tmp" && mv "$DB.tmp" "$DB"\n'
            + ('    echo "$VERSION is broken"; exit 1\n' if broken else "")
            + '    mkdir -p /run/k3s-standin && echo "$VERSION $$" >/run/k3s-standin/version\n'
            "    exec sleep infinity\n"
            "    ;;\n"
            "esac\n")


def _sysext_image(work, path, version):
    tree = work / f"ext-tree-{version}"
    _write(tree / "usr/lib/extension-release.d/extension-release.hoist-demo", EXT_RELEASE, version=version)
    _write(tree / "usr/share/hoist-demo/release", f"ext {version}\n", version=version)
    _write(tree / "usr/bin/hoist-demo-tool", f"#!/bin/sh\necho 'tool {version}'\n", 0o755, version)
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mksquashfs", str(tree), str(path), "-quiet", "-noappend", "-all-root"], check=True,
                   capture_output=True)


def _os_tree(root, version):
    _write(root / "etc/os-version", f"os {version}\n", version=version)
    _write(root / "bin/os-tool", f"#!/bin/sh\necho os-tool {version}\n", 0o755, version)
    _write(root / "lib/modules.list", "".join(f"module-{i} {version}\n" for i in range(50)), version=version)


def _big_tree(root, version, seed):
    """BIG_FILES files of 2 to 10 KiB in 40 directories; every file differs
    between the versions (so nothing is hard-linked), and some exist in one only."""
    rng = random.Random(seed)
    offset = 0 if version == "1.0.0" else 100
    for i in range(offset, offset + BIG_FILES):
        size = rng.randrange(2048, 10240)
        header = f"{version} file {i}\n".encode()
        _write(root / f"d{i % 40:02d}/f{i:05d}", header + rng.randbytes(size - len(header)), version=version)


def _digest(root):
    """What the driver's `digest` prints: sha256 over sha256sum's lines of the
    regular files sorted by path, and the number of entries (find .)."""
    root = Path(root)
    files = sorted((str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()),
                   key=lambda s: ("./" + s).encode())
    lines = "".join(f"{hashlib.sha256((root / f).read_bytes()).hexdigest()}  ./{f}\n" for f in files)
    entries = 1 + sum(1 for _ in root.rglob("*"))
    return f"{hashlib.sha256(lines.encode()).hexdigest()}\nentries {entries}"


def _manifest(directory, version, components):
    _write(directory / "manifest.json",
           json.dumps({"schema": 1, "version": version, "components": components}, indent=2))


def _make_test_disk(work, image):
    """The second disk: hoist, the driver, the demo unit and every payload."""
    top = work / "disk"
    top.mkdir()
    shutil.copy2(HOIST_BIN, top / "hoist")
    shutil.copy2(VM_DIR / "driver", top / "driver")
    shutil.copy2(VM_DIR / "hoist-demo.service", top / "hoist-demo.service")
    shutil.copy2(VM_DIR / "hoist-flaky.service", top / "hoist-flaky.service")
    # what the k3s installer put on the node before hoist came, and two payloads
    for name, version in (("k3s-installed", "v1.31.2+k3s1"), ("k3s-v1.30.1", "v1.30.1+k3s1"),
                          ("k3s-v1.31.3", "v1.31.3+k3s1")):
        _write(top / name / "k3s", _k3s_binary(version), 0o755)
    for version in ("1.0.0", "2.0.0"):
        _write(top / f"flaky-{version}/hoist-flaky", _flaky_binary(version), 0o755, version)
    shutil.copy2(VM_DIR / "hoist-health.service", top / "hoist-health.service")
    shutil.copy2(VM_DIR / "k3s.service", top / "k3s.service")
    for version, broken in (("v1.30.1+k3s1", False), ("v1.31.0+k3s1", True)):
        _write(top / f"k3s-server-{version}/k3s", _k3s_server(version, broken), 0o755)
    for version, healthy in (("1.0.0", True), ("1.5.0", True), ("2.0.0", False)):
        _write(top / f"svc-{version}/hoist-health", _health_binary(version, healthy), 0o755)
    (top / "driver").chmod(0o755)
    for version in ("1.0.0", "2.0.0"):
        release = top / f"release-{version}"
        _write(release / "demo/hoist-demo", _demo_binary(version), 0o755, version)
        _sysext_image(work, release / "ext/hoist-demo.raw", version)
        components = [
            {"name": "demo", "kind": "file", "source": "demo/hoist-demo", "destination": "/opt/bin/hoist-demo"},
            {"name": "ext", "kind": "sysext", "source": "ext/hoist-demo.raw",
             "destination": "/etc/extensions/hoist-demo.raw"},
        ]
        if version == "1.0.0":
            # the trees' first versions come with the release; their second
            # versions are installed by flags (the reboot, the power cuts)
            _os_tree(release / "os", version)
            _big_tree(release / "big", version, seed=1)
            components += [
                {"name": "os", "kind": "tree", "source": "os", "destination": "/opt/os"},
                {"name": "big", "kind": "tree", "source": "big", "destination": "/opt/big"},
            ]
        else:
            _os_tree(top / "os-2.0.0", version)
            _big_tree(top / "big-2.0.0", version, seed=2)
        _manifest(release, version, components)
    size_mib = 64 + sum(p.stat().st_size for p in top.rglob("*") if p.is_file()) * 13 // 10 // 2**20
    subprocess.run(["mkfs.ext4", "-q", "-F", "-L", "hoist-test", "-E", "root_owner=0:0", "-d", str(top),
                    str(image), f"{size_mib}M"], check=True, capture_output=True)
    return {"big-1.0.0": _digest(top / "release-1.0.0/big"), "big-2.0.0": _digest(top / "big-2.0.0")}


# ---------------------------------------------------------------------- QEMU

class Reports:
    """What the driver reported: facts by phase and key, hoist's stderr by run
    name, the event lines in order, and when (host time) each line came."""

    def __init__(self):
        self.facts = {}
        self.logs = {}
        self.events = []

    def feed(self, line, when):
        kind, _, rest = line.partition(" ")
        if kind == "FACT":
            phase, key, value = (rest.split(" ", 2) + [""])[:3]
            self.facts.setdefault(phase, {})[key] = base64.b64decode(value).decode(errors="replace")
        elif kind == "LOG":
            name, _, text = rest.partition(" ")
            self.logs.setdefault(name, []).append(text)
        elif kind in ("PHASE", "POWERCUT", "DONE", "ERROR", "RUN"):
            self.events.append((when, kind, rest))

    def fact(self, phase, key):
        assert key in self.facts.get(phase, {}), f"the driver reported no {key} in phase {phase}:\n{self.summary()}"
        return self.facts[phase][key]

    def log(self, name):
        return "\n".join(self.logs.get(name, []))

    def event(self, kind):
        return [e for e in self.events if e[1] == kind]

    def summary(self):
        return "\n".join(f"{when:7.1f}s {kind} {rest}" for when, kind, rest in self.events)


def _run_qemu(image_dir, overlay, test_disk, log_dir, index, reports, t0):
    """Boots until the guest powers off (returns "poweroff") or announces a
    power cut (QEMU is SIGKILLed; returns "cut")."""
    console = log_dir / f"console-{index}.log"
    results = log_dir / f"results-{index}.log"
    for path in (console, results):
        path.unlink(missing_ok=True)
    # TCG: this project's machines have a /dev/kvm that does not run stock
    # kernels. The plain qemu64 CPU plus RDRAND, which seeds the kernel's RNG
    # at once (without it, it was seeded only half a minute into the boot).
    # vmlinux: booted through its PVH entry point, no decompression.
    cmd = [QEMU, "-accel", "tcg", "-cpu", "qemu64,+rdrand", "-smp", "2", "-m", "1024",
           "-nodefaults", "-no-user-config", "-display", "none", "-vga", "none", "-nic", "none",
           "-kernel", str(image_dir / "vmlinux"), "-initrd", str(image_dir / "initrd.img"),
           "-append", (image_dir / "cmdline").read_text().strip(),
           "-drive", f"file={overlay},if=virtio,format=qcow2",
           "-drive", f"file={test_disk},if=virtio,format=raw,readonly=on",
           "-serial", f"file:{console}", "-serial", f"file:{results}"]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    started = time.monotonic()
    reports.events.append((started - t0, "QEMU", f"run {index} started"))
    buffer = b""
    outcome = None
    stream = None
    exited = False
    try:
        while outcome is None:
            exited = proc.poll() is not None   # then read what it wrote last
            if stream is None and results.exists():   # QEMU creates it
                stream = open(results, "rb")
            chunk = stream.read() if stream else b""
            if chunk:
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for raw in lines:
                    line = raw.decode(errors="replace").rstrip("\r")
                    reports.feed(line, time.monotonic() - t0)
                    if line.startswith("POWERCUT "):
                        proc.kill()   # the power cut: no flush, no shutdown
                        proc.wait()
                        outcome = "cut"
                        break
                if outcome:
                    break
            if exited:
                outcome = "poweroff"
                break
            if time.monotonic() - started > QEMU_TIMEOUT:
                proc.kill()
                proc.wait()
                raise AssertionError(f"QEMU run {index} timed out after {QEMU_TIMEOUT} s; console in "
                                     f"{console}:\n{_tail(console)}\nreports:\n{reports.summary()}")
            time.sleep(0.02)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if stream:
            stream.close()
    qemu_output = proc.stdout.read().decode(errors="replace")
    reports.events.append((time.monotonic() - t0, "QEMU", f"run {index} ended: {outcome}, rc {proc.returncode}"))
    if outcome == "poweroff" and proc.returncode != 0:
        raise AssertionError(f"QEMU exited with {proc.returncode}: {qemu_output}")
    return outcome


def _tail(path, lines=60):
    try:
        return "\n".join(Path(path).read_text(errors="replace").replace("\r", "").splitlines()[-lines:])
    except OSError:
        return "(none)"


def _skip_reason():
    for tool, package in ((QEMU, "qemu-system-x86"), ("qemu-img", "qemu-utils"), ("mkfs.ext4", "e2fsprogs"),
                          ("mksquashfs", "squashfs-tools")):
        if not shutil.which(tool):
            return f"the VM test needs {tool} ({package}), which is not installed"
    accels = subprocess.run([QEMU, "-accel", "help"], capture_output=True, text=True)
    if accels.returncode != 0 or "tcg" not in accels.stdout.split():
        return f"{QEMU} cannot run here or lacks TCG: {(accels.stdout + accels.stderr).strip()}"
    return None


@pytest.fixture(scope="module")
def vm(tmp_path_factory):
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    log_dir = Path(os.environ.get("HOIST_BUILD_DIR", tmp_path_factory.mktemp("vm-logs"))) / "test_vm"
    log_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    build = subprocess.run([str(SOURCE_DIR / "scripts/vm-image")], capture_output=True, text=True)
    (log_dir / "vm-image.log").write_text(build.stderr)
    if build.returncode != 0:
        if os.geteuid() != 0 and "must run as root" in build.stderr:
            pytest.skip("the VM image is not cached and only root can build it (debootstrap): run scripts/vm-image as root")
        raise AssertionError(f"scripts/vm-image failed:\n{build.stderr[-4000:]}")
    image_dir = Path(build.stdout.strip().splitlines()[-1])
    image_seconds = time.monotonic() - t0

    work = tmp_path_factory.mktemp("vm")
    test_disk = work / "test.img"
    digests = _make_test_disk(work, test_disk)
    overlay = work / "overlay.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-b", str(image_dir / "rootfs.img"), "-F", "raw",
                    str(overlay)], check=True)
    prepared_seconds = time.monotonic() - t0

    reports = Reports()
    outcomes = []
    try:
        for index in range(1, 4):
            outcome = _run_qemu(image_dir, overlay, test_disk, log_dir, index, reports, t0)
            outcomes.append(outcome)
            if outcome != "cut" or reports.event("ERROR"):
                break
    finally:
        (log_dir / "reports.json").write_text(json.dumps(
            {"facts": reports.facts, "logs": reports.logs, "events": reports.events}, indent=1))
        summary = [f"image: {image_dir} ready after {image_seconds:.1f} s; disks made after {prepared_seconds:.1f} s",
                   reports.summary(), f"total {time.monotonic() - t0:.1f} s"]
        (log_dir / "summary.txt").write_text("\n".join(summary) + "\n")
    reports.outcomes = outcomes
    reports.digests = digests
    reports.log_dir = log_dir
    return reports


# --------------------------------------------------------------------- tests

def test_the_vm_ran_every_phase_in_turn(vm):
    errors = vm.event("ERROR")
    assert not errors, f"the driver failed: {errors}\n{vm.summary()}\nlogs in {vm.log_dir}"
    phases = [rest for _, kind, rest in vm.events if kind == "PHASE"]
    assert phases == ["install-upgrade", "after-reboot", "after-rollback", "after-cut-1", "after-cut-2",
                      "health-after-boot", "health-after-rollback"], vm.summary()
    assert vm.outcomes == ["cut", "cut", "poweroff"], vm.summary()
    assert vm.event("DONE"), vm.summary()
    # a new boot id at every boot: four reboots through logind, two power cuts
    ids = [vm.fact(p, "boot.id") for p in phases]
    assert len(set(ids)) == 7, ids


def test_an_upgrade_with_restart_makes_the_new_file_and_sysext_live(vm):
    p = "install-upgrade"
    assert vm.fact(p, "install.rc") == "0", vm.log("install")
    assert vm.fact(p, "upgrade.rc") == "0", vm.log("upgrade")
    for prefix, version in (("r1", "1.0.0"), ("r2", "2.0.0")):
        # the unit runs the new binary: its main process wrote the version
        written = vm.fact(p, f"{prefix}.demo.written").split()
        assert written == [version, vm.fact(p, f"{prefix}.demo.main_pid")], (prefix, written)
        assert vm.fact(p, f"{prefix}.demo.active") == "active"
        assert vm.fact(p, f"{prefix}.demo.link") == f"/var/lib/hoist/demo/{version}/hoist-demo"
        # systemd-sysext merged the new image: its /usr files are what /usr shows
        assert vm.fact(p, f"{prefix}.ext.file") == f"ext {version}"
        assert vm.fact(p, f"{prefix}.ext.tool") == f"tool {version}"
        assert vm.fact(p, f"{prefix}.ext.link") == f"/var/lib/hoist/ext/hoist-demo-{version}.raw"
        assert "hoist-demo" in vm.fact(p, f"{prefix}.ext.status")
        assert vm.fact(p, f"{prefix}.ext.usr_mount").startswith("overlay")
    assert vm.fact(p, "r1.demo.main_pid") != vm.fact(p, "r2.demo.main_pid")
    assert vm.fact(p, "r2.os.current") == "1.0.0"


def test_an_upgrade_that_needs_a_reboot_reboots_through_logind_and_its_rerun_exits_0(vm):
    before, after = "install-upgrade", "after-reboot"
    # hoist blocked until the host went down (it never exits 0 before that)
    assert vm.facts[before].get("reboot.rc") != "0", vm.log("reboot")
    assert vm.fact(after, "boot.previous_id") == vm.fact(before, "boot.id")
    assert vm.fact(after, "boot.id") != vm.fact(before, "boot.id")
    # logind was asked: it logs the reboot it was asked for
    assert "System is rebooting" in vm.fact(after, "rerun.logind"), vm.fact(after, "rerun.logind")
    # the re-run after the boot: exit 0, no second reboot, the new version current
    assert vm.fact(after, "rerun.rc") == "0", vm.log("rerun")
    assert vm.fact(after, "boot2.os.current") == "2.0.0"
    assert vm.fact(after, "boot2.os.release") == "os 2.0.0"
    assert "logind" in vm.log("reboot"), vm.log("reboot")
    os_state = next(c for c in json.loads(vm.fact(after, "boot2.status"))["components"] if c["component"] == "os")
    assert not os_state.get("pending_reboot"), os_state
    assert os_state["current"] == "2.0.0"
    # the state names the boot the re-run saw: the new one
    assert os_state["boot_id"] == vm.fact(after, "boot.id"), os_state
    # the re-run confirmed the reboot: the upgrade succeeded (not "unchanged")
    assert os_state["last_result"]["outcome"] == "succeeded", os_state
    assert os_state["last_result"]["message"] == "rebooted into 2.0.0", os_state
    # what was upgraded before the reboot is live after it: the enabled unit
    # started the new binary, systemd-sysext.service merged the new image
    assert vm.fact(after, "boot2.demo.written").split()[0] == "2.0.0"
    assert vm.fact(after, "boot2.ext.file") == "ext 2.0.0"


def test_a_rollback_is_current_at_once_and_after_the_next_boot(vm):
    p = "after-reboot"
    assert vm.fact(p, "rollback_demo.rc") == "0", vm.log("rollback_demo")
    assert vm.fact(p, "rollback_ext.rc") == "0", vm.log("rollback_ext")
    assert vm.fact(p, "rolled.demo.written").split() == ["1.0.0", vm.fact(p, "rolled.demo.main_pid")]
    assert vm.fact(p, "rolled.ext.file") == "ext 1.0.0"
    assert vm.facts[p].get("rollback_os.rc") != "0", vm.log("rollback_os")
    q = "after-rollback"
    assert vm.fact(q, "boot.id") != vm.fact(p, "boot.id")
    assert vm.fact(q, "rerun_rollback.rc") == "0", vm.log("rerun_rollback")
    assert vm.fact(q, "boot3.os.current") == "1.0.0"
    assert vm.fact(q, "boot3.os.release") == "os 1.0.0"
    assert vm.fact(q, "boot3.demo.written").split()[0] == "1.0.0"
    assert vm.fact(q, "boot3.demo.link") == "/var/lib/hoist/demo/1.0.0/hoist-demo"
    assert vm.fact(q, "boot3.ext.file") == "ext 1.0.0"
    assert vm.fact(q, "boot3.ext.tool") == "tool 1.0.0"


@pytest.mark.parametrize("cut,phase,moment", [
    ("cut1", "after-cut-1", "staged"),
    ("cut2", "after-cut-2", "current switched"),
])
def test_a_power_cut_leaves_the_old_or_the_new_version_whole(vm, cut, phase, moment):
    announced = [rest for _, kind, rest in vm.events if kind == "POWERCUT"]
    cut_phase = {"cut1": "after-rollback", "cut2": "after-cut-1"}[cut]
    line = next((a for a in announced if a.startswith(cut_phase + " ")), None)
    assert line is not None, vm.summary()
    # the kill came in the moment it was meant for: while the tree was staged
    # (hoist never reported its exit), or as soon as `current` had switched
    # (hoist may have finished just before: the cut is then after the upgrade)
    assert moment in line, line
    if cut == "cut1":
        assert f"{cut}.rc" not in vm.facts.get(cut_phase, {}), vm.log(cut)
    current = vm.fact(phase, f"{cut}.big.current")
    assert current in ("1.0.0", "2.0.0"), current
    assert vm.fact(phase, f"{cut}.big.digest") == vm.digests[f"big-{current}"], f"current {current} is not whole"
    assert vm.fact(phase, f"{cut}.big.status_rc") == "0"
    json.loads(vm.fact(phase, f"{cut}.big.status"))


def test_after_the_power_cuts_a_rerun_completes(vm):
    p = "after-cut-2"
    assert vm.fact(p, "complete.rc") == "0", vm.log("complete")
    assert vm.fact(p, "complete.big.current") == "2.0.0"
    assert vm.fact(p, "complete.big.previous") == "1.0.0"
    assert vm.fact(p, "complete.big.digest") == vm.digests["big-2.0.0"]
    # nothing of the interrupted runs is left: no .partial, no temporary link
    assert vm.fact(p, "complete.big.entries").split() == ["1.0.0", "2.0.0", "current", "previous"]
    big = next(c for c in json.loads(vm.fact(p, "final.status"))["components"] if c["component"] == "big")
    assert big["current"] == "2.0.0", big


def test_a_k3s_the_installer_put_there_is_never_downgraded(vm):
    # /opt/bin, where the k3s installer puts k3s when /usr/local/bin is read-only: the VM's /usr is
    # systemd-sysext's read-only overlay
    p = "after-cut-2"
    assert vm.fact(p, "k3s_older.rc") == "3", vm.log("k3s_older")
    assert "refusing to downgrade from v1.31.2+k3s1 (what '/opt/bin/k3s --version' says) to v1.30.1+k3s1" \
        in vm.log("k3s_older")
    # untouched: the same bytes, still a file, no state of hoist for it
    assert vm.fact(p, "k3s.after_older") == vm.fact(p, "k3s.before")
    assert vm.fact(p, "k3s.after_older_type") == "regular file"
    assert "No such file or directory" in vm.fact(p, "k3s.after_older_state")
    # a newer payload upgrades it, and keeps what the installer put there
    assert vm.fact(p, "k3s_newer.rc") == "0", vm.log("k3s_newer")
    assert "v1.31.2+k3s1 (what '/opt/bin/k3s --version' says) -> v1.31.3+k3s1 (upgrade)" in vm.log("k3s_newer")
    assert vm.fact(p, "k3s.link") == "/var/lib/hoist/k3s/v1.31.3+k3s1/k3s"
    assert vm.fact(p, "k3s.version") == "k3s version v1.31.3+k3s1 (6da14b51)"
    assert vm.fact(p, "k3s.pre_hoist") == vm.fact(p, "k3s.before")


def test_a_failed_restart_switches_back_quarantines_and_a_refused_rerun_changes_nothing(vm):
    p = "after-cut-2"
    assert vm.fact(p, "flaky_install.rc") == "0", vm.log("flaky_install")
    assert vm.fact(p, "flaky.r1").split()[0] == "1.0.0"
    # the real systemd's job result: failed; hoist goes back to 1.0.0, whose restart fails too and stays owed
    assert vm.fact(p, "flaky_fail.rc") == "1", vm.log("flaky_fail")
    log = vm.log("flaky_fail")
    assert "flaky: failed to restart hoist-flaky.service: the job's result is 'failed'" in log, log
    assert "switched back to flaky 1.0.0; then failed to restart hoist-flaky.service" in log, log
    failed = json.loads(vm.fact(p, "flaky.failed_status"))["components"][0]
    assert (failed["current"], failed["previous"]) == ("1.0.0", "2.0.0"), failed
    assert failed["owed_restarts"] == ["hoist-flaky.service"], failed
    assert [q["version"] for q in failed["quarantined"]] == ["2.0.0"], failed
    assert (failed["last_rollback"]["from"], failed["last_rollback"]["to"]) == ("2.0.0", "1.0.0"), failed
    assert failed["last_result"]["outcome"] == "failed", failed
    assert vm.fact(p, "flaky.failed_binary") == vm.fact(p, "flaky.v1_binary")
    assert vm.fact(p, "flaky.failed_active") != "active"
    # SUC's next pod runs the same command: refused (exit 3), nothing changed, not even the owed restart
    assert vm.fact(p, "flaky_rerun.rc") == "3", vm.log("flaky_rerun")
    assert "flaky: refusing 2.0.0: it is quarantined since" in vm.log("flaky_rerun")
    assert vm.fact(p, "flaky.rerun_active") != "active"
    # the run that installs 1.0.0 again does the restart it owes
    assert vm.fact(p, "flaky_owed.rc") == "0", vm.log("flaky_owed")
    assert "flaky: doing the restarts an earlier run owes (hoist-flaky.service)" in vm.log("flaky_owed")
    owed = json.loads(vm.fact(p, "flaky.owed_status"))["components"][0]
    assert (owed["current"], owed["owed_restarts"]) == ("1.0.0", []), owed
    assert vm.fact(p, "flaky.r_owed").split()[0] == "1.0.0"
    assert vm.fact(p, "flaky.owed_active") == "active"
    # and --allow-quarantined installs 2.0.0 once its unit can start
    assert vm.fact(p, "flaky_again.rc") == "0", vm.log("flaky_again")
    paid = json.loads(vm.fact(p, "flaky.rerun_status"))["components"][0]
    assert paid["current"] == "2.0.0" and paid["owed_restarts"] == [], paid
    assert paid["last_result"]["outcome"] == "succeeded", paid
    assert vm.fact(p, "flaky.r2").split() == ["2.0.0", vm.fact(p, "flaky.r2_main_pid")]


def test_a_server_whose_new_version_fails_after_migrating_its_datastore_is_restored_and_healthy_again(vm):
    p = "after-cut-2"
    assert vm.fact(p, "server_install.rc") == "0", vm.log("server_install")
    assert vm.fact(p, "server.r1").split()[0] == "v1.30.1+k3s1"
    assert vm.fact(p, "server.db1") == "v1.30.1+k3s1"
    # v1.31.0 migrated the datastore (its mark), then failed its checks under the real systemd
    assert vm.fact(p, "server_broken.rc") == "1", vm.log("server_broken")
    log = vm.log("server_broken")
    assert "k3s-server: a k3s server: k3s.service runs '/opt/k3s/bin/k3s server'" in log, log
    assert "k3s-server: snapshot of the sqlite datastore of v1.30.1+k3s1 in " in log, log
    assert ("switched back to k3s-server v1.30.1+k3s1 with its datastore restored from /var/lib/hoist/k3s-server/"
            "datastore/hoist-v1.30.1+k3s1-to-v1.31.0+k3s1; v1.30.1+k3s1 is healthy again") in log, log
    # the copy was taken with v1.30.1 stopped; the datastore is v1.30.1's again, and v1.30.1 runs on it
    assert vm.fact(p, "server.snapshot") == "v1.30.1+k3s1"
    assert vm.fact(p, "server.db") == "v1.30.1+k3s1"
    assert vm.fact(p, "server.link") == "/var/lib/hoist/k3s-server/v1.30.1+k3s1/k3s"
    assert vm.fact(p, "server.active") == "active"
    assert vm.fact(p, "server.running").split() == ["v1.30.1+k3s1", vm.fact(p, "server.main_pid")]
    state = json.loads(vm.fact(p, "server.status"))["components"][0]
    assert state["current"] == "v1.30.1+k3s1" and state["last_result"]["outcome"] == "rolled-back", state
    assert [q["version"] for q in state["quarantined"]] == ["v1.31.0+k3s1"], state
    [snapshot] = state["datastore_snapshots"]
    assert (snapshot["kind"], snapshot["from"], snapshot["to"]) == ("sqlite", "v1.30.1+k3s1", "v1.31.0+k3s1")


def test_a_healthy_upgrade_passes_its_checks(vm):
    p = "after-cut-2"
    assert vm.fact(p, "svc_install.rc") == "0", vm.log("svc_install")
    assert vm.fact(p, "svc_healthy.rc") == "0", vm.log("svc_healthy")
    assert "health: unit:hoist-health.service passed: hoist-health.service is active for" in vm.log("svc_healthy")
    state = json.loads(vm.fact(p, "svc.healthy_status"))["components"][0]
    assert state["current"] == "1.5.0" and state["health"]["verdict"] == "passed", state
    assert vm.fact(p, "svc.healthy_written").split()[0] == "1.5.0"


def test_a_version_whose_service_fails_after_the_reboot_is_switched_back_and_booted_out(vm):
    # the upgrade to 2.0.0 asked for the reboot with its check owed
    assert vm.facts["after-cut-2"].get("svc_broken.rc") != "0", vm.log("svc_broken")
    p = "health-after-boot"
    assert vm.fact(p, "health.unit_at_boot") == "failed"
    log = vm.log("health_boot")
    assert "svc: the host rebooted into 2.0.0" in log, log
    assert "health check unit:hoist-health.service did not pass within 20 s: hoist-health.service is failed " \
           "(failed); switching back to 1.5.0" in log, log
    assert "rebooting for svc 1.5.0 (--reboot if-needed;" in log, log
    q = "health-after-rollback"
    assert vm.fact(q, "boot.previous_id") == vm.fact(p, "boot.id")
    assert vm.fact(q, "health_again.rc") == "3", vm.log("health_again")
    assert "refusing 2.0.0: it is quarantined since" in vm.log("health_again")
    assert vm.fact(q, "health.final_link") == "/var/lib/hoist/svc/1.5.0/hoist-health"
    assert vm.fact(q, "health.final_written").split() == ["1.5.0", vm.fact(q, "health.final_main_pid")]
    assert vm.fact(q, "health.final_active") == "active"
    state = json.loads(vm.fact(q, "health.final_status"))["components"][0]
    assert state["current"] == "1.5.0" and not state.get("pending_reboot"), state
    assert state["health"]["verdict"] == "failed" and state["health"]["version"] == "2.0.0", state
    assert [q["version"] for q in state["quarantined"]] == ["2.0.0"], state
