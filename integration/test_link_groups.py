"""Hard-link groups through the real binary: a staged version has the payload's
own link structure, whatever the old version it reuses unchanged files from had.

The tree kind hard-links an unchanged file from the old version (as rsync
--link-dest does). Files that were one hard-link group in the old version and
are separate identical files in the new payload must stay separate: reusing the
old inode for each of them would join them (rsync --link-dest does).
"""

import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from payloads import upgrade

MTIME = 1_700_000_000

# name -> group label: names with the same label are one inode. Every file's content is its group's (or its own).
V1 = {"a": "ab", "b": "ab", "c": "c", "d": "d", "sub/e": "efg", "f": "efg", "sub/g": "efg", "h": "h"}
# a and b split, c and d joined, g leaves e and f's group, h is unchanged.
V2 = {"a": "a", "b": "b", "c": "cd", "d": "cd", "sub/e": "ef", "f": "ef", "sub/g": "g", "h": "h"}
CONTENT = {"a": b"same\n", "b": b"same\n", "ab": b"same\n", "c": b"same cd\n", "d": b"same cd\n",
           "cd": b"same cd\n", "efg": b"efg\n", "ef": b"efg\n", "g": b"efg\n", "h": b"h\n"}


def make_tree(root, layout):
    """Files of `layout`, those with one label hard-linked; the same mode and mtime everywhere."""
    root = Path(root)
    first = {}
    for name, label in sorted(layout.items()):
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if label in first:
            os.link(first[label], path)
        else:
            path.write_bytes(CONTENT[label])
            path.chmod(0o644)
            os.utime(path, (MTIME, MTIME))
            first[label] = path
    for directory in [root / "sub", root]:
        os.utime(directory, (MTIME, MTIME))
    return root


def groups(root):
    """The hard-link groups of the regular files under `root`: a set of sets of names."""
    root = Path(root)
    by_inode = {}
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            st = path.lstat()
            by_inode.setdefault((st.st_dev, st.st_ino), set()).add(str(path.relative_to(root)))
    return {frozenset(names) for names in by_inode.values()}


def contents(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in Path(root).rglob("*") if p.is_file()}


def tar_of(tree, out):
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as archive:
        for path in sorted(Path(tree).rglob("*")):
            archive.add(path, arcname=str(path.relative_to(tree)), recursive=False)
    return out


def install(host_root, source, version):
    upgrade(host_root, "--component", "app", "--kind", "tree", "--source", source, "--destination", "/opt/app",
            "--version", version, check=0)
    return host_root / "opt/app" / version


@pytest.mark.parametrize("payload", ["directory", "archive"])
def test_a_staged_version_has_the_payloads_link_groups_not_the_old_versions(host_root, tmp_path, payload):
    v1 = make_tree(tmp_path / "v1", V1)
    v2 = make_tree(tmp_path / "v2", V2)
    assert groups(v1) != groups(v2)
    if payload == "archive":
        v1, v2 = tar_of(v1, tmp_path / "v1.tar"), tar_of(v2, tmp_path / "v2.tar")
    old = install(host_root, v1, "1.0.0")
    assert groups(old) == groups(tmp_path / "v1")
    new = install(host_root, v2, "2.0.0")
    assert contents(new) == contents(tmp_path / "v2")
    assert groups(new) == groups(tmp_path / "v2")
    # The unchanged files still come from the old version where that joins nothing: h, and one of a/b, and one
    # of e/f/g's names.
    old_inodes = {(p.lstat().st_ino) for p in old.rglob("*") if p.is_file()}
    assert (new / "h").lstat().st_ino in old_inodes
    assert len({(new / n).lstat().st_ino for n in ("a", "b")} & old_inodes) == 1
    # The old version kept its own groups.
    assert groups(old) == groups(tmp_path / "v1")


@pytest.mark.skipif(shutil.which("rsync") is None, reason="rsync is not installed")
def test_rsync_agrees_without_link_dest_and_joins_the_files_with_it(tmp_path):
    # What the issue compared with: rsync -aH copies the payload's groups, and --link-dest joins a and b (and
    # leaves g in e's group), as the old hoist did.
    v1 = make_tree(tmp_path / "v1", V1)
    v2 = make_tree(tmp_path / "v2", V2)
    subprocess.run(["rsync", "-aH", f"{v2}/", f"{tmp_path / 'plain'}/"], check=True)
    assert groups(tmp_path / "plain") == groups(v2)
    subprocess.run(["rsync", "-aH", f"--link-dest={v1}", f"{v2}/", f"{tmp_path / 'linked'}/"], check=True)
    joined = groups(tmp_path / "linked")
    assert frozenset({"a", "b"}) in joined and joined != groups(v2)
