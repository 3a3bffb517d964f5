"""Installs on filesystems that clone files (FICLONE): XFS, as Debian 12's mkfs.xfs makes it (reflink=1, the
default of RHEL 8 and later), and btrfs (openSUSE MicroOS and SLE Micro under RKE2). When the payload and the
destination share such a filesystem the copy is a clone, and the content index's hash is then read back from the
copy: the copy must be open for reading. Each test mounts a new image on a loop device in a private mount
namespace (`unshare -m`), with the host root and the payload on it, all mtimes equal as in a reproducible image.

Needs root, util-linux's unshare, and xfsprogs and btrfs-progs (scripts/apt-packages)."""

import os
import shutil
import subprocess
import textwrap

import pytest

from conftest import HOIST_BIN, run_recorded

MKFS = {"xfs": ["mkfs.xfs", "-q", "-f", "-m", "reflink=1"], "btrfs": ["mkfs.btrfs", "-q", "-f"]}

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root and unshare")


@pytest.fixture(params=sorted(MKFS))
def image(request, tmp_path):
    fs = request.param
    if not shutil.which(MKFS[fs][0]):
        pytest.skip(f"{MKFS[fs][0]} is not installed (scripts/apt-packages lists it)")
    if fs not in open("/proc/filesystems").read().split():
        pytest.skip(f"this kernel has no {fs} (/proc/filesystems)")
    path = tmp_path / f"{fs}.img"
    subprocess.run(["truncate", "-s", "320M", str(path)], check=True)
    subprocess.run(MKFS[fs] + [str(path)], check=True, capture_output=True)
    return fs, path


def script(image_path, mnt, body):
    """A bash script that mounts the image at `mnt`, makes a host root and two payloads on it, and runs `body`."""
    return textwrap.dedent(f"""
        mount -o loop {image_path} {mnt}
        host={mnt}/host
        mkdir -p $host/run $host/etc $host/opt $host/var/lib $host/proc/sys/kernel/random
        echo ID=debian > $host/etc/os-release
        echo 11111111-2222-4333-8444-555555555555 > $host/proc/sys/kernel/random/boot_id
        for v in 1 2; do
            p={mnt}/payload$v
            mkdir -p $p/bin $p/etc/ünïcode
            printf 'version=%s.0.0\\n' $v > $p/etc/conf
            echo same > $p/etc/ünïcode/naïve.txt
            head -c 1048576 /dev/urandom > $p/bin/app
            find $p -exec touch -h -d @1 {{}} +
        done
        hoist() {{ {HOIST_BIN} --host-root $host "$@" --lock-timeout 5; }}
    """) + textwrap.dedent(body)


def in_namespace(text, timeout=120):
    return run_recorded(["unshare", "-m", "--propagation", "private", "bash", "-euo", "pipefail", "-c", text],
                        capture_output=True, text=True, timeout=timeout)


def test_a_tree_and_a_sync_install_by_cloning_and_an_equal_mtime_change_is_installed(image, tmp_path):
    fs, path = image
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    result = in_namespace(script(path, mnt, f"""
        for kind in tree sync; do
            for v in 1 2; do
                hoist upgrade --component $kind --kind $kind --source {mnt}/payload$v \\
                    --destination /opt/$kind --version $v.0.0
            done
        done
        diff -r {mnt}/payload2 $host/opt/tree/current && echo TREE-EQUAL
        diff -r {mnt}/payload2 $host/opt/sync && echo SYNC-EQUAL
        filefrag -v $host/opt/tree/current/bin/app | grep -q shared && echo TREE-SHARED
        filefrag -v $host/opt/sync/bin/app | grep -q shared && echo SYNC-SHARED
        cat $host/opt/tree/current/etc/conf $host/opt/sync/etc/conf
    """))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Bad file descriptor" not in result.stderr
    for marker in ("TREE-EQUAL", "SYNC-EQUAL", "TREE-SHARED", "SYNC-SHARED"):
        assert marker in result.stdout, (fs, result.stdout + result.stderr)
    assert result.stdout.count("version=2.0.0\n") == 2, result.stdout


def test_a_file_installs_by_cloning(image, tmp_path):
    fs, path = image
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    result = in_namespace(script(path, mnt, f"""
        hoist upgrade --component app --kind file --source {mnt}/payload1/bin/app --destination /opt/bin/app \\
            --version 1.0.0
        # the destination is a link to the version's file, by its path on the host
        installed() {{ echo $host$(readlink $host/opt/bin/app); }}
        cmp {mnt}/payload1/bin/app $(installed) && echo FILE-EQUAL
        filefrag -v $(installed) | grep -q shared && echo FILE-SHARED
        hoist upgrade --component app --kind file --source {mnt}/payload2/bin/app --destination /opt/bin/app \\
            --version 2.0.0
        cmp {mnt}/payload2/bin/app $(installed) && echo FILE-EQUAL-2
    """))
    assert result.returncode == 0, result.stdout + result.stderr
    for marker in ("FILE-EQUAL", "FILE-SHARED", "FILE-EQUAL-2"):
        assert marker in result.stdout, (fs, result.stdout + result.stderr)
