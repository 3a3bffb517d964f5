"""What is installed is what the payload holds, whatever the mtimes say.

Reproducible images give every file one mtime (SOURCE_DATE_EPOCH, BuildKit's rewrite-timestamp, ko and Bazel,
Nix's mtime 1), so a file whose content changes between two versions often keeps its size and its mtime. Every
payload here is shaped that way: all files and directories of both versions carry the same mtime, and the file that
changes keeps its size. A run must install the new bytes, for every kind and payload form, with and without
SHA256SUMS, and still take the unchanged files from the old version (tree: hard links)."""

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from payloads import host_read, read_tree, state_of, upgrade, write_sha256sums

ONE_MTIME = 1_700_000_000  # every file and directory of every version below
BSDTAR = shutil.which("bsdtar")

V1 = {"etc/conf": "version=1.0.0\n", "bin/tool": "#!/bin/sh\necho tool\n", "share/doc/README": "read me\n"}
V2 = {**V1, "etc/conf": "version=2.0.0\n"}


def reproducible_tree(root, files, mtime=ONE_MTIME):
    """Writes `files` under `root` with one mtime for every file and directory, as a reproducible build does."""
    root = Path(root)
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
    (root / "bin/tool").chmod(0o755)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            os.utime(Path(dirpath) / name, (mtime, mtime), follow_symlinks=False)
    os.utime(root, (mtime, mtime))
    return root


def archive(tree, path, *bsdtar_args):
    """`tree` packed by bsdtar in the format `bsdtar_args` name; entries keep their mtimes."""
    subprocess.run([BSDTAR, "-c", "-f", str(path), *bsdtar_args, "-C", str(tree), "."], check=True,
                   env={"LC_ALL": "C.UTF-8", "PATH": os.environ["PATH"]})
    os.utime(path, (ONE_MTIME, ONE_MTIME))
    return path


FORMATS = {
    "directory": None,
    "tar": ("payload.tar", ["--format", "pax"]),
    "tar.zst": ("payload.tar.zst", ["--format", "pax", "--zstd"]),
    "zip": ("payload.zip", ["--format", "zip"]),
    "7z": ("payload.7z", ["--format", "7zip"]),
}


def payload(tmp_path, version, files, form):
    tree = reproducible_tree(tmp_path / f"tree-{version}", files)
    if FORMATS[form] is None:
        return tree
    name, args = FORMATS[form]
    if BSDTAR is None:
        pytest.skip("bsdtar (libarchive-tools) is not installed: no way to write the archive payloads")
    out = tmp_path / f"archive-{version}"
    out.mkdir()
    return archive(tree, out / name, *args)


def sums_for(tmp_path, version, source):
    """SHA256SUMS of a payload as its image would ship them: each file of a directory, or the archive itself."""
    path = tmp_path / f"SHA256SUMS-{version}"
    if source.is_dir():
        files = {str(p.relative_to(source)): p for p in source.rglob("*") if p.is_file()}
    else:
        files = {source.name: source}
    return write_sha256sums(path, files)


def tree_args(source, version, *extra):
    return ["--component", "c", "--kind", "tree", "--source", source, "--destination", "/opt/c", "--version", version,
            *extra]


def installed_files(root):
    return {rel: content for rel, content in read_tree(root).items() if content is not None}


def expected_files(files):
    return {rel: content.encode() for rel, content in files.items()}


@pytest.mark.parametrize("with_sums", [False, True], ids=["no-sums", "sha256sums"])
@pytest.mark.parametrize("form", list(FORMATS))
def test_a_tree_installs_a_same_size_same_mtime_change(host_root, tmp_path, form, with_sums):
    sources = {v: payload(tmp_path, v, files, form) for v, files in (("1.0.0", V1), ("2.0.0", V2))}
    for version in ("1.0.0", "2.0.0"):
        extra = ["--sha256sums", sums_for(tmp_path, version, sources[version])] if with_sums else []
        upgrade(host_root, *tree_args(sources[version], version, *extra), check=0)
    current = host_root / "opt/c/current"
    assert os.readlink(current) == "2.0.0"
    assert installed_files(current) == expected_files(V2)
    # The file that did not change is still taken from 1.0.0: one inode, hard-linked.
    old, new = host_root / "opt/c/1.0.0", host_root / "opt/c/2.0.0"
    assert os.stat(new / "bin/tool").st_ino == os.stat(old / "bin/tool").st_ino
    assert os.stat(new / "etc/conf").st_ino != os.stat(old / "etc/conf").st_ino
    assert (old / "etc/conf").read_bytes() == b"version=1.0.0\n"
    assert state_of(host_root, "c")["current"] == "2.0.0"


@pytest.mark.parametrize("with_sums", [False, True], ids=["no-sums", "sha256sums"])
def test_a_sync_installs_a_same_size_same_mtime_change(host_root, tmp_path, with_sums):
    sources = {v: reproducible_tree(tmp_path / v, files) for v, files in (("1.0.0", V1), ("2.0.0", V2))}
    for version in ("1.0.0", "2.0.0"):
        extra = ["--sha256sums", sums_for(tmp_path, version, sources[version])] if with_sums else []
        result = upgrade(host_root, "--component", "s", "--kind", "sync", "--source", sources[version],
                         "--destination", "/opt/s", "--version", version, *extra, check=0)
    assert "0 added (0 B), 1 changed (14 B), 0 removed (0 B), 6 unchanged" in result.stderr, result.stderr
    assert installed_files(host_root / "opt/s") == expected_files(V2)
    assert state_of(host_root, "s")["current"] == "2.0.0"


@pytest.mark.parametrize("with_sums", [False, True], ids=["no-sums", "sha256sums"])
def test_a_file_installs_a_same_size_same_mtime_change(host_root, tmp_path, with_sums):
    sources = {}
    for version in ("1.0.0", "2.0.0"):
        path = tmp_path / version / "tool"
        path.parent.mkdir()
        path.write_bytes(f"#!/bin/sh\necho {version}\n".encode())
        path.chmod(0o755)
        os.utime(path, (ONE_MTIME, ONE_MTIME))
        sources[version] = path
    for version in ("1.0.0", "2.0.0"):
        extra = ["--sha256sums", sums_for(tmp_path, version, sources[version])] if with_sums else []
        upgrade(host_root, "--component", "f", "--kind", "file", "--source", sources[version], "--destination",
                "/usr/local/bin/tool", "--version", version, *extra, check=0)
    assert host_read(host_root, "/usr/local/bin/tool") == b"#!/bin/sh\necho 2.0.0\n"
    assert (host_root / "var/lib/hoist/f/1.0.0/tool").read_bytes() == b"#!/bin/sh\necho 1.0.0\n"


@pytest.mark.parametrize("form", ["directory", "tar"])
def test_a_mode_only_change_is_installed_without_touching_the_old_version(host_root, tmp_path, form):
    sources = {"1.0.0": payload(tmp_path, "1.0.0", V1, form)}
    tree = reproducible_tree(tmp_path / "tree-2.0.0", V1)
    (tree / "etc/conf").chmod(0o600)
    os.utime(tree / "etc/conf", (ONE_MTIME, ONE_MTIME))
    sources["2.0.0"] = tree if form == "directory" else archive(tree, tmp_path / "v2.tar", "--format", "pax")
    for version in ("1.0.0", "2.0.0"):
        upgrade(host_root, *tree_args(sources[version], version), check=0)
    old, new = host_root / "opt/c/1.0.0", host_root / "opt/c/2.0.0"
    assert stat.S_IMODE(os.stat(new / "etc/conf").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(old / "etc/conf").st_mode) == 0o644
    assert (new / "etc/conf").read_bytes() == b"version=1.0.0\n"
    assert os.stat(new / "bin/tool").st_ino == os.stat(old / "bin/tool").st_ino


def index_dir(host_root, component="c"):
    return host_root / "var/lib/hoist" / component / ".index"


def test_each_kept_version_has_its_index_and_loses_it_with_the_version(host_root, tmp_path):
    for i, version in enumerate(["1.0.0", "2.0.0", "3.0.0", "4.0.0"]):
        source = reproducible_tree(tmp_path / version, {**V1, "etc/conf": f"version={version}\n"})
        upgrade(host_root, *tree_args(source, version, "--keep", "2"), check=0)
    assert sorted(p.name for p in (host_root / "opt/c").iterdir()) == ["3.0.0", "4.0.0", "current", "previous"]
    assert sorted(p.name for p in index_dir(host_root).iterdir()) == ["3.0.0", "4.0.0"]


def test_a_damaged_index_is_never_trusted_and_the_files_are_compared_by_their_bytes(host_root, tmp_path):
    v1 = reproducible_tree(tmp_path / "v1", V1)
    v2 = reproducible_tree(tmp_path / "v2", V2)
    upgrade(host_root, *tree_args(v1, "1.0.0"), check=0)
    index = index_dir(host_root) / "1.0.0"
    damaged = bytearray(index.read_bytes())
    damaged[len(damaged) // 2] ^= 0x01
    index.write_bytes(bytes(damaged))
    result = upgrade(host_root, *tree_args(v2, "2.0.0"), check=0)
    assert (f"warning: c: content index '{index}' is damaged: its checksum does not match (cut short, or changed): "
            "comparing the files of 1.0.0 by their bytes") in result.stderr, result.stderr
    assert installed_files(host_root / "opt/c/current") == expected_files(V2)
    old, new = host_root / "opt/c/1.0.0", host_root / "opt/c/2.0.0"
    assert os.stat(new / "bin/tool").st_ino == os.stat(old / "bin/tool").st_ino
    assert os.stat(new / "etc/conf").st_ino != os.stat(old / "etc/conf").st_ino


def test_a_sync_repairs_a_host_edit_that_put_the_size_and_mtime_back(host_root, tmp_path):
    v2 = reproducible_tree(tmp_path / "v2", V2)
    args = ["--component", "s", "--kind", "sync", "--source", v2, "--destination", "/opt/s", "--version", "2.0.0"]
    upgrade(host_root, *args, check=0)
    conf = host_root / "opt/s/etc/conf"
    before = os.stat(conf)
    with open(conf, "r+b") as f:
        f.write(b"version=9.9.9\n")
    os.utime(conf, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (os.stat(conf).st_size, os.stat(conf).st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    # SUC's next pod runs the same command: the same version, so only the destination's integrity is asked.
    upgrade(host_root, *args, check=0)
    assert conf.read_bytes() == b"version=2.0.0\n"
    assert installed_files(host_root / "opt/s") == expected_files(V2)


STRACE = shutil.which("strace")
RENAMES = ["rename", "renameat", "renameat2"]


def renames_of(argv, log):
    """The renames one run of `argv` makes, in order: [(name, occurrence, strace's line)]."""
    subprocess.run([STRACE, "-f", "-qq", "-o", str(log), "-e", "trace=" + ",".join(RENAMES), *map(str, argv)],
                   check=True, capture_output=True)
    counts, calls = {}, []
    for line in log.read_text().splitlines():
        name = line.split("(", 1)[0].split()[-1]
        if name in RENAMES and "resumed>" not in line:
            counts[name] = counts.get(name, 0) + 1
            calls.append((name, counts[name], line))
    return calls


@pytest.mark.skipif(STRACE is None, reason="strace is not installed: no way to kill the run at the index's write")
@pytest.mark.parametrize("at", ["the index's rename", "the version's rename after it"])
def test_a_run_killed_around_the_index_write_leaves_no_index_that_vouches_for_anything(host_root, tmp_path, at):
    from conftest import HOIST_BIN, run_recorded

    v1 = reproducible_tree(tmp_path / "v1", V1)
    v2 = reproducible_tree(tmp_path / "v2", V2)
    upgrade(host_root, *tree_args(v1, "1.0.0"), check=0)
    argv = [HOIST_BIN, "upgrade", "--host-root", host_root, "--lock-timeout", "5", "--threads", "1",
            *tree_args(v2, "2.0.0")]
    # The renames of the same run on a copy of the host: the index's, then the staging's to its final name.
    traced = tmp_path / "traced"
    shutil.copytree(host_root, traced, symlinks=True)
    calls = renames_of([a if a != host_root else traced for a in argv], tmp_path / "strace.log")
    first = next(i for i, (_, _, line) in enumerate(calls) if '".hoist-tmp.2.0.0.' in line)
    assert ".2.0.0.partial" in calls[first + 1][2], calls
    name, occurrence, _ = calls[first if at == "the index's rename" else first + 1]

    killed = run_recorded([STRACE, "-f", "-qq", "-o", "/dev/null", "-e", f"trace={name}",
                           "-e", f"inject={name}:signal=KILL:when={occurrence}", *map(str, argv)],
                          capture_output=True, text=True, timeout=60)
    assert killed.returncode == -9, killed
    assert os.readlink(host_root / "opt/c/current") == "1.0.0"
    assert not (host_root / "opt/c/2.0.0").exists()
    left = sorted(p.name for p in index_dir(host_root).iterdir())
    if at == "the index's rename":
        assert left[-1] == "1.0.0" and all(n.startswith(".hoist-tmp.2.0.0.") for n in left[:-1]), left
    else:
        assert left == ["1.0.0", "2.0.0"]

    result = upgrade(host_root, *tree_args(v2, "2.0.0"), check=0)
    assert os.readlink(host_root / "opt/c/current") == "2.0.0"
    assert installed_files(host_root / "opt/c/2.0.0") == expected_files(V2)
    assert sorted(p.name for p in index_dir(host_root).iterdir()) == ["1.0.0", "2.0.0"], result.stderr
