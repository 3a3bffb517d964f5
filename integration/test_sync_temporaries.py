"""hoist's temporary names in a sync destination are told apart from the host's by a tag the sync recorded, not
by the `.hoist-tmp.` prefix alone: a host file with that prefix is an entry like any other, counted by the dry run,
kept in the backup when the sync deletes it, and put back by a rollback."""

import re
from pathlib import Path

from conftest import tree_manifest
from payloads import rollback, upgrade

ARGS = ["--component", "app", "--kind", "sync", "--destination", "/opt/app"]


def payload(root, files):
    for rel, text in files.items():
        path = Path(root) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def removed_in_dry_run(result):
    match = re.search(r"^\s*remove:\s+(\d+) files", result.stdout + result.stderr, re.MULTILINE)
    assert match, result
    return int(match.group(1))


def test_a_host_file_named_like_a_temporary_is_counted_kept_and_put_back(host_root, tmp_path):
    v1 = payload(tmp_path / "v1", {"etc/conf": "one\n", "bin/tool": "tool\n"})
    v2 = payload(tmp_path / "v2", {"etc/conf": "two\n", "bin/tool": "tool\n"})
    upgrade(host_root, *ARGS, "--source", v1, "--version", "1.0.0", check=0)
    dest = host_root / "opt/app"
    # An operator's files: one the prefix alone would mistake, one shaped exactly like an older hoist's temporary.
    (dest / ".hoist-tmp.keep").write_text("the operator's notes\n")
    (dest / "etc/.hoist-tmp.conf.abcdefabcdef").write_text("also the operator's\n")
    before = tree_manifest(dest)

    dry = upgrade(host_root, *ARGS, "--source", v2, "--version", "2.0.0", "--dry-run", check=0)
    assert removed_in_dry_run(dry) == 2
    assert tree_manifest(dest) == before

    upgrade(host_root, *ARGS, "--source", v2, "--version", "2.0.0", check=0)
    assert not (dest / ".hoist-tmp.keep").exists()  # rsync --delete: what the payload does not have goes...
    assert (dest / "etc/conf").read_text() == "two\n"

    rollback(host_root, "--component", "app", check=0)
    assert tree_manifest(dest) == before  # ...into the backup, and comes back with the rollback
    assert (dest / ".hoist-tmp.keep").read_text() == "the operator's notes\n"


def test_a_payload_entry_named_like_a_temporary_is_installed(host_root, tmp_path):
    v1 = payload(tmp_path / "v1", {".hoist-tmp.keep": "shipped\n", "etc/.hoist-tmp.x": "also shipped\n"})
    upgrade(host_root, *ARGS, "--source", v1, "--version", "1.0.0", check=0)
    dest = host_root / "opt/app"
    assert (dest / ".hoist-tmp.keep").read_text() == "shipped\n"
    assert (dest / "etc/.hoist-tmp.x").read_text() == "also shipped\n"
    # The next sync finds the destination intact: nothing to do, and the file stays.
    again = upgrade(host_root, *ARGS, "--source", v1, "--version", "1.0.0", check=0)
    assert "nothing to do" in again.stdout + again.stderr or "already" in again.stdout + again.stderr, again
    assert (dest / ".hoist-tmp.keep").read_text() == "shipped\n"
