"""The sync and tree kinds against rsync on random trees: for each seeded pair of trees (names from the whole byte
range, files, symlinks, fifos, directories, type changes between the versions, hard-link groups that split and
join, directory modes, owners, xattrs and mtimes that change, and bytes that change under the same size and mtime,
as in reproducible images), hoist syncs v1 then v2 into one destination and rsync -aHX -c --delete does the same
into another; `rsync -n -i -c -aHAX --delete` must find nothing to do from v2 to hoist's destination, the two
destinations must be equal entry by entry (hard-link groups included), hoist's content index must describe every
regular file of its destination (digest and stamp), and after `hoist rollback` nothing to do from v1. Half as many
pairs go through the tree kind: v2's version directory and, after the rollback, v1's must be what rsync finds
nothing to do for, with the payload's link groups; an eighth of them once more with io_uring refused to hoist, whose
read-ahead then takes its other path.
Every pair also goes through a payload directory kept and updated in place (`rsync -c --inplace` from v1 to v2),
so that hoist's second run meets payload files it read in the first: the unchanged ones it need not read again, the
ones rewritten in place under the same size and mtime it must.
HOIST_DIFF_TREES sets how many pairs (default 24); each prints its seed, and HOIST_TEST_SEED=N replays one. They
need root (chown)."""

import ctypes
import hashlib
import os
import random
import re
import shutil
import stat
import subprocess
import time
from pathlib import Path

import pytest

from payloads import read_content_index, rollback, upgrade

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: chown")

TREES = int(os.environ.get("HOIST_DIFF_TREES", "24"))
SEEDS = [int(os.environ["HOIST_TEST_SEED"])] if "HOIST_TEST_SEED" in os.environ else \
    [random.SystemRandom().randrange(2**32) for _ in range(TREES)]


def random_name(rng):
    while True:
        name = bytes(rng.choice([b for b in range(1, 256) if b != ord("/")]) for _ in range(rng.randint(1, 6)))
        if name not in (b".", b".."):
            return name


def plan(rng):
    """A random tree as {relpath: spec}; relpaths are bytes, specs say the type and the metadata."""
    entries = {}
    dirs = [b""]
    for _ in range(rng.randint(5, 30)):
        parent = rng.choice(dirs)
        rel = os.path.join(parent, random_name(rng)) if parent else random_name(rng)
        if rel in entries:
            continue
        kind = rng.choices(["file", "dir", "link", "fifo"], weights=[6, 3, 2, 1])[0]
        entries[rel] = {"kind": kind, "mode": rng.choice([0o644, 0o600, 0o755, 0o750, 0o4755]),
                        "uid": rng.choice([0, 1000, 1234]), "gid": rng.choice([0, 42, 5678]),
                        "data": bytes(rng.randrange(256) for _ in range(rng.randint(0, 40))),
                        "target": random_name(rng), "xattr": rng.choice([None, b"a", b"b"]),
                        "mtime": 1_600_000_000_000_000_000 + rng.randrange(10**15)}
        if kind == "dir":
            dirs.append(rel)
    return entries


def mutate(rng, entries):
    """v2 from v1: some entries change type, metadata or bytes, some go, some come."""
    v2 = {}
    for rel, spec in entries.items():
        if rng.random() < 0.1 and not any(other.startswith(rel + b"/") for other in entries):
            continue
        spec = dict(spec)
        roll = rng.random()
        if roll < 0.15 and not any(other.startswith(rel + b"/") for other in entries):
            spec["kind"] = rng.choice(["file", "dir", "link", "fifo"])
        elif roll < 0.4:
            spec["mode"] = rng.choice([0o644, 0o700, 0o755, 0o2750])
            spec["uid"] = rng.choice([0, 1000, 4321])
            spec["xattr"] = rng.choice([None, b"c"])
        if 0.4 <= roll < 0.6:
            # New bytes; as often as not the same size and mtime, as a reproducible image gives them.
            size = len(spec["data"]) if rng.random() < 0.5 else rng.randint(0, 40)
            spec["data"] = bytes(rng.randrange(256) for _ in range(size))
        else:
            spec["mtime"] += rng.choice([0, 0, 1, 10**9])
        v2[rel] = spec
    extra = plan(rng)
    for rel, spec in extra.items():
        parent = os.path.dirname(rel)
        if rel not in v2 and (not parent or v2.get(parent, {}).get("kind") == "dir"):
            v2[rel] = spec
    return v2


def build(root, entries, rng):
    """Writes the tree, then links some files into groups (groups differ between versions)."""
    os.mkdir(root)
    rb = bytes(root)
    for rel in sorted(entries, key=lambda r: r.count(b"/")):
        spec = entries[rel]
        path = os.path.join(rb, rel)
        if not os.path.isdir(os.path.dirname(path)):
            continue
        if spec["kind"] == "file":
            with open(path, "wb") as f:
                f.write(spec["data"])
        elif spec["kind"] == "dir":
            os.mkdir(path)
        elif spec["kind"] == "link":
            os.symlink(spec["target"], path)
        else:
            os.mkfifo(path)
    files = [rel for rel, spec in entries.items() if spec["kind"] == "file" and os.path.isfile(os.path.join(rb, rel))]
    rng.shuffle(files)
    for a, b in zip(files[0::3], files[1::3]):
        os.unlink(os.path.join(rb, b))
        os.link(os.path.join(rb, a), os.path.join(rb, b))
    # Metadata last, deepest first, so that writing an entry does not change its directory's mtime afterwards.
    for rel in sorted(entries, key=lambda r: r.count(b"/"), reverse=True):
        spec = entries[rel]
        path = os.path.join(rb, rel)
        if not os.path.lexists(path):
            continue
        os.chown(path, spec["uid"], spec["gid"], follow_symlinks=False)
        if spec["kind"] != "link":
            os.chmod(path, spec["mode"])
            if spec["xattr"] is not None and spec["kind"] in ("file", "dir"):
                os.setxattr(path, b"user.x", spec["xattr"])
        os.utime(path, ns=(spec["mtime"], spec["mtime"]), follow_symlinks=False)
    os.chmod(rb, 0o755)
    os.utime(rb, ns=(1_700_000_000_000_000_000 + rng.randrange(10**9),) * 2)
    return root


def same_size_same_mtime_changes(v1, v2):
    """The files of v2 whose bytes differ from v1's at the same path under the same size and mtime: what a quick
    check (rsync's, or hoist's before content decided) keeps stale."""
    changed = []
    for dirpath, _, filenames in os.walk(bytes(v2)):
        for name in filenames:
            new = os.path.join(dirpath, name)
            old = os.path.join(bytes(v1), os.path.relpath(new, bytes(v2)))
            a, b = os.lstat(new), os.lstat(old) if os.path.lexists(old) else None
            if (b is not None and stat.S_ISREG(a.st_mode) and stat.S_ISREG(b.st_mode) and a.st_size == b.st_size
                    and a.st_mtime_ns == b.st_mtime_ns and open(new, "rb").read() != open(old, "rb").read()):
                changed.append(os.path.relpath(new, bytes(v2)))
    return changed


def check_index(index_file, root, ctime_may_move=False):
    """The content index hoist keeps for `root` names every regular file in it, with its SHA-256 and stamp. In a
    sync, an entry's ctime may be older than the file's: another name of its inode was moved into the backup after it
    was recorded (a hard-link group that split). Such an entry vouches for nothing, and the next run reads the file."""
    index = read_content_index(index_file)
    if ctime_may_move:
        for rel, (digest, ino, size, mtime, ctime) in list(index.items()):
            actual = os.lstat(os.path.join(bytes(root), rel)).st_ctime_ns
            assert ctime <= actual, rel
            index[rel] = (digest, ino, size, mtime, actual)
    files = {}
    rb = bytes(root)
    for dirpath, _, filenames in os.walk(rb):
        for name in filenames:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode):
                with open(path, "rb") as f:
                    digest = hashlib.sha256(f.read()).digest()
                files[os.path.relpath(path, rb)] = (digest, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    assert index == files


def rsync(*args):
    return subprocess.run(["rsync", *map(str, args)], capture_output=True, check=True).stdout.splitlines()


def describe(root):
    entries, inodes = {}, {}
    rb = bytes(root)
    for dirpath, dirnames, filenames in os.walk(rb):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, rb)
            st = os.lstat(path)
            entry = (stat.S_IFMT(st.st_mode), st.st_mode & 0o7777, st.st_uid, st.st_gid, st.st_mtime_ns,
                     tuple(sorted((k, os.getxattr(path, k, follow_symlinks=False))
                                  for k in os.listxattr(path, follow_symlinks=False))),
                     open(path, "rb").read() if stat.S_ISREG(st.st_mode) else
                     os.readlink(path) if stat.S_ISLNK(st.st_mode) else None)
            entries[rel] = entry
            if stat.S_ISREG(st.st_mode):
                inodes.setdefault(st.st_ino, []).append(rel)
    return entries, sorted(sorted(g) for g in inodes.values() if len(g) > 1)


def random_versions(tmp_path, seed):
    """Two random trees from `seed` (printed, for HOIST_TEST_SEED to replay it): tmp_path/v1 and tmp_path/v2, a
    mutation of v1 whose changed files no quick check (size and mtime) takes for unchanged."""
    print(f"HOIST_TEST_SEED={seed}")
    rng = random.Random(seed)
    first = plan(rng)
    v1 = build(tmp_path / "v1", first, rng)
    v2 = build(tmp_path / "v2", mutate(rng, first), rng)
    print(f"same size and mtime, other bytes: {same_size_same_mtime_changes(v1, v2)}")
    return v1, v2


@pytest.mark.parametrize("seed", SEEDS)
def test_sync_and_rollback_agree_with_rsync_on_a_random_tree(host_root, tmp_path, seed):
    v1, v2 = random_versions(tmp_path, seed)
    dest = host_root / "opt/app"
    args = ["--component", "app", "--kind", "sync", "--destination", "/opt/app"]
    upgrade(host_root, *args, "--source", v1, "--version", "1.0.0", check=0)
    assert rsync("-n", "-i", "-c", "-aHAX", "--delete", f"{v1}/", f"{dest}/") == []
    upgrade(host_root, *args, "--source", v2, "--version", "2.0.0", check=0)
    assert rsync("-n", "-i", "-c", "-aHAX", "--delete", f"{v2}/", f"{dest}/") == []
    check_index(host_root / "var/lib/hoist/app/.index/2.0.0", dest, ctime_may_move=True)
    peer = tmp_path / "rsync"
    # The peer without -A: the trees have no ACLs, and rsync's receiver (3.5.0 here) fails (exit 23) reading the ACL of
    # some names the trees do have.
    rsync("-aHX", "--delete", f"{v1}/", f"{peer}/")
    # --checksum: rsync's quick check keeps stale bytes when only the content changed; hoist compares content.
    rsync("-aHX", "-c", "--delete", f"{v2}/", f"{peer}/")
    ours, theirs, source = describe(dest), describe(peer), describe(v2)
    assert sorted(ours[0]) == sorted(theirs[0]) == sorted(source[0])
    for rel, entry in ours[0].items():
        # hoist's copy is the source's, mtimes to the nanosecond.
        assert entry == source[0][rel], rel
        other, truth = theirs[0][rel], source[0][rel]
        # rsync (3.5.0 here) sets some mtimes a nanosecond off the source's. And with -H it changes an inode's mode and
        # owner in place: a name that left a link group in which another name's mode or owner changed takes that
        # change along (seed 4184407993: a file linked to a new name keeps 0755 root:5678 from its old partner, where
        # the source has 0644 1000:42), until rsync's next run. That is rsync's departure from the source, not a
        # disagreement: hoist is compared with rsync where rsync is the source's.
        if other[:4] + other[5:] == truth[:4] + truth[5:]:
            assert abs(entry[4] - other[4]) <= 1_000, rel
    assert ours[1] == source[1]
    rollback(host_root, "--component", "app", check=0)
    assert rsync("-n", "-i", "-c", "-aHAX", "--delete", f"{v1}/", f"{dest}/") == []


# Runs hoist with io_uring_setup refused (ENOSYS), as a container runtime's default seccomp profile refuses it: the
# read-ahead then advises the kernel file by file.
DENY_SYSCALLS = Path(os.environ.get("HOIST_BUILD_DIR") or "/nonexistent") / "hoist-deny-syscalls"
IO_URING_SETUP = 425  # the same number on every architecture


@pytest.mark.parametrize("seed,io_uring", [(seed, "used") for seed in SEEDS[: max(1, len(SEEDS) // 2)]] +
                         [(seed, "refused") for seed in SEEDS[: max(1, len(SEEDS) // 8)]])
def test_a_tree_upgrade_and_rollback_agree_with_rsync_on_a_random_tree(host_root, tmp_path, seed, io_uring):
    if io_uring == "refused" and not DENY_SYSCALLS.exists():
        pytest.skip(f"{DENY_SYSCALLS} is not built (HOIST_BUILD_DIR unset): no way to refuse io_uring to hoist")
    wrapper = (str(DENY_SYSCALLS), str(IO_URING_SETUP), "--") if io_uring == "refused" else ()
    v1, v2 = random_versions(tmp_path, seed)
    app = host_root / "opt/app"
    args = ["--component", "app", "--kind", "tree", "--destination", "/opt/app"]

    def differences(source, installed):
        # The version directory's own line (".d..t...... ./") is about its mtime, which is hoist's: not compared.
        return [line for line in rsync("-n", "-i", "-c", "-aHAX", "--delete", f"{source}/", f"{installed}/")
                if not line.endswith(b" ./")]

    upgrade(host_root, *args, "--source", v1, "--version", "1.0.0", check=0, wrapper=wrapper)
    upgrade(host_root, *args, "--source", v2, "--version", "2.0.0", check=0, wrapper=wrapper)
    assert differences(v2, app / "current") == []
    assert differences(v1, app / "1.0.0") == []  # the old version, from which unchanged files were linked, intact
    assert describe(app / "2.0.0")[1] == describe(v2)[1]  # the payload's link groups, not the old version's
    check_index(host_root / "var/lib/hoist/app/.index/2.0.0", app / "2.0.0")
    rollback(host_root, "--component", "app", check=0)
    assert differences(v1, app / "current") == []


def test_a_payload_directory_updated_in_place_syncs_as_rsync_finds_it(host_root, tmp_path):
    # One payload directory per seed, updated in place from v1 to v2 by rsync: what it finds unchanged keeps its inode
    # and ctime, what it rewrites (--inplace: the same inode) gets a new ctime. hoist records the payload file each
    # digest was read from only when its ctime is 2 s old at the run's start, hence one wait for all seeds.
    payloads = {}
    for number, seed in enumerate(SEEDS):
        work = tmp_path / str(seed)
        work.mkdir()
        v1, v2 = random_versions(work, seed)
        payload = work / "payload"
        rsync("-aHX", f"{v1}/", f"{payload}/")
        payloads[number] = (seed, v1, v2, payload)
    time.sleep(2.1)
    recorded = 0
    for number, (seed, v1, v2, payload) in payloads.items():
        dest = host_root / f"opt/app{number}"
        args = ["--component", f"app{number}", "--kind", "sync", "--destination", f"/opt/app{number}",
                "--source", payload]
        upgrade(host_root, *args, "--version", "1.0.0", check=0)
        sources = {}
        read_content_index(host_root / f"var/lib/hoist/app{number}/.index/1.0.0", sources)
        recorded += len(sources)
        # What rsync makes of it (with -H it may not reach v2 in one run; hoist is compared with the payload as it is).
        rsync("-aHX", "-c", "--inplace", "--delete", f"{v2}/", f"{payload}/")
        upgrade(host_root, *args, "--version", "2.0.0", check=0)
        assert rsync("-n", "-i", "-c", "-aHAX", "--delete", f"{payload}/", f"{dest}/") == [], seed
        check_index(host_root / f"var/lib/hoist/app{number}/.index/2.0.0", dest, ctime_may_move=True)
    assert recorded > 0, "no payload file was recorded as read: the second runs met none they had read"


def io_uring_available():
    """Whether this process may make an io_uring as hoist's read-ahead wants it (io_uring_setup(2) through libc's
    syscall()): one mapping for both rings and io_uring's own workers (IORING_FEAT_SINGLE_MMAP, _NATIVE_WORKERS)."""
    libc = ctypes.CDLL(None, use_errno=True)
    params = ctypes.create_string_buffer(120)  # struct io_uring_params
    fd = libc.syscall(IO_URING_SETUP, 4, params)
    if fd < 0:
        return False
    os.close(fd)
    features = int.from_bytes(params.raw[20:24], "little")  # after sq_entries, cq_entries, flags, sq_thread_*
    wanted = (1 << 0) | (1 << 9)
    return features & wanted == wanted


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed: no way to see which path ran")
def test_the_read_ahead_starts_reads_through_io_uring_and_file_by_file_where_it_is_refused(host_root, tmp_path):
    """Which path the refused runs above take: with io_uring the payload's files are read ahead through the ring
    (io_uring_enter, no posix_fadvise); refused, file by file with posix_fadvise. Both install the payload."""
    if not DENY_SYSCALLS.exists():
        pytest.skip(f"{DENY_SYSCALLS} is not built (HOIST_BUILD_DIR unset): no way to refuse io_uring to hoist")
    payload = tmp_path / "payload"
    for i in range(200):
        (payload / f"d{i % 4}").mkdir(parents=True, exist_ok=True)
        (payload / f"d{i % 4}/f{i}").write_bytes(random.Random(i).randbytes(100 + i * 37))
    calls = {}
    for version, io_uring in (("1.0.0", "used"), ("2.0.0", "refused")):
        trace = tmp_path / f"strace-{io_uring}"
        wrapper = ("strace", "-f", "-qq", "-y", "-o", str(trace), "-e", "trace=io_uring_enter,fadvise64")
        if io_uring == "refused":
            wrapper += (str(DENY_SYSCALLS), str(IO_URING_SETUP), "--")
        # Four threads, one for each directory: each walk may start before any copy has found that the filesystem
        # does not clone (a clone would read nothing), and reads ahead once its first copies have.
        upgrade(host_root, "--component", f"app-{io_uring}", "--kind", "tree", "--destination",
                f"/opt/app-{io_uring}", "--source", payload, "--version", version, "--threads", "4", check=0,
                wrapper=wrapper)
        assert rsync("-n", "-i", "-c", "-aHAX", "--delete", f"{payload}/", f"{host_root}/opt/app-{io_uring}/current/") \
            in ([], [b".d..t...... ./"])
        text = trace.read_text()
        calls[io_uring] = {name: len(re.findall(rf"\b{name}\(", text)) for name in ("io_uring_enter", "fadvise64")}
    if not io_uring_available():
        pytest.skip("io_uring_setup is refused to this test (a seccomp filter, the sysctl kernel.io_uring_disabled): "
                    f"hoist takes one path only here ({calls['used']})")
    assert calls["used"]["io_uring_enter"] > 0, f"nothing was read ahead: {calls}"
    assert calls["used"]["fadvise64"] == 0, calls
    # Not one call a file: the walk reads ahead only once it knows the copy reads (no clone), and a file it
    # reaches first is left to the copy.
    assert calls["refused"]["io_uring_enter"] == 0 and calls["refused"]["fadvise64"] > 0, calls
    # File by file, the calls name their files: every directory read ahead, also one whose walk started first.
    advised = re.findall(r"\bfadvise64\(\d+<([^>]*)>", (tmp_path / "strace-refused").read_text())
    assert {Path(path).parent.name for path in advised} == {"d0", "d1", "d2", "d3"}, advised
