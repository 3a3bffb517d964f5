"""Destinations are compared as the host resolves them, through the host's own symlinks, and refused with exit 2
before the lock is taken and before anything on the host changes: a sync destination that is a link to the host's
root, and two components whose destinations overlap only through a host symlink."""

import json
import os

from payloads import manifest_without, upgrade


def refused(host_root, *args):
    """Runs an upgrade of version 1.0.0 that must be refused with exit 2 before the lock is taken, the host left
    exactly as it was; returns its stderr."""
    before = manifest_without(host_root)
    result = upgrade(host_root, *args, "--version", "1.0.0", check=2)
    assert manifest_without(host_root) == before
    assert not (host_root / "run/hoist").exists()  # refused before the lock
    return result.stderr


def test_a_sync_destination_that_resolves_to_the_host_s_root_is_refused_before_any_change(host_root, tmp_path):
    (tmp_path / "payload").mkdir()
    (tmp_path / "payload/file").write_text("payload\n")
    (host_root / "opt").mkdir()
    os.symlink("../../../..", host_root / "opt/app")
    (host_root / "etc/keep").write_text("the host's\n")
    stderr = refused(host_root, "--component", "app", "--kind", "sync", "--source", tmp_path / "payload",
                     "--destination", "/opt/app")
    assert "destination '/opt/app' of component 'app' resolves to the host's root '/' through a host symlink" in stderr


def test_a_tree_destination_through_an_absolute_link_to_the_root_is_refused(host_root, tmp_path):
    (tmp_path / "payload").mkdir()
    (host_root / "opt").mkdir()
    os.symlink("/", host_root / "opt/app")
    stderr = refused(host_root, "--component", "app", "--kind", "tree", "--source", tmp_path / "payload",
                     "--destination", "/opt/app/")
    assert "resolves to the host's root '/' through a host symlink" in stderr


def manifest(tmp_path, components):
    (tmp_path / "dir").mkdir(exist_ok=True)
    (tmp_path / "dir/file").write_text("payload\n")
    (tmp_path / "tool").write_text("#!/bin/sh\n")
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"schema": 1, "components": components}))
    return path


def refused_beside_conf(host_root, tmp_path, link, component):
    """`component` in a manifest beside 'conf', a sync into /opt/a, with /srv/b a host symlink to /opt/a (whose
    target reads `link`): refused (see `refused`); returns the stderr."""
    (host_root / "opt/a").mkdir(parents=True)
    (host_root / "srv").mkdir()
    os.symlink(link, host_root / "srv/b")
    path = manifest(tmp_path, [
        {"name": "conf", "kind": "sync", "source": str(tmp_path / "dir"), "destination": "/opt/a"},
        component,
    ])
    return refused(host_root, "--manifest", path)


def test_components_that_overlap_only_through_a_host_symlink_are_refused(host_root, tmp_path):
    tool = {"name": "tool", "kind": "file", "source": str(tmp_path / "tool"), "destination": "/srv/b/tool"}
    assert ("components 'tool' and 'conf' overlap: '/srv/b/tool' (on the host: '/opt/a/tool') is inside '/opt/a'"
            in refused_beside_conf(host_root, tmp_path, "/opt/a", tool))


def test_one_directory_under_two_names_is_one_destination(host_root, tmp_path):
    app = {"name": "app", "kind": "tree", "source": str(tmp_path / "dir"), "destination": "/srv/b"}
    assert ("components 'conf' and 'app' have the same destination '/opt/a' and '/srv/b' (on the host: '/opt/a')"
            in refused_beside_conf(host_root, tmp_path, "../opt/a", app))


def test_a_file_destination_that_is_hoist_s_own_link_is_not_followed(host_root, tmp_path):
    """The file kind's destination is a link to hoist's state: its target is not where the component lives."""
    path = manifest(tmp_path, [
        {"name": "tool", "kind": "file", "source": str(tmp_path / "tool"), "destination": "/usr/local/bin/tool"},
        {"name": "conf", "kind": "sync", "source": str(tmp_path / "dir"), "destination": "/var/lib/hoist-conf"},
    ])
    upgrade(host_root, "--manifest", path, "--version", "1.0.0", check=0)
    assert os.readlink(host_root / "usr/local/bin/tool").startswith("/var/lib/hoist/tool/")
    upgrade(host_root, "--manifest", path, "--version", "1.0.0", check=0)
