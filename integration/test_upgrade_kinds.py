"""The file and sync kinds of `hoist upgrade` on scratch host roots."""

import os
import stat

import pytest

from payloads import host_read, make_tree, read_tree, state_of, upgrade, write_sha256sums


def file_args(source, version, *extra):
    return ["--component", "k3s", "--kind", "file", "--source", source, "--destination", "/usr/local/bin/k3s",
            "--version-scheme", "k3s", "--version", version, *extra]


@pytest.fixture
def binaries(tmp_path):
    out = {}
    for i, version in enumerate(["v1.29.5+k3s1", "v1.30.1+k3s1"], start=1):
        path = tmp_path / f"bin{i}/k3s"
        path.parent.mkdir()
        path.write_bytes(b"\x7fELF k3s " + version.encode() + b"\n")
        path.chmod(0o755)
        out[version] = path
    return out


def test_file_kind_keeps_the_installers_file_and_links_the_destination(host_root, binaries):
    bin_dir = host_root / "usr/local/bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "k3s").write_bytes(b"k3s from get.k3s.io\n")
    (bin_dir / "k3s").chmod(0o755)
    # A running binary: the destination must never be opened for writing (ETXTBSY).
    upgrade(host_root, *file_args(binaries["v1.29.5+k3s1"], "v1.29.5+k3s1"), check=0)
    assert os.readlink(bin_dir / "k3s") == "/var/lib/hoist/k3s/v1.29.5+k3s1/k3s"
    copy = host_root / "var/lib/hoist/k3s/v1.29.5+k3s1/k3s"
    assert copy.read_bytes() == binaries["v1.29.5+k3s1"].read_bytes()
    assert stat.S_IMODE(copy.stat().st_mode) == 0o755
    assert (host_root / "var/lib/hoist/k3s/pre-hoist/k3s").read_bytes() == b"k3s from get.k3s.io\n"
    state = state_of(host_root, "k3s")
    assert (state["current"], state["previous"]) == ("v1.29.5+k3s1", "pre-hoist")

    upgrade(host_root, *file_args(binaries["v1.30.1+k3s1"], "v1.30.1+k3s1"), check=0)
    assert os.readlink(bin_dir / "k3s") == "/var/lib/hoist/k3s/v1.30.1+k3s1/k3s"
    assert host_read(host_root, "/usr/local/bin/k3s") == binaries["v1.30.1+k3s1"].read_bytes()
    state = state_of(host_root, "k3s")
    assert (state["current"], state["previous"]) == ("v1.30.1+k3s1", "v1.29.5+k3s1")
    assert [v["version"] for v in state["versions"]] == ["pre-hoist", "v1.29.5+k3s1", "v1.30.1+k3s1"]
    upgrade(host_root, *file_args(binaries["v1.30.1+k3s1"], "v1.30.1+k3s1"), check=0)  # re-run: no-op
    assert state_of(host_root, "k3s")["last_result"]["outcome"] == "unchanged"


def test_file_kind_on_a_fresh_host_creates_the_directories(host_root, binaries, tmp_path):
    sums = write_sha256sums(tmp_path / "SHA256SUMS", {"k3s": binaries["v1.30.1+k3s1"]})
    upgrade(host_root, *file_args(binaries["v1.30.1+k3s1"], "v1.30.1+k3s1", "--sha256sums", sums), check=0)
    assert os.readlink(host_root / "usr/local/bin/k3s") == "/var/lib/hoist/k3s/v1.30.1+k3s1/k3s"
    assert state_of(host_root, "k3s")["previous"] == ""


def test_file_kind_verifies_the_file_by_its_name(host_root, binaries, tmp_path):
    sums = write_sha256sums(tmp_path / "SHA256SUMS", {"k3s": binaries["v1.29.5+k3s1"]})
    result = upgrade(host_root, *file_args(binaries["v1.30.1+k3s1"], "v1.30.1+k3s1", "--sha256sums", sums), check=5)
    assert "checksum mismatch for 'k3s'" in result.stderr
    assert not (host_root / "usr").exists() and not (host_root / "var/lib").exists()


def sync_args(source, version, *extra):
    return ["--component", "conf", "--kind", "sync", "--source", source, "--destination", "/etc/app",
            "--version", version, *extra]


def test_sync_kind_syncs_in_place_with_deletions_and_keeps_a_backup(host_root, tmp_path):
    v1 = make_tree(tmp_path / "v1", {"a.conf": "a1\n", "old.conf": "old\n", "d/x": "x1\n"}, 1)
    v2 = make_tree(tmp_path / "v2", {"a.conf": "a2, longer\n", "new.conf": "new\n", "d/x": "x1\n"}, 2)
    os.utime(v2 / "d/x", ns=(os.stat(v1 / "d/x").st_mtime_ns,) * 2)
    upgrade(host_root, *sync_args(v1, "1.0.0"), check=0)
    assert read_tree(host_root / "etc/app") == read_tree(v1)
    result = upgrade(host_root, *sync_args(v2, "2.0.0"), check=0)
    assert "conf: synced 2.0.0 into" in result.stderr
    assert read_tree(host_root / "etc/app") == read_tree(v2)
    assert sorted(p.name for p in (host_root / "etc/.app.hoist-sync").iterdir()) == ["undo.2.0.0@1.0.0"]
    state = state_of(host_root, "conf")
    assert (state["current"], state["previous"], state["kind"]) == ("2.0.0", "1.0.0", "sync")
    upgrade(host_root, *sync_args(v2, "2.0.0"), check=0)
    assert state_of(host_root, "conf")["last_result"]["outcome"] == "unchanged"

    # Drift on the host is repaired by a re-run of the same version; the backup still undoes the sync.
    (host_root / "etc/app/a.conf").write_text("edited by hand\n")
    result = upgrade(host_root, *sync_args(v2, "2.0.0"), check=0)
    assert "installed but not intact" in result.stderr
    assert read_tree(host_root / "etc/app") == read_tree(v2)


def test_a_tree_of_many_directories_installs_on_many_threads_under_a_shells_file_limit(host_root, tmp_path):
    """Each walking thread reads up to 32 files ahead of it, and the walk reads them through the descriptors the
    read-ahead opened: with 64 threads and a shell's default limit of 1,024 open files, those descriptors alone
    would be 2,048 (an earlier build failed with 'Too many open files'). The process keeps at most 256 of them."""
    files = {f"d{d:02d}/f{i:03d}": f"file {d}/{i}\n" for d in range(96) for i in range(48)}
    source = make_tree(tmp_path / "v1", files, 1)
    result = upgrade(host_root, "--component", "app", "--kind", "tree", "--source", str(source), "--destination",
                     "/opt/app", "--version", "1.0.0", "--threads", "64", wrapper=("prlimit", "--nofile=1024:1024"))
    assert result.returncode == 0, result.stderr
    assert read_tree(host_root / "opt/app/current") == read_tree(source)
