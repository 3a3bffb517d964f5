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


def test_the_file_kind_removes_only_its_own_temporary_links_beside_the_link(host_root, tmp_path):
    """The directory of a file component's link (/usr/local/bin) is the host's too: a killed switch's temporary
    link (a link to one of the component's versions) is removed by the next run, an operator's entry with the same
    prefix is not."""
    args = ["--component", "tool", "--kind", "file", "--destination", "/usr/local/bin/tool"]
    for version in ("1.0.0", "2.0.0"):
        (tmp_path / version).write_text(f"tool {version}\n")
    upgrade(host_root, *args, "--source", tmp_path / "1.0.0", "--version", "1.0.0", check=0)
    bin_dir = host_root / "usr/local/bin"
    (bin_dir / ".hoist-tmp.tool.notes").write_text("the operator's\n")
    (bin_dir / ".hoist-tmp.tool.elsewhere").symlink_to("/etc/hosts")
    # What a run killed between creating its temporary link and renaming it over the link leaves.
    (bin_dir / ".hoist-tmp.tool.k1lled0000000").symlink_to(Path(bin_dir / "tool").readlink())

    upgrade(host_root, *args, "--source", tmp_path / "2.0.0", "--version", "2.0.0", check=0)
    assert (host_root / str((bin_dir / "tool").readlink()).lstrip("/")).read_text() == "tool 2.0.0\n"
    assert not (bin_dir / ".hoist-tmp.tool.k1lled0000000").is_symlink()
    assert (bin_dir / ".hoist-tmp.tool.notes").read_text() == "the operator's\n"
    assert (bin_dir / ".hoist-tmp.tool.elsewhere").readlink() == Path("/etc/hosts")
