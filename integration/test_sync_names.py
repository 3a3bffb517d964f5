"""The sync kind's backup keeps every name a directory entry can have: names that start or end with whitespace,
a single space, newlines, names that look like journal records, every byte from 0x01 to 0xff. A sync of v1, a sync
of v2 and a rollback leave the destination exactly v1, directories' mode, owner, xattrs and mtime included, which
`rsync -n -i -c -aHAX --delete v1/ dest/` confirms by finding nothing to do. They need root (chown)."""

import os
import subprocess
from pathlib import Path

import pytest

from payloads import rollback, upgrade

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: chown")

# Directory names the journal once misread: whitespace first (" " was taken for the destination's root), a newline,
# a name shaped like a record, bytes that are not UTF-8.
DIRECTORY_NAMES = [b" ", b"  ", b" d", b"\nx", b"\n", b"\t", b"d ", b"\r\n", b"D 1 2 x", b"A x", b"K ", b"\x01",
                   b"\xff\xfe", b"\\", b"%s%n", b"-"]
# Every byte a name may hold, alone (but '.', which is not a name) and inside a name.
FILE_NAMES = [bytes([b]) for b in range(1, 256) if b not in (ord("/"), ord("."))] + \
             [b"x" + bytes([b]) + b"y" for b in range(1, 256) if b != ord("/")] + [b"..x", b". ", b" ."]


def set_times(root, base):
    """Distinct nanosecond mtimes, children before the directories that hold them."""
    paths = sorted((p for p in _walk(root)), key=lambda p: p.count(b"/"), reverse=True) + [bytes(root)]
    for i, path in enumerate(paths):
        ns = base + i * 1_000_000_007
        os.utime(path, ns=(ns, ns), follow_symlinks=False)


def _walk(root):
    for dirpath, dirnames, filenames in os.walk(bytes(root)):
        for name in dirnames + filenames:
            yield os.path.join(dirpath, name)


def make_version(root, version):
    """One payload version: the same names in v1 and v2, with v2 changing each directory's mode, owner, xattrs
    and mtime and each file's bytes; v2 also adds and removes entries inside them."""
    root.mkdir()
    rb = bytes(root)
    for i, name in enumerate(DIRECTORY_NAMES):
        d = os.path.join(rb, name)
        os.mkdir(d)
        with open(os.path.join(d, b"file"), "wb") as f:
            f.write(b"v%d of %r\n" % (version, name))
        os.mkdir(os.path.join(d, name))  # the same awkward name one level down
        with open(os.path.join(d, name, name), "wb") as f:
            f.write(b"nested v%d\n" % version)
        if version == 1:
            os.chmod(d, 0o750)
            os.chown(d, 1000 + i, 2000 + i)
            os.setxattr(d, b"user.v1", b"kept " + name)
            with open(os.path.join(d, b"only-in-v1"), "wb") as f:
                f.write(b"removed by v2\n")
        else:
            os.chmod(d, 0o705)
            os.chown(d, 3000 + i, 4000 + i)
            os.setxattr(d, b"user.v2", b"new")
            os.mkdir(os.path.join(d, b" new"))
            with open(os.path.join(d, b" new", b"\nadded"), "wb") as f:
                f.write(b"added by v2\n")
    files = os.path.join(rb, b"names")
    os.mkdir(files)
    for name in FILE_NAMES:
        with open(os.path.join(files, name), "wb") as f:
            f.write(b"v%d %r\n" % (version, name))
    os.chmod(rb, 0o751 if version == 1 else 0o755)
    os.setxattr(rb, b"user.root", b"v%d" % version)
    set_times(root, 1_600_000_000_000_000_001 + version * 100_000_000_000_000_000)
    return root


def rsync_differences(source, dest):
    result = subprocess.run(["rsync", "-n", "-i", "-c", "-aHAX", "--delete", f"{source}/", f"{dest}/"],
                            capture_output=True, check=True)
    return result.stdout.splitlines()


def test_a_rollback_brings_back_every_name_and_every_directory_s_metadata(host_root, tmp_path):
    v1 = make_version(tmp_path / "v1", 1)
    v2 = make_version(tmp_path / "v2", 2)
    dest = host_root / "opt/app"
    args = ["--component", "app", "--kind", "sync", "--destination", "/opt/app"]
    upgrade(host_root, *args, "--source", v1, "--version", "1.0.0", check=0)
    assert rsync_differences(v1, dest) == []
    upgrade(host_root, *args, "--source", v2, "--version", "2.0.0", check=0)
    assert rsync_differences(v2, dest) == []
    rollback(host_root, "--component", "app", check=0)
    assert rsync_differences(v1, dest) == []
    assert os.listxattr(dest / " ") == ["user.v1"]
    assert os.stat(dest).st_mode & 0o7777 == 0o751


def test_a_directory_named_one_space_is_not_taken_for_the_destination(host_root, tmp_path):
    """The issue's reproduction, as it was reported."""
    def version(n):
        root = tmp_path / f"v{n}"
        (root / " ").mkdir(parents=True)
        (root / " /file").write_text(f"v{n}\n")
        os.chmod(root / " ", 0o755 if n == 1 else 0o700)
        os.utime(root / " ", ns=(n * 10**18, n * 10**18))
        os.utime(root, ns=(n * 10**18 + 5, n * 10**18 + 5))
        return root
    v1, v2 = version(1), version(2)
    dest = host_root / "opt/app"
    args = ["--component", "app", "--kind", "sync", "--destination", "/opt/app"]
    upgrade(host_root, *args, "--source", v1, "--version", "1.0.0", check=0)
    upgrade(host_root, *args, "--source", v2, "--version", "2.0.0", check=0)
    rollback(host_root, "--component", "app", check=0)
    assert rsync_differences(v1, dest) == []
    assert os.stat(dest).st_mtime_ns == 10**18 + 5
    assert os.stat(dest / " ").st_mtime_ns == 10**18
    assert os.stat(dest / " ").st_mode & 0o7777 == 0o755
