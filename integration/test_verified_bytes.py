"""The bytes hoist verified are the bytes it installs. A payload on a writable volume can be replaced or
rewritten after verification and before staging reads it; the run must then install what it verified or
refuse (exit 5) and leave the host as it was, never install unverified bytes with exit 0.

The window is held open with strace: every mkdir hoist makes is slowed down, and the payload is changed
as soon as the staging directory exists, that is after verification and before staging reads a byte."""

import os
import shutil
import subprocess
import tarfile
import time

import pytest

from conftest import HOIST_BIN, SANITIZER_ENV, RecordedPopen, Result
from payloads import make_tree, manifest_without, state_of, sums_for_tree, upgrade, write_sha256sums

STRACE = shutil.which("strace")
pytestmark = pytest.mark.skipif(STRACE is None, reason="strace is not installed: no way to hold the window open")

ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}


def upgrade_changing_payload(host_root, staging, change, *args):
    """`hoist upgrade` that runs `change()` once `staging` (a path under the host root) exists."""
    cmd = [STRACE, "-f", "-o", "/dev/null", "-e", "trace=mkdir,mkdirat", "-e",
           "inject=mkdir,mkdirat:delay_exit=300000", HOIST_BIN, "upgrade", "--host-root", str(host_root),
           "--lock-timeout", "5", *map(str, args)]
    process = RecordedPopen(cmd, env={**ENV, **SANITIZER_ENV}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    changed = False
    deadline = time.monotonic() + 60
    while process.poll() is None and time.monotonic() < deadline:
        if staging.exists():
            change()
            changed = True
            break
        time.sleep(0.002)
    out, err = process.communicate(timeout=120)
    result = Result(subprocess.CompletedProcess(cmd, process.returncode, out, err))
    assert changed, f"the staging directory {staging} never appeared: {result}"
    return result


def replace(path, content):
    """Replaces `path` by a new file (a rename, as a volume update does)."""
    fresh = path.with_name(path.name + ".new")
    fresh.write_bytes(content)
    fresh.chmod(path.stat().st_mode & 0o7777)
    os.replace(fresh, path)


def rewrite(path, content):
    """Writes `content` into the file at `path` itself (the same inode)."""
    with open(path, "r+b") as f:
        f.write(content)
        f.truncate()


def tree_args(source, version, sums):
    return ["--component", "app", "--kind", "tree", "--source", source, "--destination", "/opt/app",
            "--version", version, "--sha256sums", sums]


def file_args(source, version, sums):
    return ["--component", "k3s", "--kind", "file", "--source", source, "--destination", "/usr/local/bin/k3s",
            "--version-scheme", "k3s", "--version", version, "--sha256sums", sums]


def kept(host_root):
    # A refused run still takes the lock and records its refusal in the state.
    return manifest_without(host_root, "run/hoist", "var/lib/hoist/app/state.json", "var/lib/hoist/k3s/state.json")


def test_a_directory_payload_file_replaced_after_verification_is_refused(host_root, tmp_path):
    v1 = make_tree(tmp_path / "v1", {"bin/tool": "one\n", "etc/tool.conf": "1\n"}, 1)
    v2 = make_tree(tmp_path / "v2", {"bin/tool": "two\n", "etc/tool.conf": "2\n"}, 2)
    upgrade(host_root, *tree_args(v1, "1.0.0", sums_for_tree(v1, tmp_path / "v1.sums")), check=0)
    sums = sums_for_tree(v2, tmp_path / "v2.sums")
    before = kept(host_root)

    result = upgrade_changing_payload(host_root, host_root / "opt/app/.1.1.0.partial",
                                      lambda: replace(v2 / "bin/tool", b"evil\n"), *tree_args(v2, "1.1.0", sums))

    assert result.returncode == 5, result
    assert (f"what was staged from payload '{v2}' is not what was verified (the payload changed meanwhile): "
            "checksum mismatch for 'bin/tool'") in result.stderr
    assert kept(host_root) == before
    assert os.readlink(host_root / "opt/app/current") == "1.0.0"
    assert state_of(host_root, "app")["current"] == "1.0.0"


def test_a_sync_payload_file_replaced_after_verification_is_refused_and_the_sync_undone(host_root, tmp_path):
    v1 = make_tree(tmp_path / "v1", {"bin/tool": "one\n", "etc/tool.conf": "1\n"}, 1)
    v2 = make_tree(tmp_path / "v2", {"bin/tool": "two\n", "etc/tool.conf": "2\n"}, 2)

    def sync_args(source, version):
        return ["--component", "app", "--kind", "sync", "--source", source, "--destination", "/opt/app",
                "--version", version, "--sha256sums", sums_for_tree(source, tmp_path / f"{version}.sums")]

    upgrade(host_root, *sync_args(v1, "1.0.0"), check=0)
    sums_args = sync_args(v2, "1.1.0")
    before = kept(host_root)

    result = upgrade_changing_payload(host_root, host_root / "opt/.app.hoist-sync/pending.1.1.0",
                                      lambda: replace(v2 / "bin/tool", b"evil\n"), *sums_args)

    assert result.returncode == 5, result
    assert (f"what was staged from payload '{v2}' is not what was verified (the payload changed meanwhile): "
            "checksum mismatch for 'bin/tool'") in result.stderr
    assert (host_root / "opt/app/bin/tool").read_text() == "one\n"
    assert kept(host_root) == before
    assert state_of(host_root, "app")["current"] == "1.0.0"


def make_archive(path, directory):
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        tar.add(directory, arcname=".")
    return path


def test_an_archive_rewritten_after_verification_is_refused(host_root, tmp_path):
    v1 = make_tree(tmp_path / "v1", {"bin/tool": "one\n"}, 1)
    v2 = make_tree(tmp_path / "v2", {"bin/tool": "two\n"}, 2)
    evil = make_tree(tmp_path / "evil", {"bin/tool": "evil\n"}, 3)
    archive = make_archive(tmp_path / "payload/app.tar.gz", v1)
    upgrade(host_root, *tree_args(archive, "1.0.0", write_sha256sums(tmp_path / "v1.sums", {"app.tar.gz": archive})),
            check=0)
    archive = make_archive(tmp_path / "payload/app.tar.gz", v2)
    sums = write_sha256sums(tmp_path / "v2.sums", {"app.tar.gz": archive})
    evil_bytes = make_archive(tmp_path / "evil.tar.gz", evil).read_bytes()
    before = kept(host_root)

    result = upgrade_changing_payload(host_root, host_root / "opt/app/.1.1.0.partial",
                                      lambda: rewrite(archive, evil_bytes), *tree_args(archive, "1.1.0", sums))

    assert result.returncode == 5, result
    assert (f"payload '{archive}' changed while hoist read it (written to, replaced or its metadata changed): "
            "the bytes staged may not be the bytes verified") in result.stderr
    assert kept(host_root) == before
    assert os.readlink(host_root / "opt/app/current") == "1.0.0"


@pytest.fixture
def k3s(tmp_path):
    path = tmp_path / "payload/k3s"
    path.parent.mkdir()
    path.write_bytes(b"\x7fELF k3s v1.30.1+k3s1\n")
    path.chmod(0o755)
    return path


def refused_when_k3s_changes(host_root, tmp_path, k3s, change):
    """A file upgrade of `k3s` verified against SHA256SUMS, `change` applied to it once its staging file exists: exit 5,
    the host as it was."""
    sums = write_sha256sums(tmp_path / "SHA256SUMS", {"k3s": k3s})
    before = kept(host_root)

    result = upgrade_changing_payload(host_root, host_root / "var/lib/hoist/k3s/.v1.30.1+k3s1.partial", change,
                                      *file_args(k3s, "v1.30.1+k3s1", sums))

    assert result.returncode == 5, result
    assert f"payload '{k3s}' changed while hoist read it" in result.stderr
    assert kept(host_root) == before
    assert not (host_root / "usr/local/bin/k3s").exists()


def test_a_file_payload_rewritten_after_verification_is_refused(host_root, tmp_path, k3s):
    refused_when_k3s_changes(host_root, tmp_path, k3s, lambda: rewrite(k3s, b"\x7fELF evil\n"))


def test_a_file_payload_replaced_after_verification_is_refused(host_root, tmp_path, k3s):
    # Staging copied the file that was verified, not the new one at the path; still, the payload changed
    # under the run (the rename unlinked the verified file), which is refused.
    refused_when_k3s_changes(host_root, tmp_path, k3s, lambda: replace(k3s, b"\x7fELF evil\n"))
