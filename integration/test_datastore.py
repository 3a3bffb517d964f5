"""A k3s server's datastore across an upgrade (docs/datastore.md): the snapshot before the switch, the switch back
that restores it, the refusal to switch back when it cannot follow, and `rollback --restore-snapshot`.

What is real: Debian's sqlite3 and SQLite databases in WAL mode, written by a writer process that runs until the
(test double of) systemd stops the unit; hoist's static binary; the unit file shaped as k3s's install.sh writes it.
What is stand-in: k3s itself. There is no k3s binary on these machines, so the payload is a shell script that plays
its server's start (`server --check`, run by the exec health check inside the host root): it refuses a datastore
that a newer version marked, marks it with its own version (a migration), and fails when built broken. The host
root gets the machine's /usr/bin and /usr/lib (read-only bind mounts) so that the script, sh and sqlite3 run
inside it as on a host."""

import json
import os
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import HOIST_BIN, run_hoist, run_recorded, run_status, tree_manifest
from dbus_harness import system_bus  # noqa: F401 (a fixture)
from payloads import rollback, state_of, upgrade

V1, V2, V3 = "v1.30.1+k3s1", "v1.30.2+k3s1", "v1.31.0+k3s1"
DB = "var/lib/rancher/k3s/server/db/state.db"

STANDIN = r'''#!/bin/sh
# A stand-in for k3s @VERSION@ (integration/test_datastore.py): `server --check` plays the server's start.
VERSION=@VERSION@
DB=/var/lib/rancher/k3s/server/db/state.db
case "$1" in
--version) echo "k3s version $VERSION (stand-in)" ;;
server)
    mark=$(sqlite3 "$DB" "select version from hoist_mark") || exit 1
    newest=$(printf '%s\n%s\n' "$mark" "$VERSION" | sort -V | tail -n 1)
    if [ "$newest" != "$VERSION" ]; then
        echo "refusing to start: the datastore is marked by $mark, newer than $VERSION"
        exit 1
    fi
    sqlite3 "$DB" "update hoist_mark set version='$VERSION'" || exit 1
    if [ "@BROKEN@" = 1 ]; then echo "$VERSION is broken"; exit 1; fi
    echo "$VERSION runs on the datastore"
    ;;
esac
'''

WRITER = r'''
import os, sqlite3, sys
db, count_file = sys.argv[1:3]
conn = sqlite3.connect(db, isolation_level=None)
conn.execute("pragma journal_mode=wal")
n = conn.execute("select count(*) from kine").fetchone()[0]
with open(count_file + ".pid", "w") as f:
    f.write(str(os.getpid()))
while True:
    conn.execute("begin")
    conn.execute("insert into kine(name, value) values (?, ?)", ("/registry/%d" % n, os.urandom(2048)))
    conn.execute("commit")
    n += 1
    with open(count_file + ".tmp", "w") as f:
        f.write(str(n))
    os.replace(count_file + ".tmp", count_file)
'''

UNIT = """[Unit]
Description=Lightweight Kubernetes

[Service]
Type=notify
EnvironmentFile=-/etc/default/%N
EnvironmentFile=-/etc/sysconfig/%N
EnvironmentFile=-/etc/systemd/system/k3s.service.env
Restart=always
ExecStart=/usr/local/bin/k3s \\
    server \\
"""

CHECK = ("--health-check", "exec:/usr/local/bin/k3s server --check", "--health-settle", "0", "--health-timeout", "3")


def standin(tmp_path, version, broken=False):
    directory = tmp_path / f"payload-{version}-{int(broken)}"
    directory.mkdir(exist_ok=True)
    path = directory / "k3s"
    path.write_text(STANDIN.replace("@VERSION@", version).replace("@BROKEN@", "1" if broken else "0"))
    path.chmod(0o755)
    return path


@pytest.fixture
def server_root(host_root):
    """The host root of a k3s server with SQLite, whose /usr/bin and /usr/lib are the machine's."""
    if os.geteuid() != 0:
        pytest.skip("needs root to bind-mount /usr/bin and /usr/lib into the host root")
    if shutil.which("sqlite3") is None:
        pytest.skip("needs Debian's sqlite3 (scripts/apt-packages)")
    mounted = []
    for directory in ("usr/bin", "usr/lib", "usr/lib64"):
        if not Path("/" + directory).is_dir():
            continue
        target = host_root / directory
        target.mkdir(parents=True)
        subprocess.run(["mount", "--bind", "/" + directory, str(target)], check=True)
        subprocess.run(["mount", "-o", "remount,bind,ro", str(target)], check=True)
        mounted.append(target)
    for link, to in (("bin", "usr/bin"), ("lib", "usr/lib"), ("lib64", "usr/lib64"), ("sbin", "usr/bin")):
        if (host_root / to).is_dir():
            (host_root / link).symlink_to(to)
    (host_root / "tmp").mkdir()
    (host_root / "usr/local/bin").mkdir(parents=True)
    unit = host_root / "etc/systemd/system/k3s.service"
    unit.parent.mkdir(parents=True)
    unit.write_text(UNIT)
    db = host_root / DB
    db.parent.mkdir(parents=True)
    conn = sqlite3.connect(db)
    conn.execute("pragma journal_mode=wal")
    conn.execute("create table kine (id integer primary key autoincrement, name text, value blob)")
    conn.execute("create table hoist_mark (version text)")
    conn.execute("insert into hoist_mark values ('v0')")
    conn.commit()
    conn.close()
    yield host_root
    for target in reversed(mounted):
        subprocess.run(["umount", "-l", str(target)], check=False)


def k3s_args(source, version, *extra):
    return ["--component", "k3s", "--kind", "file", "--source", source, "--destination", "/usr/local/bin/k3s",
            "--version", version, "--version-scheme", "k3s", "--restart", "k3s", *extra]


def rows(db):
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute("select count(*) from kine").fetchone()[0]
    finally:
        conn.close()


def mark(db):
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute("select version from hoist_mark").fetchone()[0]
    finally:
        conn.close()


def integrity(db):
    return subprocess.run(["sqlite3", str(db), "pragma integrity_check"], capture_output=True, text=True,
                          check=True).stdout.strip()


class Writer:
    """The server's writes: a process that inserts rows until systemd's StopUnit (the test double) kills it."""

    def __init__(self, db, tmp_path):
        self.count_file = tmp_path / "written"
        self.process = subprocess.Popen([sys.executable, "-c", WRITER, str(db), str(self.count_file)])
        self.reaper = threading.Thread(target=self.process.wait, daemon=True)
        self.reaper.start()
        deadline = time.monotonic() + 10
        while not self.count_file.exists() or int(self.count_file.read_text()) < 200:
            assert time.monotonic() < deadline and self.process.poll() is None, "the writer did not write"
            time.sleep(0.02)
        self.pidfile = Path(str(self.count_file) + ".pid")

    def committed(self):
        return int(self.count_file.read_text())

    def stop(self):
        if self.process.poll() is None:
            self.process.kill()
        self.reaper.join(10)


def test_a_failed_upgrade_of_a_sqlite_server_restores_the_copy_taken_with_the_server_stopped(
        server_root, tmp_path, system_bus):
    db = server_root / DB
    systemd = system_bus.start("systemd_manager", stop_kills={"k3s.service": str(tmp_path / "written.pid")})
    upgrade(server_root, *k3s_args(standin(tmp_path, V1), V1, *CHECK), env=system_bus.env(), check=0)
    assert mark(db) == V1
    writer = Writer(db, tmp_path)
    try:
        result = upgrade(server_root, *k3s_args(standin(tmp_path, V3, broken=True), V3, *CHECK),
                         env=system_bus.env(), check=1)
    finally:
        writer.stop()
    copy = server_root / f"var/lib/hoist/k3s/datastore/hoist-{V1}-to-{V3}"
    # The copy: whole, and every row the writer committed before the stop, none after (a kill between a commit and
    # the count's write leaves the count one short).
    assert integrity(copy / "state.db") == "ok"
    assert rows(copy / "state.db") - writer.committed() in (0, 1)
    assert "k3s: a k3s server: k3s.service runs '/usr/local/bin/k3s server'; no configuration file; sqlite: " \
           "k3s's default" in result.stderr
    assert f"k3s: snapshot of the sqlite datastore of {V1} in " in result.stderr
    # V3 migrated the datastore and failed; the copy went back with k3s stopped, then V1 ran on it again.
    assert f"switched back to k3s {V1} with its datastore restored from /var/lib/hoist/k3s/datastore/" \
           f"hoist-{V1}-to-{V3}; {V1} is healthy again" in result.stderr
    assert os.readlink(server_root / "usr/local/bin/k3s") == f"/var/lib/hoist/k3s/{V1}/k3s"
    assert mark(db) == V1
    assert integrity(db) == "ok"
    assert rows(db) == rows(copy / "state.db")
    calls = [c.split(" ")[0] for c in systemd.calls() if c.split(" ")[0] in ("StopUnit", "RestartUnit")]
    # started on V1; stopped for the copy, restarted on V3, stopped for the restore, restarted on V1
    assert calls == ["RestartUnit", "StopUnit", "RestartUnit", "StopUnit", "RestartUnit"]
    state = state_of(server_root, "k3s")
    assert state["current"] == V1 and state["last_result"]["outcome"] == "rolled-back"
    [snapshot] = state["datastore_snapshots"]
    assert snapshot["from"] == V1 and snapshot["to"] == V3 and snapshot["kind"] == "sqlite"
    assert snapshot["path"] == f"/var/lib/hoist/k3s/datastore/hoist-{V1}-to-{V3}"
    assert snapshot["how"] == "copied /var/lib/rancher/k3s/server/db/state.db with k3s.service stopped"
    status = run_status(server_root).stdout
    assert f"  datastore snapshot of {V1} (before {V3}, sqlite): {snapshot['path']}, taken at " in status


def test_without_a_snapshot_a_failed_minor_upgrade_is_kept_and_says_how_to_go_back(server_root, tmp_path,
                                                                                   system_bus):
    db = server_root / DB
    system_bus.start("systemd_manager")
    upgrade(server_root, *k3s_args(standin(tmp_path, V1), V1, *CHECK), env=system_bus.env(), check=0)
    result = upgrade(server_root, *k3s_args(standin(tmp_path, V3, broken=True), V3, *CHECK,
                                            "--datastore-snapshot=skip"), env=system_bus.env(), check=1)
    why = (f"not switched back to {V1}: {V3} is another Kubernetes minor than {V1} and may have migrated the sqlite "
           f"datastore, and there is no snapshot (sqlite: /var/lib/rancher/k3s/server/db/state.db); to go back: no "
           f"snapshot of {V1}'s datastore was taken (--datastore-snapshot=skip): restore {V1}'s datastore from your "
           f"own backup, then run 'hoist rollback --component k3s --to {V1}'")
    assert why in result.stderr
    # V1 would refuse the datastore V3 marked: the switch back that did not happen would have broken the server.
    assert mark(db) == V3
    assert os.readlink(server_root / "usr/local/bin/k3s") == f"/var/lib/hoist/k3s/{V3}/k3s"
    state = state_of(server_root, "k3s")
    assert state["current"] == V3 and state["last_result"]["outcome"] == "failed"
    assert state["kept_for_datastore"]["version"] == V3
    assert state["owed_health_checks"] == ["exec:/usr/local/bin/k3s server --check"]
    assert not state["quarantined"]
    status = run_status(server_root).stdout
    assert f"  kept {V3} since " in status and ", not switched back: " in status


def test_a_patch_upgrade_without_a_snapshot_switches_back_plainly(server_root, tmp_path, system_bus):
    system_bus.start("systemd_manager")
    upgrade(server_root, *k3s_args(standin(tmp_path, V1), V1, *CHECK), env=system_bus.env(), check=0)
    result = upgrade(server_root, *k3s_args(standin(tmp_path, V2, broken=True), V2, *CHECK,
                                            "--datastore-snapshot=skip"), env=system_bus.env(), check=1)
    assert f"k3s: {V1} and {V2} are one Kubernetes minor: the sqlite datastore needs no restore" in result.stderr
    assert os.readlink(server_root / "usr/local/bin/k3s") == f"/var/lib/hoist/k3s/{V1}/k3s"


def test_rollback_restore_snapshot_puts_the_copy_back_then_switches(server_root, tmp_path, system_bus):
    db = server_root / DB
    systemd = system_bus.start("systemd_manager")
    upgrade(server_root, *k3s_args(standin(tmp_path, V1), V1, *CHECK), env=system_bus.env(), check=0)
    upgrade(server_root, *k3s_args(standin(tmp_path, V3), V3, *CHECK), env=system_bus.env(), check=0)
    assert mark(db) == V3
    result = rollback(server_root, "--component", "k3s", "--to", V1, "--restore-snapshot", "--restart", "k3s",
                      env=system_bus.env(), check=0)
    assert f"k3s.service: restored {server_root / DB} from {server_root}/var/lib/hoist/k3s/datastore/" \
           f"hoist-{V1}-to-{V3}" in result.stderr
    assert mark(db) == V1
    assert os.readlink(server_root / "usr/local/bin/k3s") == f"/var/lib/hoist/k3s/{V1}/k3s"
    assert [c.split(" ")[0] for c in systemd.calls() if c.startswith(("StopUnit", "RestartUnit"))][-2:] == \
        ["StopUnit", "RestartUnit"]
    # Without --to, or for a version with no snapshot, it is refused.
    result = rollback(server_root, "--component", "k3s", "--restore-snapshot", "--restart", "k3s",
                      env=system_bus.env(), check=2)
    assert "--restore-snapshot needs --to" in result.stderr
    result = rollback(server_root, "--component", "k3s", "--to", V3, "--restore-snapshot", "--restart", "k3s",
                      "--allow-quarantined", env=system_bus.env(), check=2)
    assert f"--restore-snapshot: no datastore snapshot of {V3} is kept for k3s" in result.stderr


def test_rollback_restore_snapshot_on_a_full_disk_starts_the_server_again_on_the_version_it_ran(
        server_root, tmp_path, system_bus):
    db = server_root / DB
    systemd = system_bus.start("systemd_manager")
    upgrade(server_root, *k3s_args(standin(tmp_path, V1), V1, *CHECK), env=system_bus.env(), check=0)
    # Rows enough that the snapshot's copy does not fit in what the disk has left below.
    conn = sqlite3.connect(db)
    conn.executemany("insert into kine(name, value) values (?, ?)",
                     [(f"/registry/{n}", os.urandom(2048)) for n in range(400)])
    conn.commit()
    conn.close()
    upgrade(server_root, *k3s_args(standin(tmp_path, V3), V3, *CHECK), env=system_bus.env(), check=0)
    assert mark(db) == V3
    # The database's directory becomes a small disk of its own, then is filled all but 64 KiB.
    held = tmp_path / "db-held"
    shutil.copytree(db.parent, held)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(db.parent)], check=True)
    try:
        for entry in held.iterdir():
            shutil.copy2(entry, db.parent / entry.name)
        free = os.statvfs(db.parent)
        filler = db.parent / "filler"
        filler.write_bytes(b"\0" * (free.f_bavail * free.f_frsize - 65536))
        before = db.read_bytes()
        calls_before = len(systemd.calls())
        result = rollback(server_root, "--component", "k3s", "--to", V1, "--restore-snapshot", "--restart", "k3s",
                          env=system_bus.env(), check=1)
        assert "No space left on device" in result.stderr
        message = result.stderr.splitlines()[-1]
        assert f"--restore-snapshot: restoring /var/lib/hoist/k3s/datastore/hoist-{V1}-to-{V3} failed: " in message
        assert f"k3s stays on {V3}, k3s.service started again on it; re-run the rollback once the cause is " \
               "fixed" in message
        # The database as the server left it, no temporary beside it, the server stopped and started again on V3.
        assert db.read_bytes() == before and mark(db) == V3
        assert sorted(p.name for p in db.parent.iterdir()) == sorted(["filler", *(p.name for p in held.iterdir())])
        assert os.readlink(server_root / "usr/local/bin/k3s") == f"/var/lib/hoist/k3s/{V3}/k3s"
        calls = [c.split(" ")[0] for c in systemd.calls()[calls_before:]]
        assert [c for c in calls if c in ("StopUnit", "RestartUnit")] == ["StopUnit", "RestartUnit"]
        state = state_of(server_root, "k3s")
        assert state["current"] == V3 and state["owed_restarts"] == [] and state["rollback"] is None
        assert state["last_result"]["outcome"] == "failed" and state["last_result"]["message"] == \
            message.split("error: ", 1)[1]
        # Room again: the same command restores and switches.
        filler.unlink()
        rollback(server_root, "--component", "k3s", "--to", V1, "--restore-snapshot", "--restart", "k3s",
                 env=system_bus.env(), check=0)
        assert mark(db) == V1 and integrity(db) == "ok"
        assert os.readlink(server_root / "usr/local/bin/k3s") == f"/var/lib/hoist/k3s/{V1}/k3s"
    finally:
        subprocess.run(["umount", "-l", str(db.parent)], check=False)


def test_rollback_restore_snapshot_refuses_a_snapshot_removed_by_hand_before_stopping_anything(
        server_root, tmp_path, system_bus):
    systemd = system_bus.start("systemd_manager")
    upgrade(server_root, *k3s_args(standin(tmp_path, V1), V1, *CHECK), env=system_bus.env(), check=0)
    upgrade(server_root, *k3s_args(standin(tmp_path, V3), V3, *CHECK), env=system_bus.env(), check=0)
    (server_root / f"var/lib/hoist/k3s/datastore/hoist-{V1}-to-{V3}/state.db").unlink()
    calls_before = len(systemd.calls())
    result = rollback(server_root, "--component", "k3s", "--to", V1, "--restore-snapshot", "--restart", "k3s",
                      env=system_bus.env(), check=1)
    assert f"--restore-snapshot: the datastore snapshot of {V1} is not whole: " in result.stderr
    assert "state.db" in result.stderr and "nothing was changed" in result.stderr
    assert not [c for c in systemd.calls()[calls_before:] if c.startswith(("StopUnit", "RestartUnit"))]
    assert mark(server_root / DB) == V3
    assert os.readlink(server_root / "usr/local/bin/k3s") == f"/var/lib/hoist/k3s/{V3}/k3s"


def test_an_external_datastore_is_refused_before_anything_changes_unless_skipped(server_root, tmp_path,
                                                                                system_bus):
    system_bus.start("systemd_manager")
    upgrade(server_root, *k3s_args(standin(tmp_path, V1), V1), env=system_bus.env(), check=0)
    (server_root / "etc/systemd/system/k3s.service.env").write_text(
        "K3S_DATASTORE_ENDPOINT='postgres://k3s:secret@db.example:5432/k3s'\n")
    before = json.dumps(state_of(server_root, "k3s")["versions"])
    result = upgrade(server_root, *k3s_args(standin(tmp_path, V2), V2), env=system_bus.env(), check=1)
    assert ("k3s: k3s server (k3s.service) keeps its datastore outside this host (postgres://db.example:5432/k3s): "
            "hoist cannot snapshot it") in result.stderr
    assert "secret" not in result.stderr
    assert os.readlink(server_root / "usr/local/bin/k3s") == f"/var/lib/hoist/k3s/{V1}/k3s"
    assert not (server_root / f"var/lib/hoist/k3s/{V2}").exists()
    assert json.dumps(state_of(server_root, "k3s")["versions"]) == before
    upgrade(server_root, *k3s_args(standin(tmp_path, V2), V2, "--datastore-snapshot=skip"), env=system_bus.env(),
            check=0)


def test_too_little_space_for_the_snapshot_is_refused_before_anything_changes(server_root, tmp_path, system_bus):
    system_bus.start("systemd_manager")
    upgrade(server_root, *k3s_args(standin(tmp_path, V1), V1), env=system_bus.env(), check=0)
    small = server_root / "var/lib/hoist/k3s/datastore"
    small.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(small)], check=True)
    try:
        result = upgrade(server_root, *k3s_args(standin(tmp_path, V2), V2), env=system_bus.env(), check=1)
    finally:
        subprocess.run(["umount", "-l", str(small)], check=False)
    assert "k3s: k3s server (k3s.service): not enough free space for the sqlite snapshot in " in result.stderr
    assert "; nothing was changed" in result.stderr
    assert os.readlink(server_root / "usr/local/bin/k3s") == f"/var/lib/hoist/k3s/{V1}/k3s"
    assert not (server_root / f"var/lib/hoist/k3s/{V2}").exists()


# ---- embedded etcd: a real etcd (Debian's etcd-server 3.4) under the stand-in ----

ETCD_STANDIN = r'''#!/bin/sh
# A stand-in for k3s @VERSION@ with embedded etcd (integration/test_datastore.py). Its etcd is a real one that the
# test runs: `etcd-snapshot save` is `etcdctl snapshot save` into k3s's snapshot directory under k3s's file name
# (<name>-<node>-<unix time>), `server --cluster-reset --cluster-reset-restore-path=F` is `etcdctl snapshot restore`
# into the member's data directory, and `server --check` plays the server's start on the datastore.
VERSION=@VERSION@
export ETCDCTL_API=3
@ETCDCTL_ENV@
ENDPOINT=@ENDPOINT@
PEER=@PEER@
DATA=/var/lib/rancher/k3s
case "$1" in
--version) echo "k3s version $VERSION (stand-in)" ;;
etcd-snapshot)
    [ "$2" = save ] || exit 2
    shift 2
    name=on-demand dir=$DATA/server/db/snapshots
    while [ $# -gt 0 ]; do
        case "$1" in
        --name) name=$2; shift 2 ;;
        --etcd-snapshot-dir) dir=$2; shift 2 ;;
        --data-dir) DATA=$2; shift 2 ;;
        *) shift ;;
        esac
    done
    exec etcdctl --endpoints "$ENDPOINT" snapshot save "$dir/$name-node1-$(date +%s)"
    ;;
server)
    for arg in "$@"; do
        case "$arg" in
        --cluster-reset-restore-path=*)
            rm -rf "$DATA/server/db/etcd"
            exec etcdctl snapshot restore "${arg#*=}" --data-dir "$DATA/server/db/etcd" --name node1 \
                --initial-cluster "node1=$PEER" --initial-advertise-peer-urls "$PEER"
            ;;
        esac
    done
    mark=$(etcdctl --endpoints "$ENDPOINT" get hoist/mark --print-value-only) || exit 1
    newest=$(printf '%s\n%s\n' "$mark" "$VERSION" | sort -V | tail -n 1)
    if [ "$newest" != "$VERSION" ]; then
        echo "refusing to start: the datastore is marked by $mark, newer than $VERSION"
        exit 1
    fi
    etcdctl --endpoints "$ENDPOINT" put hoist/mark "$VERSION" || exit 1
    if [ "@BROKEN@" = 1 ]; then echo "$VERSION is broken"; exit 1; fi
    echo "$VERSION runs on the datastore"
    ;;
esac
'''

ETCD_DIR = "var/lib/rancher/k3s/server/db/etcd"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Etcd:
    """Debian's etcd as the server's embedded etcd: one member whose data directory is k3s's, in the host root."""

    def __init__(self, host_root, tmp_path):
        self.data = host_root / ETCD_DIR
        self.client = f"http://127.0.0.1:{free_port()}"
        self.peer = f"http://127.0.0.1:{free_port()}"
        self.pidfile = tmp_path / "etcd.pid"
        self.log = tmp_path / "etcd.log"
        self.process = None

    def start(self):
        self.process = subprocess.Popen(
            ["etcd", "--name", "node1", "--data-dir", str(self.data), "--listen-client-urls", self.client,
             "--advertise-client-urls", self.client, "--listen-peer-urls", self.peer,
             "--initial-advertise-peer-urls", self.peer, "--initial-cluster", f"node1={self.peer}"],
            stdout=subprocess.DEVNULL, stderr=open(self.log, "ab"))
        self.pidfile.write_text(str(self.process.pid))
        deadline = time.monotonic() + 30
        while self.ctl("endpoint", "health", check=False).returncode != 0:
            assert self.process.poll() is None, "etcd exited: " + self.log.read_text()[-2000:]
            assert time.monotonic() < deadline, "etcd did not become healthy"
            time.sleep(0.1)

    def stop(self):
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(20)

    def ctl(self, *args, check=True):
        return subprocess.run(["etcdctl", "--endpoints", self.client, *args], env={**os.environ, "ETCDCTL_API": "3"},
                              capture_output=True, text=True, check=check)

    def get(self, key):
        return self.ctl("get", key, "--print-value-only").stdout.strip()

    def count(self, prefix):
        return len([key for key in self.ctl("get", prefix, "--prefix", "--keys-only").stdout.splitlines() if key])


def etcd_standin(tmp_path, version, etcd, broken=False):
    directory = tmp_path / f"payload-etcd-{version}-{int(broken)}"
    directory.mkdir(exist_ok=True)
    path = directory / "k3s"
    path.write_text(ETCD_STANDIN.replace("@VERSION@", version).replace("@BROKEN@", "1" if broken else "0")
                    .replace("@ENDPOINT@", etcd.client).replace("@PEER@", etcd.peer)
                    .replace("@ETCDCTL_ENV@", getattr(etcd, "standin_env", "")))
    path.chmod(0o755)
    return path


@pytest.fixture
def etcd_server(server_root, tmp_path):
    """server_root with a k3s server on embedded etcd (`cluster-init: true`), its etcd a real one, running."""
    if shutil.which("etcd") is None or shutil.which("etcdctl") is None:
        pytest.skip("needs Debian's etcd-server and etcd-client (scripts/apt-packages)")
    shutil.rmtree(server_root / "var/lib/rancher/k3s/server/db")
    config = server_root / "etc/rancher/k3s/config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text("cluster-init: true\n")
    etcd = Etcd(server_root, tmp_path)
    etcd.start()
    yield etcd
    etcd.stop()


def test_an_etcd_server_is_snapshotted_by_etcd_snapshot_save_and_kept_when_hoist_cannot_count_its_members(
        server_root, etcd_server, tmp_path, system_bus):
    etcd = etcd_server
    systemd = system_bus.start("systemd_manager", stop_kills={"k3s.service": str(etcd.pidfile)})
    upgrade(server_root, *k3s_args(etcd_standin(tmp_path, V1, etcd), V1, *CHECK), env=system_bus.env(), check=0)
    assert etcd.get("hoist/mark") == V1
    for n in range(100):
        etcd.ctl("put", f"/registry/{n}", "x" * 512)
    result = upgrade(server_root, *k3s_args(etcd_standin(tmp_path, V3, etcd, broken=True), V3, *CHECK),
                     env=system_bus.env(), check=1)
    assert ("k3s: a k3s server: k3s.service runs '/usr/local/bin/k3s server'; /etc/rancher/k3s/config.yaml; etcd: "
            in result.stderr)
    assert (f"k3s.service: taking the etcd snapshot: /usr/local/bin/k3s etcd-snapshot save --name hoist-{V1}-to-{V3}"
            in result.stderr)
    state = state_of(server_root, "k3s")
    [snapshot] = state["datastore_snapshots"]
    assert snapshot["from"] == V1 and snapshot["to"] == V3 and snapshot["kind"] == "etcd"
    assert snapshot["path"].startswith(f"/var/lib/rancher/k3s/server/db/snapshots/hoist-{V1}-to-{V3}-node1-")
    assert snapshot["how"] == f"/usr/local/bin/k3s etcd-snapshot save --name hoist-{V1}-to-{V3} (exit 0)"
    taken = server_root / snapshot["path"].lstrip("/")
    assert snapshot["bytes"] == taken.stat().st_size > 0
    # etcd's own check of the file: its hash verifies, and it holds the mark and the 100 keys of V1's datastore.
    status = json.loads(subprocess.run(["etcdctl", "snapshot", "status", str(taken), "-w", "json"],
                                       env={**os.environ, "ETCDCTL_API": "3"}, capture_output=True, text=True,
                                       check=True).stdout)
    assert status["totalKey"] >= 101 and status["hash"] != 0
    # V3 marked the datastore and failed. hoist cannot count etcd's members (this etcd has no TLS, and k3s's client
    # certificate is not there), and a restore on one of several would split the cluster: it keeps V3 and names the
    # snapshot and the whole cluster's steps.
    assert "k3s.service: cannot list etcd's members, so their number is unknown: " in result.stderr
    assert "etcd_members" not in snapshot
    assert etcd.get("hoist/mark") == V3
    assert os.readlink(server_root / "usr/local/bin/k3s") == f"/var/lib/hoist/k3s/{V3}/k3s"
    assert ("hoist cannot tell how many members etcd has, and a restore on one of several would split the cluster "
            f"(etcd: /var/lib/rancher/k3s/server/db/etcd); the snapshot {snapshot['path']} holds {V1}'s datastore"
            in result.stderr)
    reset = (f"/var/lib/hoist/k3s/{V1}/k3s server --cluster-reset --cluster-reset-restore-path={snapshot['path']}")
    assert reset in result.stderr
    assert state["kept_for_datastore"]["version"] == V3 and state["current"] == V3
    assert "StopUnit" not in [c.split(" ")[0] for c in systemd.calls()]
    # rollback --restore-snapshot refuses what one node cannot do, with the same steps.
    refused = rollback(server_root, "--component", "k3s", "--to", V1, "--restore-snapshot", "--restart", "k3s",
                       env=system_bus.env(), check=2)
    assert "--restore-snapshot: hoist cannot tell how many members etcd has" in refused.stderr
    assert reset in refused.stderr
    assert os.readlink(server_root / "usr/local/bin/k3s") == f"/var/lib/hoist/k3s/{V3}/k3s"
    # The steps, done as the message says on this one server, bring V1's datastore back: etcd stopped, the reset
    # run by V1's kept binary, rollback, etcd started.
    etcd.stop()
    subprocess.run(["chroot", str(server_root), *reset.split(" ")], check=True, capture_output=True)
    rollback(server_root, "--component", "k3s", "--to", V1, "--restart", "k3s", env=system_bus.env(), check=0)
    etcd.start()
    assert etcd.get("hoist/mark") == V1
    assert etcd.count("/registry/") == 100
    assert os.readlink(server_root / "usr/local/bin/k3s") == f"/var/lib/hoist/k3s/{V1}/k3s"



def test_an_etcd_that_cannot_be_snapshotted_fails_the_upgrade_before_the_switch(server_root, etcd_server, tmp_path,
                                                                                system_bus):
    """etcd down (here: stopped; on a cluster, a member that lost its quorum): `etcd-snapshot save` does not finish
    (etcdctl 3.4 keeps dialling), --datastore-timeout ends it, and the run fails before the switch; k3s was never
    stopped and V1 stays current."""
    etcd = etcd_server
    systemd = system_bus.start("systemd_manager")
    upgrade(server_root, *k3s_args(etcd_standin(tmp_path, V1, etcd), V1, *CHECK), env=system_bus.env(), check=0)
    etcd.stop()
    result = upgrade(server_root, *k3s_args(etcd_standin(tmp_path, V2, etcd), V2, *CHECK, "--datastore-timeout", "5"),
                     env=system_bus.env(), check=1)
    assert "failed to snapshot the etcd datastore: " in result.stderr
    assert result.stderr.rstrip().endswith("/usr/local/bin/k3s': it did not finish within 5 s")
    assert os.readlink(server_root / "usr/local/bin/k3s") == f"/var/lib/hoist/k3s/{V1}/k3s"
    assert not (server_root / f"var/lib/hoist/k3s/{V2}").exists()
    state = state_of(server_root, "k3s")
    assert state["current"] == V1 and state["last_result"]["outcome"] == "failed"
    assert not state.get("datastore_snapshots")
    assert [c.split(" ")[0] for c in systemd.calls() if c.startswith(("StopUnit", "RestartUnit"))] == ["RestartUnit"]

# ---- embedded etcd with TLS, as k3s runs it: hoist counts its members (docs/datastore.md) ----

TLS_DIR = "var/lib/rancher/k3s/server/tls/etcd"


def etcd_pki(directory):
    """etcd's certificates where k3s keeps them (<data-dir>/server/tls/etcd): server-ca.crt, the etcd server's
    server-client.crt for 127.0.0.1, and client.crt, the one k3s's own etcd clients use."""
    directory.mkdir(parents=True)

    def openssl(*args):
        subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True)
    key = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes")
    openssl("req", "-x509", *key, "-keyout", directory / "server-ca.key", "-out", directory / "server-ca.crt",
            "-days", "2", "-subj", "/CN=etcd-server-ca")
    for name, extensions in (("server-client", "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                                               "extendedKeyUsage=serverAuth,clientAuth\n"),
                             ("client", "extendedKeyUsage=clientAuth\n")):
        (directory / f"{name}.ext").write_text(extensions)
        openssl("req", *key, "-keyout", directory / f"{name}.key", "-out", directory / f"{name}.csr", "-subj",
                f"/CN=etcd-{name}")
        openssl("x509", "-req", "-in", directory / f"{name}.csr", "-CA", directory / "server-ca.crt", "-CAkey",
                directory / "server-ca.key", "-CAcreateserial", "-out", directory / f"{name}.crt", "-days", "2",
                "-extfile", directory / f"{name}.ext")


class TlsEtcd:
    """Debian's etcd as a k3s server's embedded etcd, as k3s runs it: TLS with client certificates (etcd_pki()),
    `size` members, the first one this server's, with k3s's data directory in the host root and its client URL
    https://127.0.0.1:2379, where k3s's etcd listens and hoist asks. That port is the machine's, so the members and
    every process that talks to them run in a network namespace of their own (`ip netns`, entered with nsenter)."""

    def __init__(self, host_root, tmp_path, size):
        self.namespace = f"hoist-etcd-{os.getpid()}-{size}"
        subprocess.run(["ip", "netns", "add", self.namespace], check=True)
        self.enter = ("nsenter", f"--net=/run/netns/{self.namespace}")
        subprocess.run([*self.enter, "ip", "link", "set", "lo", "up"], check=True)
        self.tls = host_root / TLS_DIR
        etcd_pki(self.tls)
        self.client = "https://127.0.0.1:2379"
        self.peer = "http://127.0.0.1:2380"
        self.standin_env = (f"export ETCDCTL_CACERT=/{TLS_DIR}/server-ca.crt ETCDCTL_CERT=/{TLS_DIR}/client.crt "
                            f"ETCDCTL_KEY=/{TLS_DIR}/client.key")
        self.members = [("node1", host_root / ETCD_DIR, 2379, 2380)]
        self.members += [(f"node{n}", tmp_path / f"etcd-node{n}", 2379 + 10 * n, 2380 + 10 * n)
                         for n in range(2, size + 1)]
        self.initial = ",".join(f"{name}=http://127.0.0.1:{peer}" for name, _, _, peer in self.members)
        self.pidfiles = [tmp_path / f"etcd-{name}.pid" for name, _, _, _ in self.members]
        self.pidfile = self.pidfiles[0]

    def argv(self, index):
        name, data, client, peer = self.members[index]
        return [*self.enter, "etcd", "--name", name, "--data-dir", str(data),
                "--listen-client-urls", f"https://127.0.0.1:{client}",
                "--advertise-client-urls", f"https://127.0.0.1:{client}",
                "--cert-file", str(self.tls / "server-client.crt"), "--key-file", str(self.tls / "server-client.key"),
                "--client-cert-auth", "--trusted-ca-file", str(self.tls / "server-ca.crt"),
                "--listen-peer-urls", f"http://127.0.0.1:{peer}", "--initial-advertise-peer-urls",
                f"http://127.0.0.1:{peer}", "--initial-cluster", self.initial]

    def start(self):
        for index, pidfile in enumerate(self.pidfiles):
            with open(str(pidfile) + ".log", "ab") as log:
                process = subprocess.Popen(self.argv(index), stdout=log, stderr=log, start_new_session=True)
            # Reaped when it ends (the systemd double's StopUnit ends the first), so that its pid stops answering.
            threading.Thread(target=process.wait, daemon=True).start()
            pidfile.write_text(str(process.pid))
        deadline = time.monotonic() + 60
        while self.ctl("endpoint", "health", check=False).returncode != 0:
            assert time.monotonic() < deadline, "etcd did not become healthy: " + \
                Path(str(self.pidfile) + ".log").read_text()[-2000:]
            time.sleep(0.2)

    def stop(self):
        for pidfile in self.pidfiles:
            try:
                pid = int(pidfile.read_text())
                os.kill(pid, 15)
                for _ in range(200):
                    os.kill(pid, 0)
                    time.sleep(0.05)
            except (FileNotFoundError, ProcessLookupError, ValueError):
                pass

    def close(self):
        self.stop()
        subprocess.run(["ip", "netns", "delete", self.namespace], check=False)

    def ctl(self, *args, check=True):
        return subprocess.run([*self.enter, "etcdctl", "--endpoints", self.client, "--cacert",
                               str(self.tls / "server-ca.crt"), "--cert", str(self.tls / "client.crt"), "--key",
                               str(self.tls / "client.key"), *args], env={**os.environ, "ETCDCTL_API": "3"},
                              capture_output=True, text=True, check=check)

    def get(self, key):
        return self.ctl("get", key, "--print-value-only").stdout.strip()

    def count(self, prefix):
        return len([key for key in self.ctl("get", prefix, "--prefix", "--keys-only").stdout.splitlines() if key])

    def hoist(self, *args, env=None, check=None):
        return run_hoist(*args, env=env, check=check, wrapper=self.enter, timeout=180)


@pytest.fixture
def tls_etcd(server_root, tmp_path, request):
    """server_root with a k3s server on embedded etcd with TLS; request.param members, started."""
    for tool in ("etcd", "etcdctl", "openssl", "ip", "nsenter"):
        if shutil.which(tool) is None:
            pytest.skip(f"needs {tool} (scripts/apt-packages)")
    shutil.rmtree(server_root / "var/lib/rancher/k3s/server/db")
    config = server_root / "etc/rancher/k3s/config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text("cluster-init: true\n")
    etcd = TlsEtcd(server_root, tmp_path, request.param)
    try:
        etcd.start()
        yield etcd
    finally:
        etcd.close()


def k3s_upgrade(etcd, server_root, source, version, *extra, env=None, check=None):
    return etcd.hoist("upgrade", "--host-root", server_root, "--lock-timeout", "5", *k3s_args(source, version, *extra),
                      env=env, check=check)


def v1_on_etcd(etcd, server_root, tmp_path, system_bus):
    """systemd's double for k3s.service, whose stop ends the server's etcd and whose start starts it again, as the
    server's embedded etcd does; then V1 installed on the server. Returns the double."""
    systemd = system_bus.start("systemd_manager", stop_kills={"k3s.service": str(etcd.pidfile)},
                               start_runs={"k3s.service": etcd.argv(0)})
    k3s_upgrade(etcd, server_root, etcd_standin(tmp_path, V1, etcd), V1, *CHECK, env=system_bus.env(), check=0)
    return systemd


# The checks once more after a restore: etcd starts again first.
RESTORE_CHECK = ("--health-check", "exec:/usr/local/bin/k3s server --check", "--health-settle", "0",
                 "--health-timeout", "30")


@pytest.mark.parametrize("tls_etcd", [1], indirect=True, ids=["one-member"])
def test_a_failed_minor_upgrade_of_a_single_etcd_member_is_restored_by_cluster_reset_and_switched_back(
        server_root, tls_etcd, tmp_path, system_bus):
    etcd = tls_etcd
    systemd = v1_on_etcd(etcd, server_root, tmp_path, system_bus)
    for n in range(100):
        etcd.ctl("put", f"/registry/{n}", "x" * 512)
    result = k3s_upgrade(etcd, server_root, etcd_standin(tmp_path, V3, etcd, broken=True), V3, *RESTORE_CHECK,
                         env=system_bus.env(), check=1)
    # Counted through etcd's API with k3s's own client certificate, before the snapshot, V1 running.
    assert ("k3s.service: etcd has 1 member(s): node1 (listed by https://127.0.0.1:2379 with "
            "/var/lib/rancher/k3s/server/tls/etcd/client.crt)") in result.stderr
    [snapshot] = state_of(server_root, "k3s")["datastore_snapshots"]
    assert snapshot["kind"] == "etcd" and snapshot["etcd_members"] == 1
    # V3 marked the datastore and failed its checks: etcd reset to V1's snapshot by V1's binary, then switched back.
    reset = f"/var/lib/hoist/k3s/{V1}/k3s server --cluster-reset --cluster-reset-restore-path={snapshot['path']}"
    assert reset in result.stderr
    assert os.readlink(server_root / "usr/local/bin/k3s") == f"/var/lib/hoist/k3s/{V1}/k3s"
    assert etcd.get("hoist/mark") == V1
    assert etcd.count("/registry/") == 100
    state = state_of(server_root, "k3s")
    assert state["current"] == V1 and state.get("kept_for_datastore") is None
    # The restart onto V3; then, after its failed checks, the server stopped for the reset and started on V1.
    assert [c for c in systemd.calls() if c.startswith(("StopUnit", "StartUnit", "RestartUnit"))] == \
        ['RestartUnit "k3s.service" "replace"'] * 2 + ['StopUnit "k3s.service" "replace"',
                                                        'RestartUnit "k3s.service" "replace"']


@pytest.mark.parametrize("tls_etcd", [3], indirect=True, ids=["three-members"])
def test_a_failed_minor_upgrade_of_one_of_three_etcd_members_is_kept_with_the_whole_clusters_steps(
        server_root, tls_etcd, tmp_path, system_bus):
    etcd = tls_etcd
    systemd = v1_on_etcd(etcd, server_root, tmp_path, system_bus)
    result = k3s_upgrade(etcd, server_root, etcd_standin(tmp_path, V3, etcd, broken=True), V3, *CHECK,
                         env=system_bus.env(), check=1)
    listed = re.search(r"k3s\.service: etcd has 3 member\(s\): (.*) \(listed by https://127\.0\.0\.1:2379 with "
                       r"/var/lib/rancher/k3s/server/tls/etcd/client\.crt\)", result.stderr)
    assert listed and sorted(listed[1].split(", ")) == ["node1", "node2", "node3"], result.stderr
    [snapshot] = state_of(server_root, "k3s")["datastore_snapshots"]
    assert snapshot["etcd_members"] == 3
    # A restore here alone would split the cluster: V3 is kept, the snapshot and every server's steps named.
    assert (f"etcd has 3 members, and restoring it takes every server (etcd: /var/lib/rancher/k3s/server/db/etcd); "
            f"the snapshot {snapshot['path']} holds {V1}'s datastore") in result.stderr
    assert "etcd has other members, so every server takes part: stop k3s.service on every server" in result.stderr
    assert os.readlink(server_root / "usr/local/bin/k3s") == f"/var/lib/hoist/k3s/{V3}/k3s"
    state = state_of(server_root, "k3s")
    assert state["kept_for_datastore"]["version"] == V3
    assert "StopUnit" not in [c.split(" ")[0] for c in systemd.calls()]
    assert etcd.get("hoist/mark") == V3
    # rollback --restore-snapshot refuses what one node cannot do, saying why.
    refused = etcd.hoist("rollback", "--host-root", server_root, "--component", "k3s", "--to", V1,
                         "--restore-snapshot", "--restart", "k3s", env=system_bus.env(), check=2)
    assert "--restore-snapshot: etcd has 3 members, and restoring it takes every server" in refused.stderr
    assert os.readlink(server_root / "usr/local/bin/k3s") == f"/var/lib/hoist/k3s/{V3}/k3s"


# ---- SIGKILL at every rename of a server's upgrade: the snapshot, the switch, the restore, the switch back ----

def leftovers(host_root):
    """hoist's temporaries left beside k3s's database and among the snapshots."""
    found = []
    for directory in (host_root / DB).parent, host_root / "var/lib/hoist/k3s/datastore":
        if directory.is_dir():
            found += [str(directory / e) for e in os.listdir(directory) if e.startswith(".hoist-tmp.")]
    return found


def traced_renames(argv, env, tmp_path, names=("rename", "renameat", "renameat2")):
    """The calls of `names` (renames) one run of `argv` makes, in order: [(name, occurrence)]."""
    log = tmp_path / "strace.log"
    run_recorded(["strace", "-f", "-qq", "-o", str(log), "-e", "trace=" + ",".join(names), *map(str, argv)],
                 env=env, capture_output=True)
    counts, calls = {}, []
    for line in log.read_text().splitlines():
        match = re.match(r"^(?:\d+\s+)?(" + "|".join(names) + r")\(", line)
        if match and "resumed>" not in line:
            counts[match.group(1)] = counts.get(match.group(1), 0) + 1
            calls.append((match.group(1), counts[match.group(1)]))
    return calls


def killed_from_pristine(server_root, pristine, current, argv, env, name, occurrence):
    """The host's state and database put back as `pristine` holds them, k3s's link on `current`; then `argv` run
    and SIGKILLed when it enters the `occurrence`-th `name` (strace's fault injection, as test_crash.py)."""
    for target, source in ((server_root / "var/lib/hoist", pristine / "hoist"),
                           ((server_root / DB).parent, pristine / "db")):
        shutil.rmtree(target)
        shutil.copytree(source, target, symlinks=True)
    (server_root / "usr/local/bin/k3s").unlink()
    (server_root / "usr/local/bin/k3s").symlink_to(f"/var/lib/hoist/k3s/{current}/k3s")
    return run_recorded(["strace", "-f", "-qq", "-o", "/dev/null", "-e", f"trace={name}", "-e",
                         f"inject={name}:signal=KILL:when={occurrence}", *map(str, argv)],
                        env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")
def test_a_kill_at_any_rename_of_a_failed_sqlite_server_upgrade_leaves_the_datastore_with_its_version(
        server_root, tmp_path, system_bus):
    """SIGKILL (strace's fault injection, as test_crash.py) at each rename of an upgrade whose snapshot is taken,
    whose version fails and whose datastore is put back: the next run ends on V1 with V1's datastore, whole, and
    leaves no temporary of hoist's beside it."""
    system_bus.start("systemd_manager")
    db = server_root / DB
    upgrade(server_root, *k3s_args(standin(tmp_path, V1), V1, *CHECK), env=system_bus.env(), check=0)
    pristine = tmp_path / "pristine"
    shutil.copytree(server_root / "var/lib/hoist", pristine / "hoist", symlinks=True)
    shutil.copytree(db.parent, pristine / "db", symlinks=True)
    failing = [HOIST_BIN, "upgrade", "--host-root", server_root, "--lock-timeout", "5",
               *k3s_args(standin(tmp_path, V3, broken=True), V3, *CHECK)]
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", **system_bus.env()}
    calls = traced_renames(failing, env, tmp_path)
    assert len(calls) > 5, calls
    for name, occurrence in calls:
        killed = killed_from_pristine(server_root, pristine, V1, failing, env, name, occurrence)
        where = f"killed at {name} #{occurrence}: {killed.stderr[-300:]}"
        # Whatever the kill left, the next run goes back to V1 with V1's datastore, and cleans up after it.
        again = run_hoist(*failing[1:], env=system_bus.env())
        assert again.returncode in (1, 3), where + "\nthen: " + again.stderr[-1500:]
        assert os.readlink(server_root / "usr/local/bin/k3s") == f"/var/lib/hoist/k3s/{V1}/k3s", where
        assert mark(db) == V1, where
        assert integrity(db) == "ok", where
        assert leftovers(server_root) == [], where


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")
def test_a_kill_at_any_rename_or_unlink_of_rollback_restore_snapshot_is_finished_by_the_same_command(
        server_root, tmp_path, system_bus):
    """SIGKILL at each rename and unlink of `rollback --restore-snapshot` (the restore's copies, the new version's
    WAL removed, the copies renamed into place, the switch, the state): the same command run again ends on V1 with
    the snapshot's datastore, whole, and no temporary of hoist's left."""
    system_bus.start("systemd_manager")
    db = server_root / DB
    upgrade(server_root, *k3s_args(standin(tmp_path, V1), V1, *CHECK), env=system_bus.env(), check=0)
    upgrade(server_root, *k3s_args(standin(tmp_path, V3), V3, *CHECK), env=system_bus.env(), check=0)
    # The new version's writes still in its WAL, as a server that was killed leaves them.
    conn = sqlite3.connect(db)
    conn.execute("pragma wal_autocheckpoint=0")
    conn.execute("insert into kine(name, value) values ('/registry/after', x'00')")
    conn.commit()
    shutil.copy2(db, tmp_path / "state.db")
    shutil.copy2(Path(str(db) + "-wal"), tmp_path / "state.db-wal")
    conn.close()
    shutil.copy2(tmp_path / "state.db", db)
    shutil.copy2(tmp_path / "state.db-wal", Path(str(db) + "-wal"))
    assert Path(str(db) + "-wal").stat().st_size > 0
    pristine = tmp_path / "pristine"
    shutil.copytree(server_root / "var/lib/hoist", pristine / "hoist", symlinks=True)
    shutil.copytree(db.parent, pristine / "db", symlinks=True)
    argv = [HOIST_BIN, "rollback", "--host-root", server_root, "--lock-timeout", "5", "--component", "k3s", "--to",
            V1, "--restore-snapshot", "--restart", "k3s"]
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", **system_bus.env()}
    names = ("rename", "renameat", "renameat2", "unlink", "unlinkat", "linkat")
    calls = traced_renames(argv, env, tmp_path, names=names)
    assert ("unlinkat", 1) in calls and len(calls) > 5, calls
    for name, occurrence in calls:
        killed = killed_from_pristine(server_root, pristine, V3, argv, env, name, occurrence)
        where = f"killed at {name} #{occurrence}: {killed.stderr[-300:]}"
        assert killed.returncode != 0, where
        again = run_hoist(*argv[1:], env=system_bus.env())
        assert again.returncode == 0, where + "\nthen: " + again.stderr[-1500:]
        assert os.readlink(server_root / "usr/local/bin/k3s") == f"/var/lib/hoist/k3s/{V1}/k3s", where
        assert mark(db) == V1, where
        assert integrity(db) == "ok", where
        assert leftovers(server_root) == [], where
        assert state_of(server_root, "k3s")["current"] == V1, where


@pytest.mark.parametrize("tls_etcd", [3], indirect=True, ids=["three-members"])
def test_a_server_upgrade_with_an_etcd_member_down_is_refused_by_stage_before_anything_changes(
        server_root, tls_etcd, tmp_path, system_bus):
    etcd = tls_etcd
    v1_on_etcd(etcd, server_root, tmp_path, system_bus)
    args = ["--host-root", server_root, "--lock-timeout", "5", *k3s_args(etcd_standin(tmp_path, V3, etcd), V3)]
    # One member down (two of three keep the quorum, so the list still answers): refused before anything changes,
    # by the stage (a Plan's prepare step, before SUC cordons the node) and by the upgrade alike, naming the member.
    os.kill(int(etcd.pidfiles[2].read_text()), 15)
    deadline = time.monotonic() + 30
    while etcd.ctl("endpoint", "health", "--endpoints", "https://127.0.0.1:2409", check=False).returncode == 0:
        assert time.monotonic() < deadline, "node3 did not stop"
        time.sleep(0.2)
    unchanged = {path: entry for path, entry in tree_manifest(server_root / "var/lib/hoist/k3s").items()
                 if path != "state.json"}
    for command in ("stage", "upgrade"):
        refused = etcd.hoist(command, *args, env=system_bus.env(), check=1)
        last = refused.stderr.splitlines()[-1]
        assert "k3s: refusing to upgrade the k3s server while its etcd is not healthy (1 of 3 member(s): node3: " \
               "failed to ask etcd's member at https://127.0.0.1:2409 for its status: " in last, refused.stderr[-2000:]
        assert "nothing was changed" in last and "--etcd-health=skip" in last
        assert "k3s.service: etcd member node3 is not healthy" in refused.stderr
        assert "k3s.service: etcd member node2 is healthy: etcd 3." in refused.stderr
        assert os.readlink(server_root / "usr/local/bin/k3s") == f"/var/lib/hoist/k3s/{V1}/k3s"
        state = state_of(server_root, "k3s")
        assert state["current"] == V1 and state["staged"] is None and state["last_result"]["outcome"] == "failed"
        assert {path: entry for path, entry in tree_manifest(server_root / "var/lib/hoist/k3s").items()
                if path != "state.json"} == unchanged
    # The operator's way on: --etcd-health=skip asks nothing and stages.
    skipped = etcd.hoist("stage", *args, "--etcd-health=skip", check=0)
    assert "etcd member" not in skipped.stderr
    assert state_of(server_root, "k3s")["staged"]["version"] == V3
    # node3 back: every member healthy, the stage goes on (its version staged already).
    with open(str(etcd.pidfiles[2]) + ".log", "ab") as log:
        process = subprocess.Popen(etcd.argv(2), stdout=log, stderr=log, start_new_session=True)
    threading.Thread(target=process.wait, daemon=True).start()
    etcd.pidfiles[2].write_text(str(process.pid))
    deadline = time.monotonic() + 60
    while etcd.ctl("endpoint", "health", "--endpoints", "https://127.0.0.1:2409", check=False).returncode != 0:
        assert time.monotonic() < deadline, "node3 did not start again"
        time.sleep(0.2)
    healthy = etcd.hoist("stage", *args, check=0)
    for name in ("node1", "node2", "node3"):
        assert f"k3s.service: etcd member {name} is healthy: etcd 3." in healthy.stderr


def wait_for_orphans(pattern, timeout=60):
    """Waits until no process's command line matches `pattern`: what a killed hoist had started (etcdctl's snapshot
    save or restore) ends on its own, as it would on a node."""
    deadline = time.monotonic() + timeout
    while subprocess.run(["pgrep", "-f", pattern], capture_output=True).returncode == 0:
        assert time.monotonic() < deadline, f"'{pattern}' still runs after {timeout} s"
        time.sleep(0.1)


@pytest.mark.skipif(shutil.which("strace") is None or shutil.which("pgrep") is None,
                    reason="strace and pgrep are not installed")
@pytest.mark.parametrize("tls_etcd", [1], indirect=True, ids=["one-member"])
def test_a_kill_while_etcd_is_snapshotted_or_reset_is_finished_by_the_next_run(
        server_root, tls_etcd, tmp_path, system_bus):
    """SIGKILL of hoist while each program of a failed minor upgrade of a single etcd member runs: `etcd-snapshot
    save`, the first exec health check, and the cluster reset to the snapshot (hoist killed in its wait for the
    program's output; the program runs on, as on a node). The renames around them are the SQLite path's, killed at
    each in the test above. The next run (SUC's next pod runs the same command) ends on V1 with V1's keys."""
    etcd = tls_etcd
    v1_on_etcd(etcd, server_root, tmp_path, system_bus)
    for n in range(20):
        etcd.ctl("put", f"/registry/{n}", "x" * 64)
    etcd.stop()
    pristine = tmp_path / "pristine"
    shutil.copytree(server_root / "var/lib/hoist", pristine / "hoist", symlinks=True)
    shutil.copytree(server_root / ETCD_DIR, pristine / "etcd", symlinks=True)

    def reset():
        etcd.stop()
        for target, source in ((server_root / "var/lib/hoist", pristine / "hoist"),
                               (server_root / ETCD_DIR, pristine / "etcd")):
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(source, target, symlinks=True)
        (server_root / "usr/local/bin/k3s").unlink()
        (server_root / "usr/local/bin/k3s").symlink_to(f"/var/lib/hoist/k3s/{V1}/k3s")
        etcd.start()

    # The checks fail for the whole of --health-timeout: 10 s, which still covers etcd's start after the reset.
    check = ("--health-check", "exec:/usr/local/bin/k3s server --check", "--health-settle", "0",
             "--health-timeout", "10")
    failing = [HOIST_BIN, "upgrade", "--host-root", server_root, "--lock-timeout", "5",
               *k3s_args(etcd_standin(tmp_path, V3, etcd, broken=True), V3, *check)]
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", **system_bus.env()}
    reset()
    # Which of hoist's polls waits for which program: each program's exec, then hoist's next poll.
    log = tmp_path / "programs.log"
    run_recorded([*etcd.enter, "strace", "-f", "-qq", "-o", str(log), "-e", "trace=poll,execve", *map(str, failing)],
                 env=env, capture_output=True)
    lines = log.read_text().splitlines()
    hoist_pid = lines[0].split()[0]
    polls, waiting_for, points = 0, None, {}
    for line in lines:
        pid, call = line.split(None, 1)
        if call.startswith("execve(") and pid != hoist_pid:
            for program in ("etcd-snapshot", "--cluster-reset", "server\", \"--check"):
                if program in call and program not in points:
                    waiting_for = program
        elif call.startswith("poll(") and pid == hoist_pid:
            polls += 1
            if waiting_for is not None:
                points[waiting_for] = polls
                waiting_for = None
    assert sorted(points) == sorted(["etcd-snapshot", "--cluster-reset", "server\", \"--check"]), (points, lines[:40])
    for program, occurrence in points.items():
        reset()
        killed = run_recorded([*etcd.enter, "strace", "-qq", "-o", "/dev/null", "-e", "trace=poll", "-e",
                               f"inject=poll:signal=KILL:when={occurrence}", *map(str, failing)],
                              env=env, capture_output=True, text=True, timeout=180)
        where = f"killed while {program} ran (poll #{occurrence}): {killed.stderr[-300:]}"
        assert killed.returncode != 0, where
        wait_for_orphans("etcdctl.*snapshot")
        again = etcd.hoist(*failing[1:], env=system_bus.env())
        assert again.returncode in (1, 3), where + "\nthen: " + again.stderr[-2000:]
        assert os.readlink(server_root / "usr/local/bin/k3s") == f"/var/lib/hoist/k3s/{V1}/k3s", where
        assert etcd.get("hoist/mark") == V1, where + "\nthen: " + again.stderr[-2000:]
        assert etcd.count("/registry/") == 20, where
