"""A sync rollback killed at each rename of its restore (read from strace) is finished by the next rollback, which
replays the backup's journal over what the killed one already put back: the destination must then be exactly the
version rolled back to, entry for entry (tree_manifest: type, mode, owner, size, mtime, bytes, link target,
xattrs), in every shape a sync changes (a file changed, added, deleted; a directory added, deleted, turned into a
file and back; a symlink re-pointed; a mode and an xattr changed)."""

import os
import signal

from conftest import HOIST_BIN, tree_manifest
from payloads import make_tree, rollback, state_of, upgrade
from test_crash import RENAMES, kill_command, restore, snapshot, traced_calls


def payload(root, version):
    """The two versions' trees: every kind of change a sync makes from 1.0.0 to 2.0.0."""
    one = version == "1.0.0"
    files = {
        "same.txt": "the same in both\n",
        "changed.txt": f"changed: {version}\n" * (3 if one else 7),
        "d/keep.txt": "kept\n",
        "d/nested/deep.txt": f"deep {version}\n",
        "mode.sh": "#!/bin/sh\nexit 0\n",
        "tagged.txt": "tagged\n",
    }
    if one:
        files.update({"gone.txt": "deleted by 2.0.0\n", "gone_dir/a": "a\n", "gone_dir/sub/b": "b\n",
                      "becomes_dir": "a file in 1.0.0\n", "becomes_file/y": "in a directory in 1.0.0\n"})
    else:
        files.update({"new.txt": "new in 2.0.0\n", "newdir/n1": "n1\n", "newdir/n2/n3": "n3\n",
                      "becomes_dir/x": "in a directory in 2.0.0\n", "becomes_file": "a file in 2.0.0\n"})
    make_tree(root, files, 1 if one else 2)
    os.utime(root / "same.txt", (1_600_000_000, 1_600_000_000))  # unchanged by the sync: never journaled
    os.symlink("same.txt" if one else "changed.txt", root / "link")
    os.chmod(root / "mode.sh", 0o755 if one else 0o700)
    os.chmod(root / "changed.txt", 0o640 if one else 0o644)
    os.chmod(root / "d/nested", 0o750 if one else 0o755)
    os.setxattr(root / "tagged.txt", "user.tag", b"one" if one else b"two")
    if one:
        os.setxattr(root / "changed.txt", "user.only-in-one", b"1")
    return root


def test_a_sync_rollback_killed_at_each_rename_of_its_restore_ends_exactly_on_the_old_version(host_root, tmp_path):
    base = ["--component", "conf", "--kind", "sync", "--destination", "/etc/app", "--threads", "1"]
    destination = host_root / "etc/app"
    upgrade(host_root, *base, "--source", payload(tmp_path / "v1", "1.0.0"), "--version", "1.0.0", check=0)
    old = tree_manifest(destination)
    upgrade(host_root, *base, "--source", payload(tmp_path / "v2", "2.0.0"), "--version", "2.0.0", check=0)
    new = tree_manifest(destination)
    assert new != old
    pristine = tmp_path / "pristine"
    snapshot(host_root, pristine)

    argv = [HOIST_BIN, "rollback", "--host-root", host_root, "--lock-timeout", "5", "--component", "conf"]
    # Each rename (the commit to restoring.2.0.0, each entry put back, the backup to trash, the state saves), and
    # each removal (what 2.0.0 added, what was in the way of a directory coming back, the trash).
    points = traced_calls(argv, [*RENAMES, "unlinkat", "rmdir"], tmp_path)
    assert tree_manifest(destination) == old  # an uninterrupted rollback is exact
    puts_back = [p for p in points if p[0] in RENAMES and "restoring" not in p[2] and "state.json" not in p[2]]
    assert len(puts_back) >= 10, points
    print(f"{len(points)} kill points, {len(puts_back)} of them entries put back")
    mixed = 0
    for name, occurrence, line in points:
        restore(host_root, pristine)
        where = f"rollback killed at {name} #{occurrence} ({line[:160]})"
        killed = kill_command(argv, name, occurrence)
        assert killed.returncode == -signal.SIGKILL, f"{where}: rc={killed.returncode} {killed.stderr[-300:]}"
        mixed += tree_manifest(destination) not in (old, new)
        finished = rollback(host_root, "--component", "conf")
        assert finished.returncode == 0, f"{where}: {finished.stderr[-600:]}"
        now = tree_manifest(destination)
        differences = {k: (old.get(k), now.get(k)) for k in sorted(set(old) | set(now)) if old.get(k) != now.get(k)}
        assert differences == {}, where
        assert os.listdir(host_root / "etc/.app.hoist-sync") == [], where
        state = state_of(host_root, "conf")
        assert (state["current"], state["rollback"]) == ("1.0.0", None), where
    # The kills left the destination half restored, which the next rollback's replay had to finish.
    assert mixed >= 10, mixed
