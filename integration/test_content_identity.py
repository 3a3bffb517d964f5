"""What is installed is what the payload holds, whatever the mtimes say.

Reproducible images give every file one mtime (SOURCE_DATE_EPOCH, BuildKit's rewrite-timestamp, ko and Bazel,
Nix's mtime 1), so a file whose content changes between two versions often keeps its size and its mtime. Every
payload here is shaped that way: all files and directories of both versions carry the same mtime, and the file that
changes keeps its size. A run must install the new bytes, for every kind and payload form, with and without
SHA256SUMS, and still take the unchanged files from the old version (tree: hard links)."""

import hashlib
import os
import re
import shutil
import stat
import subprocess
import time
from pathlib import Path

import pytest

from payloads import (host_read, manifest_without, read_content_index, read_tree, state_of, upgrade,
                      write_sha256sums)

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


BIG = (40 << 20) + 13  # past the 32 MiB from which a copy is hashed on a thread beside it, and not a round size


@pytest.mark.parametrize("with_sums", [False, True], ids=["no-sums", "sha256sums"])
def test_a_big_files_same_size_same_mtime_change_is_installed_and_indexed_by_the_bytes_installed(host_root, tmp_path,
                                                                                                 with_sums):
    first = os.urandom(BIG)
    middle = BIG // 2
    contents = {"1.0.0": first, "2.0.0": first[:middle] + bytes([first[middle] ^ 0xFF]) + first[middle + 1:]}
    for version, content in contents.items():
        source = reproducible_tree(tmp_path / f"tree-{version}", {**V1, "lib/big.bin": content})
        extra = ["--sha256sums", sums_for(tmp_path, version, source)] if with_sums else []
        upgrade(host_root, *tree_args(source, version, *extra), check=0)
        installed = host_root / "opt/c" / version / "lib/big.bin"
        assert installed.read_bytes() == content
        index = read_content_index(index_of(host_root, version))
        assert index[b"lib/big.bin"][0] == hashlib.sha256(content).digest()
        assert index[b"lib/big.bin"][1:3] == (os.stat(installed).st_ino, BIG)
    assert os.readlink(host_root / "opt/c/current") == "2.0.0"


def pids_hierarchy():
    """The cgroup directory under which a group with its own pids.max can be made (v1's pids controller, or v2's
    root with pids delegated), or None."""
    v1 = Path("/sys/fs/cgroup/pids")
    if (v1 / "cgroup.procs").exists():
        return v1
    v2 = Path("/sys/fs/cgroup")
    try:
        if "pids" in (v2 / "cgroup.subtree_control").read_text().split():
            return v2
    except OSError:
        pass
    return None


@pytest.mark.skipif(os.geteuid() != 0 or pids_hierarchy() is None,
                    reason="needs root and a cgroup pids controller to limit hoist's threads")
def test_a_big_file_installs_where_no_thread_can_be_started_for_its_hash(host_root, tmp_path):
    # A pod's pids limit: with --threads 1 hoist runs on its one thread, and the thread that hashes a big file beside
    # its copy cannot be started. The copy is then hashed through its buffer, as a small file's is.
    group = pids_hierarchy() / f"hoist-test-{os.getpid()}"
    group.mkdir()
    try:
        (group / "pids.max").write_text("1\n")
        content = os.urandom(BIG)
        source = reproducible_tree(tmp_path / "tree", {**V1, "lib/big.bin": content})
        enter = ("sh", "-c", f'echo $$ > {group}/cgroup.procs && exec "$@"', "sh")
        upgrade(host_root, *tree_args(source, "1.0.0", "--threads", "1"), wrapper=enter, check=0)
        # "max N": how many forks and thread starts the limit refused (cgroup v1 and v2 alike).
        refused = int(dict(line.split() for line in (group / "pids.events").read_text().splitlines())["max"])
    finally:
        group.rmdir()
    assert refused != 0, "the pids limit refused no thread: the test did not test what it says"
    installed = host_root / "opt/c/1.0.0/lib/big.bin"
    assert installed.read_bytes() == content
    assert read_content_index(index_of(host_root, "1.0.0"))[b"lib/big.bin"][0] == hashlib.sha256(content).digest()


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
# listxattrat(2) came with Linux 6.13: before it, hoist opens each payload file to list its xattrs, and which files
# were opened no longer tells which were read.
XATTRS_BY_NAME = tuple(map(int, re.match(r"(\d+)\.(\d+)", os.uname().release).groups())) >= (6, 13)
OPENED_FOR_XATTRS = "Linux before 6.13 opens every payload file to list its xattrs: opens do not tell what was read"
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


# With SHA256SUMS the sums are the payload's side: verification reads only the payload files whose listed bytes the
# installed version does not hold (its content index vouching for the file as it is now), and the transfer keeps
# the installed file for the others. A payload file that differs from its sums is then refused wherever it is read.
KIND_ARGS = {
    "tree": lambda source, version: tree_args(source, version),
    "sync": lambda source, version: ["--component", "c", "--kind", "sync", "--source", source, "--destination",
                                     "/opt/c", "--version", version],
}


def installed_root(host_root, kind):
    return host_root / ("opt/c/current" if kind == "tree" else "opt/c")


def corrupt_keeping_size_and_mtime(path, content):
    """Writes `content` (of the same size) into `path`, its mtime put back: what the sums alone can tell apart."""
    before = os.stat(path)
    assert len(content) == before.st_size
    with open(path, "r+b") as f:
        f.write(content)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def upgraded_with_sums(host_root, tmp_path, kind):
    """1.0.0 installed with its sums; 2.0.0's payload (etc/conf changed) and the sums its image ships."""
    v1 = reproducible_tree(tmp_path / "v1", V1)
    upgrade(host_root, *KIND_ARGS[kind](v1, "1.0.0"), "--sha256sums", sums_for(tmp_path, "1.0.0", v1), check=0)
    v2 = reproducible_tree(tmp_path / "v2", V2)
    return v2, sums_for(tmp_path, "2.0.0", v2)


def payload_files_opened(log, payload):
    """The files under `payload` (relative paths) that the opens of an `strace -y` log name, by path or by name in
    a directory descriptor (`openat(5</payload/bin>, "tool", ...)`); directories left out."""
    opened = set()
    for line in log.read_text().splitlines():
        match = re.search(r'open(?:at2?)?\((?:AT_FDCWD(?:<[^>]*>)?|\d+<([^>]*)>), "([^"]*)"', line)
        if match is None or " = -1 " in line:
            continue
        path = Path(match.group(2)) if match.group(1) is None else Path(match.group(1)) / match.group(2)
        if path.is_relative_to(payload) and not path.is_dir():
            opened.add(str(path.relative_to(payload)))
    return opened


@pytest.mark.skipif(STRACE is None, reason="strace is not installed: no way to see which payload files are opened")
@pytest.mark.skipif(not XATTRS_BY_NAME, reason=OPENED_FOR_XATTRS)
@pytest.mark.parametrize("kind", list(KIND_ARGS))
def test_with_sums_only_the_payload_files_the_installed_version_does_not_hold_are_read(host_root, tmp_path, kind):
    from conftest import HOIST_BIN, run_recorded

    v2, sums = upgraded_with_sums(host_root, tmp_path, kind)
    log = tmp_path / "opens.log"
    result = run_recorded([STRACE, "-f", "-qq", "-y", "-o", str(log), "-e", "trace=open,openat,openat2", HOIST_BIN,
                           "upgrade", "--host-root", str(host_root), "--lock-timeout", "5",
                           *map(str, KIND_ARGS[kind](v2, "2.0.0")), "--sha256sums", str(sums)],
                          capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result
    # etc/conf, changed, is read (to verify, then to copy); bin/tool and share/doc/README are never opened.
    assert payload_files_opened(log, v2) == {"etc/conf"}, log.read_text()
    assert f"c: verified {v2} against {sums} (2 of its files unread: the installed 1.0.0 holds them as listed)" \
        in result.stderr, result.stderr
    assert installed_files(installed_root(host_root, kind)) == expected_files(V2)


@pytest.mark.parametrize("kind", list(KIND_ARGS))
def test_a_payload_file_that_differs_from_sums_listing_the_installed_bytes_is_not_installed(host_root, tmp_path,
                                                                                          kind):
    v2, sums = upgraded_with_sums(host_root, tmp_path, kind)
    # The image's bin/tool is not what its sums list (the bytes 1.0.0 holds): the sums decide what is installed.
    corrupt_keeping_size_and_mtime(v2 / "bin/tool", b"#!/bin/sh\necho evil\n")
    result = upgrade(host_root, *KIND_ARGS[kind](v2, "2.0.0"), "--sha256sums", sums, check=0)
    assert "(2 of its files unread: the installed 1.0.0 holds them as listed)" in result.stderr, result.stderr
    assert installed_files(installed_root(host_root, kind)) == expected_files(V2)
    if kind == "tree":
        assert os.stat(host_root / "opt/c/2.0.0/bin/tool").st_ino == os.stat(host_root / "opt/c/1.0.0/bin/tool").st_ino

    # --checksum trusts no index: the payload is read whole, and its bin/tool refused before anything changes.
    before = manifest_without(host_root, "run/hoist", "var/lib/hoist/c/state.json")
    refused = upgrade(host_root, *KIND_ARGS[kind](v2, "2.0.1"), "--sha256sums", sums, "--checksum", check=5)
    assert f"error: c: {v2} does not verify against {sums}: checksum mismatch for 'bin/tool'" in refused.stderr
    assert manifest_without(host_root, "run/hoist", "var/lib/hoist/c/state.json") == before


@pytest.mark.parametrize("kind", list(KIND_ARGS))
def test_a_payload_file_left_unread_and_then_copied_is_refused_as_the_payload_s(host_root, tmp_path, kind):
    v2, sums = upgraded_with_sums(host_root, tmp_path, kind)
    corrupt_keeping_size_and_mtime(v2 / "bin/tool", b"#!/bin/sh\necho evil\n")
    # A mode of its own: the transfer copies the payload's file instead of keeping the installed one, and the
    # copy's check is the first to read it.
    (v2 / "bin/tool").chmod(0o700)
    result = upgrade(host_root, *KIND_ARGS[kind](v2, "2.0.0"), "--sha256sums", sums, check=5)
    assert f"error: c: {v2} does not verify against {sums}: checksum mismatch for 'bin/tool'" in result.stderr, \
        result.stderr
    assert "changed meanwhile" not in result.stderr
    assert installed_files(installed_root(host_root, kind)) == expected_files(V1)
    assert state_of(host_root, "c")["current"] == "1.0.0"
    if kind == "tree":
        assert sorted(p.name for p in (host_root / "opt/c").iterdir()) == ["1.0.0", "current"]
        assert sorted(p.name for p in index_dir(host_root).iterdir()) == ["1.0.0"]


@pytest.mark.parametrize("kind", list(KIND_ARGS))
def test_an_installed_file_edited_on_the_host_vouches_for_nothing_and_the_payload_s_is_read(host_root, tmp_path,
                                                                                           kind):
    v2, sums = upgraded_with_sums(host_root, tmp_path, kind)
    corrupt_keeping_size_and_mtime(v2 / "bin/tool", b"#!/bin/sh\necho evil\n")
    # The same bytes written again on the host, the mtime put back: its ctime moved, the index no longer vouches.
    installed = installed_root(host_root, kind) / "bin/tool"
    corrupt_keeping_size_and_mtime(installed, installed.read_bytes())
    result = upgrade(host_root, *KIND_ARGS[kind](v2, "2.0.0"), "--sha256sums", sums, check=5)
    assert f"error: c: {v2} does not verify against {sums}: checksum mismatch for 'bin/tool'" in result.stderr, \
        result.stderr
    # Refused by the verification itself, before the transfer: nothing was left unread.
    assert "unread" not in result.stderr and f"c: verified {v2}" not in result.stderr
    assert installed_files(installed_root(host_root, kind)) == expected_files(V1)
    assert state_of(host_root, "c")["current"] == "1.0.0"


# Without SHA256SUMS the payload's side is read, and the index records which payload file each digest was read from
# (its filesystem, inode and ctime). A payload directory kept on the host and updated in place (rsync, a re-run of
# the same Job's payload) is then read only where it changed. A file changed less than 2 s before a run is not
# recorded by it: within a filesystem's timestamp granularity a later write could leave its ctime as it was.
SETTLE = 2.1


def opened_by_upgrade(host_root, tmp_path, args, payload, name):
    from conftest import HOIST_BIN, run_recorded

    log = tmp_path / f"opens-{name}.log"
    result = run_recorded([STRACE, "-f", "-qq", "-y", "-o", str(log), "-e", "trace=open,openat,openat2", HOIST_BIN,
                           "upgrade", "--host-root", str(host_root), "--lock-timeout", "5", *map(str, args)],
                          capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result
    return payload_files_opened(log, payload)


def index_of(host_root, version):
    return host_root / "var/lib/hoist/c/.index" / version


@pytest.mark.skipif(STRACE is None, reason="strace is not installed: no way to see which payload files are opened")
@pytest.mark.skipif(not XATTRS_BY_NAME, reason=OPENED_FOR_XATTRS)
@pytest.mark.parametrize("kind", list(KIND_ARGS))
def test_without_sums_a_payload_file_read_before_and_unchanged_since_is_not_read_again(host_root, tmp_path, kind):
    payload = reproducible_tree(tmp_path / "payload", V1)
    time.sleep(SETTLE)
    upgrade(host_root, *KIND_ARGS[kind](payload, "1.0.0"), check=0)
    sources = {}
    read_content_index(index_of(host_root, "1.0.0"), sources)
    assert {rel.decode(): ino for rel, (_, ino, _) in sources.items()} == {
        rel: os.lstat(payload / rel).st_ino for rel in V1}

    # 2.0.0 is the same directory with etc/conf written in place, its size and mtime put back: its ctime moved.
    corrupt_keeping_size_and_mtime(payload / "etc/conf", V2["etc/conf"].encode())
    assert opened_by_upgrade(host_root, tmp_path, KIND_ARGS[kind](payload, "2.0.0"), payload, "2.0.0") == {"etc/conf"}
    assert installed_files(installed_root(host_root, kind)) == expected_files(V2)
    if kind == "tree":
        assert installed_files(host_root / "opt/c/1.0.0") == expected_files(V1)
    # etc/conf changed within 2 s of that run: not recorded, so read again by the next, and nothing else is.
    sources = {}
    read_content_index(index_of(host_root, "2.0.0"), sources)
    assert sorted(sources) == [b"bin/tool", b"share/doc/README"]
    assert opened_by_upgrade(host_root, tmp_path, KIND_ARGS[kind](payload, "2.0.1"), payload, "2.0.1") == {"etc/conf"}
    assert installed_files(installed_root(host_root, kind)) == expected_files(V2)


@pytest.mark.parametrize("kind", list(KIND_ARGS))
def test_a_payload_file_replaced_by_another_inode_of_the_same_size_and_mtime_is_read(host_root, tmp_path, kind):
    payload = reproducible_tree(tmp_path / "payload", V1)
    time.sleep(SETTLE)
    upgrade(host_root, *KIND_ARGS[kind](payload, "1.0.0"), check=0)
    # What `cp -a` or an unpacked image gives: a new inode, the old size and mtime.
    other = reproducible_tree(tmp_path / "other", V2)
    os.rename(other / "etc/conf", payload / "etc/conf")
    upgrade(host_root, *KIND_ARGS[kind](payload, "2.0.0"), check=0)
    assert installed_files(installed_root(host_root, kind)) == expected_files(V2)
    # And --checksum reads every payload file whatever the index recorded: the same bytes, nothing changed.
    upgrade(host_root, *KIND_ARGS[kind](payload, "2.0.1"), "--checksum", check=0)
    assert installed_files(installed_root(host_root, kind)) == expected_files(V2)


def linked_sync_index(host_root, tmp_path):
    """1.0.0, then 2.0.0 of the same payload: 2.0.0's index is 1.0.0's file under a second name."""
    payload = reproducible_tree(tmp_path / "payload", V1)
    time.sleep(SETTLE)
    upgrade(host_root, *KIND_ARGS["sync"](payload, "1.0.0"), check=0)
    first = os.stat(index_of(host_root, "1.0.0"))
    # The same payload again: every entry is the one 1.0.0's index holds, so its file gets the new name too.
    upgrade(host_root, *KIND_ARGS["sync"](payload, "2.0.0"), check=0)
    linked = os.stat(index_of(host_root, "2.0.0"))
    assert (linked.st_ino, linked.st_nlink) == (first.st_ino, 2)
    assert sorted(p.name for p in index_dir(host_root).iterdir()) == ["1.0.0", "2.0.0"]
    return payload, first


def test_a_sync_that_changed_nothing_links_the_index_it_was_compared_with(host_root, tmp_path):
    payload, first = linked_sync_index(host_root, tmp_path)
    corrupt_keeping_size_and_mtime(payload / "etc/conf", V2["etc/conf"].encode())
    upgrade(host_root, *KIND_ARGS["sync"](payload, "3.0.0"), check=0)
    assert installed_files(host_root / "opt/c") == expected_files(V2)
    # A sync that wrote a file writes its index anew; 1.0.0's name went with the backup that undid it.
    written = os.stat(index_of(host_root, "3.0.0"))
    assert written.st_ino != first.st_ino and written.st_nlink == 1
    assert sorted(p.name for p in index_dir(host_root).iterdir()) == ["2.0.0", "3.0.0"]
    assert os.stat(index_of(host_root, "2.0.0")).st_nlink == 1
    # A repair of the current version that changed nothing leaves its index as it was.
    upgrade(host_root, *KIND_ARGS["sync"](payload, "3.0.0"), check=0)
    assert os.stat(index_of(host_root, "3.0.0")).st_ino == written.st_ino


@pytest.mark.skipif(STRACE is None, reason="strace is not installed: no way to see which payload files are opened")
@pytest.mark.skipif(not XATTRS_BY_NAME, reason=OPENED_FOR_XATTRS)
def test_a_linked_index_vouches_as_a_written_one(host_root, tmp_path):
    payload, _ = linked_sync_index(host_root, tmp_path)
    # The next run, with one file changed, reads only that file of the payload.
    corrupt_keeping_size_and_mtime(payload / "etc/conf", V2["etc/conf"].encode())
    assert opened_by_upgrade(host_root, tmp_path, KIND_ARGS["sync"](payload, "3.0.0"), payload, "3.0.0") == {"etc/conf"}
    assert installed_files(host_root / "opt/c") == expected_files(V2)
