"""Failures that leave the host on the old version: a full disk (a small
tmpfs under the destination) and a read-only destination (a read-only bind
mount). Both need mount(2): the tests skip where it is not allowed."""

import os
import subprocess

import pytest

from payloads import make_tree, read_tree, state_of, upgrade


def mount(*args):
    return subprocess.run(["mount", *map(str, args)], capture_output=True, text=True)


@pytest.fixture
def mounts():
    mounted = []

    def do(*args, target):
        result = mount(*args, target)
        if result.returncode != 0:
            pytest.skip(f"cannot mount here: {result.stderr.strip()}")
        mounted.append(target)

    yield do
    for target in reversed(mounted):
        subprocess.run(["umount", "-l", str(target)], check=False)


def tree_args(source, version):
    return ["--component", "app", "--kind", "tree", "--source", source, "--destination", "/opt/app",
            "--version", version]


def test_a_full_disk_exits_1_keeps_the_old_version_and_removes_the_partial(host_root, tmp_path, mounts):
    (host_root / "opt").mkdir()
    mounts("-t", "tmpfs", "-o", "size=1m", "tmpfs", target=host_root / "opt")
    v1 = make_tree(tmp_path / "v1", {"small": "v1\n"}, 1)
    v2 = make_tree(tmp_path / "v2", {"small": "v2\n", "big": os.urandom(3 << 20)}, 2)
    upgrade(host_root, *tree_args(v1, "1.0.0"), check=0)
    result = upgrade(host_root, *tree_args(v2, "2.0.0"), check=1)
    assert "No space left on device" in result.stderr
    app = host_root / "opt/app"
    assert os.readlink(app / "current") == "1.0.0"
    assert read_tree(app / "1.0.0") == read_tree(v1)
    assert sorted(p.name for p in app.iterdir()) == ["1.0.0", "current"]
    last = state_of(host_root, "app")["last_result"]
    assert last["outcome"] == "failed" and "No space left on device" in last["message"]
    # Once there is room, the same upgrade goes through.
    (v2 / "big").write_bytes(b"small now\n")
    upgrade(host_root, *tree_args(v2, "2.0.0"), check=0)


@pytest.mark.parametrize("kind", ["tree", "sync"])
def test_a_first_install_on_a_full_disk_takes_back_the_directories_it_made(host_root, tmp_path, mounts, kind):
    (host_root / "opt").mkdir()
    mounts("-t", "tmpfs", "-o", "size=1m", "tmpfs", target=host_root / "opt")
    (host_root / "opt/keep").write_text("not hoist's\n")
    v1 = make_tree(tmp_path / "v1", {"small": "v1\n", "big": os.urandom(3 << 20)}, 1)
    result = upgrade(host_root, "--component", "app", "--kind", kind, "--source", v1, "--destination",
                     "/opt/deep/app", "--version", "1.0.0", check=1)
    assert "No space left on device" in result.stderr
    # /opt/deep, /opt/deep/app (and the sync's backups beside it) were made by the run: none is left.
    assert sorted(p.name for p in (host_root / "opt").iterdir()) == ["keep"]
    assert (host_root / "opt/keep").read_text() == "not hoist's\n"
    # A full disk is no fault of the input: the failure is recorded for `hoist status`.
    last = state_of(host_root, "app")["last_result"]
    assert last["outcome"] == "failed" and "No space left on device" in last["message"], last
    assert state_of(host_root, "app")["current"] == ""


def test_a_read_only_destination_exits_1_with_a_clear_error(host_root, tmp_path, mounts):
    v1 = make_tree(tmp_path / "v1", {"a": "v1\n"}, 1)
    v2 = make_tree(tmp_path / "v2", {"a": "v2!\n"}, 2)
    upgrade(host_root, *tree_args(v1, "1.0.0"), check=0)
    app = host_root / "opt/app"
    mounts("--bind", app, target=app)
    mounts("-o", "remount,bind,ro", target=app)
    result = upgrade(host_root, *tree_args(v2, "2.0.0"), check=1)
    assert f"failed to create directory '{app}/.2.0.0.partial': Read-only file system" in result.stderr
    assert os.readlink(app / "current") == "1.0.0"
    assert state_of(host_root, "app")["last_result"]["outcome"] == "failed"
