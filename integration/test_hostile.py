"""Hostile payloads against the real binary, on a scratch host root that already
has version 1.0.0 of a tree component installed.

Every hostile archive is built in each format that can express it (tar,
tar.gz, cpio newc, zip; the last two converted from the tar by bsdtar), and
directories carry what a directory can. For each input the test asserts the exit
code and the message, and that the host root is byte for byte and metadata for
metadata what it was before (tree_manifest, compared after), but for the lock
file and the last result recorded in the component's state. What hoist must
accept (device nodes, setuid files, odd names, rsync -aHAX semantics) is checked
to be installed exactly, not refused.
"""

import hashlib
import io
import os
import shutil
import stat
import subprocess
import tarfile
import uuid
import zlib
from pathlib import Path

import pytest

from conftest import tree_manifest
from payloads import make_keys, make_tree, manifest_without, openssl, read_tree, state_of, upgrade, write_sha256sums

BSDTAR = shutil.which("bsdtar")
FORMATS = ["tar", "tar.gz", "cpio", "zip"]
MTIME = 1_700_000_123
V1 = {"bin/app": "v1\n", "etc/app.conf": "a=1\n"}
# What a refused run may change: the lock file, and the last result in the state.
MAY_CHANGE = ("run/hoist", "var/lib/hoist/app/state.json")


# --- entries and archives -------------------------------------------------------------------------------------


def reg(name, data=b"x\n", mode=0o644, uid=0, gid=0):
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.uid, info.gid = len(data), mode, uid, gid
    return info, data


def sym(name, target):
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = tarfile.SYMTYPE, target, 0o777
    return info, None


def hard(name, target):
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = tarfile.LNKTYPE, target, 0o644
    return info, None


def node(name, kind, major=0, minor=0, mode=0o600):
    info = tarfile.TarInfo(name)
    info.type, info.devmajor, info.devminor, info.mode = kind, major, minor, mode
    return info, None


def dirent(name, mode=0o755):
    info = tarfile.TarInfo(name)
    info.type, info.mode = tarfile.DIRTYPE, mode
    return info, None


def build_archive(directory, fmt, entries):
    """An archive of `entries` in `fmt`; skips the test when the format cannot hold them."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tar_path = directory / "payload.tar"
    with tarfile.open(tar_path, "w", format=tarfile.GNU_FORMAT, encoding="utf-8",
                      errors="surrogateescape") as archive:
        for info, data in entries:
            info.mtime = MTIME
            archive.addfile(info, io.BytesIO(data) if data is not None else None)
    if fmt == "tar":
        return tar_path
    if fmt == "tar.gz":
        out = directory / "payload.tar.gz"
        out.write_bytes(gzip_bytes(tar_path.read_bytes()))
        return out
    if BSDTAR is None:
        pytest.skip("bsdtar is not installed: no cpio or zip archives")
    out = directory / f"payload.{fmt}"
    result = subprocess.run([BSDTAR, "-cf", str(out), "--format", "newc" if fmt == "cpio" else "zip",
                             f"@{tar_path}"], capture_output=True, text=True)
    if result.returncode != 0:
        pytest.skip(f"{fmt} cannot hold these entries: {result.stderr.strip()}")
    return out


def gzip_bytes(data):
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    return compressor.compress(data) + compressor.flush()


# --- the host -----------------------------------------------------------------------------------------------


def tree_args(source, version="2.0.0", *extra):
    return ["--component", "app", "--kind", "tree", "--source", source, "--destination", "/opt/app",
            "--version", version, *extra]


@pytest.fixture
def installed(host_root, tmp_path):
    """The host with 1.0.0 installed, and files outside the payload that must stay as they are."""
    (host_root / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("outside the payload\n")
    v1 = make_tree(tmp_path / "v1", V1, 1)
    upgrade(host_root, *tree_args(v1, "1.0.0"), check=0)
    return host_root


def state_without_result(host_root):
    state = state_of(host_root, "app")
    state.pop("last_result")
    return state


def expect_refused(host_root, tmp_path, source, code, message, *extra, env=None):
    """Runs the upgrade to 2.0.0 and asserts it is refused and that nothing on the host changed."""
    before = manifest_without(host_root, *MAY_CHANGE)
    state_before = state_without_result(host_root)
    outside_before = tree_manifest(tmp_path / "outside")
    result = upgrade(host_root, *tree_args(source, "2.0.0", *extra), env=env)
    assert result.returncode == code, result
    assert message in result.stderr, result
    assert manifest_without(host_root, *MAY_CHANGE) == before
    assert state_without_result(host_root) == state_before
    assert tree_manifest(tmp_path / "outside") == outside_before
    last = state_of(host_root, "app")["last_result"]
    if code == 2:
        # Bad input is refused before the state is read: nothing is recorded.
        assert last["outcome"] == "succeeded" and last["version"] == "1.0.0", last
    else:
        assert last["outcome"] in ("failed", "refused") and last["version"] == "2.0.0", last
    assert os.readlink(host_root / "opt/app/current") == "1.0.0"
    assert read_tree(host_root / "opt/app/1.0.0") == read_tree(tmp_path / "v1")
    return result


# --- archives that must be refused ---------------------------------------------------------------------------

ESCAPE = f"hoist-escape-{uuid.uuid4().hex}"

# name -> (entries, formats that can express them, exit code, message)
REFUSED = {
    "dot-dot": ([reg("../../../../../../../../../../../../tmp/" + ESCAPE)], FORMATS, 5,
                "it climbs out of the payload with '..'"),
    "dot-dot-inside": ([dirent("a"), reg("a/../../" + ESCAPE)], FORMATS, 5,
                       "it climbs out of the payload with '..'"),
    "absolute": ([reg("/tmp/" + ESCAPE)], FORMATS, 5, "it is an absolute path"),
    "absolute-etc": ([reg("/etc/passwd", b"pwned\n")], FORMATS, 5, "it is an absolute path"),
    "through-symlink-abs": ([sym("etc", "/etc"), reg("etc/passwd", b"pwned\n")], FORMATS, 5, "etc/passwd"),
    "through-symlink-up": ([sym("up", "../../.."), reg("up/" + ESCAPE)], FORMATS, 5, "up/" + ESCAPE),
    "through-symlink-deep": ([dirent("d"), sym("d/l", "../.."), dirent("x"), reg("d/l/etc/passwd", b"pwned\n")],
                             FORMATS, 5, "d/l/etc/passwd"),
    "hardlink-absolute": ([hard("h", "/etc/passwd")], ["tar", "tar.gz"], 5, "'h'"),
    "hardlink-up": ([hard("h", "../../../etc/passwd")], ["tar", "tar.gz"], 5, "'h'"),
    "hardlink-missing": ([hard("h", "nowhere")], ["tar", "tar.gz"], 5, "'h'"),
    "hardlink-through-symlink": ([sym("s", "/etc"), hard("h", "s/passwd")], ["tar", "tar.gz"], 5, "'h'"),
    "newline-name": ([reg("a\nb")], FORMATS, 5, "its name contains a newline"),
    "name-part-too-long": ([dirent("d"), reg("d/" + "n" * 256)], FORMATS, 5,
                           "a part of its name is longer than 255 bytes"),
    "duplicate-file": ([reg("a", b"one\n"), reg("a", b"two\n")], FORMATS, 5, "it appears twice in the archive"),
    "duplicate-dir-then-file": ([dirent("a"), reg("a", b"two\n")], FORMATS, 5, "it appears twice in the archive"),
    "duplicate-file-then-symlink": ([reg("a"), sym("a", "/etc/passwd")], FORMATS, 5,
                                    "it appears twice in the archive"),
}


def refused_cases():
    for name, (_, formats, _, _) in REFUSED.items():
        for fmt in formats:
            yield pytest.param(name, fmt, id=f"{name}-{fmt}")


@pytest.mark.parametrize("case,fmt", list(refused_cases()))
def test_a_hostile_archive_is_refused_and_the_host_is_untouched(installed, tmp_path, case, fmt):
    entries, _, code, message = REFUSED[case]
    archive = build_archive(tmp_path / "payload", fmt, entries)
    expect_refused(installed, tmp_path, archive, code, message)
    assert not os.path.lexists("/tmp/" + ESCAPE)
    assert not os.path.lexists("/etc/" + ESCAPE)


@pytest.mark.parametrize("case", list(REFUSED))
def test_a_hostile_archive_refused_on_a_fresh_host_leaves_it_exactly_as_it_was(host_root, tmp_path, case):
    # A first install: nothing of the component exists, so the run makes its destination's directories
    # (/opt, /opt/deep, /opt/deep/app) before the entry is refused. It must take them back and record no
    # state, as a failed verification does; only the lock file in /run may be new.
    entries, _, code, message = REFUSED[case]
    archive = build_archive(tmp_path / "payload", "tar", entries)
    before = manifest_without(host_root, "run/hoist")
    result = upgrade(host_root, "--component", "app", "--kind", "tree", "--source", archive, "--destination",
                     "/opt/deep/app", "--version", "1.0.0")
    assert result.returncode == code, result
    assert message in result.stderr, result
    assert manifest_without(host_root, "run/hoist") == before
    assert not os.path.lexists(host_root / "opt") and not os.path.lexists(host_root / "var/lib/hoist")
    assert not os.path.lexists("/tmp/" + ESCAPE)


def test_a_decompression_bomb_is_refused_by_the_default_ratio(installed, tmp_path):
    # 64 MiB of zeros in one entry: gzip makes it about 1000 times smaller.
    bomb = tmp_path / "bomb.tar.gz"
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    info = tarfile.TarInfo("zeros")
    info.size = 64 << 20
    info.mtime = MTIME
    with open(bomb, "wb") as out:
        out.write(compressor.compress(info.tobuf(format=tarfile.GNU_FORMAT)))
        chunk = bytes(1 << 20)
        for _ in range(64):
            out.write(compressor.compress(chunk))
        out.write(compressor.compress(bytes(1024)))
        out.write(compressor.flush())
    result = expect_refused(installed, tmp_path, bomb, 5, "times its size of")
    assert "(a decompression bomb?)" in result.stderr
    # The limit is configurable: a lower size limit refuses it with its own message…
    result = expect_refused(installed, tmp_path, bomb, 5, "it unpacks to more than 1000000 bytes",
                            "--max-unpacked-bytes", "1000000")


def test_the_size_limit_refuses_an_ordinary_archive_too(installed, tmp_path):
    archive = build_archive(tmp_path / "payload", "tar", [reg("big", os.urandom(200_000))])
    expect_refused(installed, tmp_path, archive, 5, "it unpacks to more than 100000 bytes",
                   "--max-unpacked-bytes", "100000")


def test_a_small_archive_may_compress_well(installed, tmp_path):
    # 1 MiB of zeros compresses about 1000:1, but the ratio applies only past 16 MiB.
    archive = build_archive(tmp_path / "payload", "tar.gz", [reg("zeros", bytes(1 << 20))])
    upgrade(installed, *tree_args(archive), check=0)
    assert (installed / "opt/app/2.0.0/zeros").read_bytes() == bytes(1 << 20)


def test_bad_limit_values_are_usage_errors(installed, tmp_path):
    archive = build_archive(tmp_path / "payload", "tar", [reg("a")])
    for flag, value in (("--max-unpack-ratio", "-1"), ("--max-unpacked-bytes", "lots"),
                        ("--max-unpacked-bytes", "-5"), ("--threads", "0"), ("--threads", "65"),
                        ("--threads", "two")):
        expect_refused(installed, tmp_path, archive, 2, flag, flag, value)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("cut", [0.5, 0.9])
def test_a_truncated_archive_fails_and_leaves_nothing(installed, tmp_path, fmt, cut):
    entries = [reg(f"f{i}", os.urandom(50_000)) for i in range(6)]
    archive = build_archive(tmp_path / "payload", fmt, entries)
    data = archive.read_bytes()
    truncated = archive.with_name("truncated-" + archive.name)
    truncated.write_bytes(data[:int(len(data) * cut)])
    # A compressed archive cut short fails its compression's check before anything is staged: exit 5, as any
    # damage would; the others fail while staging.
    if fmt == "tar.gz":
        result = expect_refused(installed, tmp_path, truncated, 5,
                                f"refusing archive '{truncated}': it ends before the end of its gzip stream")
    else:
        result = expect_refused(installed, tmp_path, truncated, 1, str(truncated))
    assert not (installed / "opt/app/.2.0.0.partial").exists()
    assert "Traceback" not in result.stderr


def test_garbage_is_not_an_archive(installed, tmp_path):
    garbage = tmp_path / "payload.tar.gz"
    garbage.write_bytes(os.urandom(4096))
    expect_refused(installed, tmp_path, garbage, 2, str(garbage))


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_checksum_that_does_not_match_the_archive_exits_5(installed, tmp_path, fmt):
    archive = build_archive(tmp_path / "payload", fmt, [reg("bin/app", b"v2\n")])
    sums = tmp_path / "SHA256SUMS"
    sums.write_text(f"{hashlib.sha256(b'something else').hexdigest()}  {archive.name}\n")
    expect_refused(installed, tmp_path, archive, 5, f"checksum mismatch for '{archive.name}'",
                   "--sha256sums", sums)


@pytest.fixture
def keys(tmp_path):
    return make_keys(tmp_path, ("good", "evil"), "p256")


def test_a_signature_by_another_key_exits_5(installed, tmp_path, keys):
    archive = build_archive(tmp_path / "payload", "tar.gz", [reg("bin/app", b"v2\n")])
    sums = write_sha256sums(tmp_path / "SHA256SUMS", {archive.name: archive})
    openssl("dgst", "-sha256", "-sign", "evil.key", "-out", "SHA256SUMS.sig", "SHA256SUMS", cwd=tmp_path)
    expect_refused(installed, tmp_path, archive, 5, "signature", "--sha256sums", sums,
                   "--signature", tmp_path / "SHA256SUMS.sig", "--public-key", keys / "good.pem")
    # A good signature over other sums (the sums edited after signing) fails too.
    openssl("dgst", "-sha256", "-sign", "good.key", "-out", "SHA256SUMS.sig", "SHA256SUMS", cwd=tmp_path)
    sums.write_text(sums.read_text().replace(archive.name, archive.name + " "))
    expect_refused(installed, tmp_path, archive, 5, "signature", "--sha256sums", sums,
                   "--signature", tmp_path / "SHA256SUMS.sig", "--public-key", keys / "good.pem")
    # A garbage signature file.
    (tmp_path / "SHA256SUMS.sig").write_bytes(os.urandom(70))
    expect_refused(installed, tmp_path, archive, 5, "signature", "--sha256sums",
                   write_sha256sums(tmp_path / "SHA256SUMS", {archive.name: archive}),
                   "--signature", tmp_path / "SHA256SUMS.sig", "--public-key", keys / "good.pem")
    # And the good signature installs.
    openssl("dgst", "-sha256", "-sign", "good.key", "-out", "SHA256SUMS.sig", "SHA256SUMS", cwd=tmp_path)
    upgrade(installed, *tree_args(archive, "2.0.0", "--sha256sums", sums, "--signature",
                                  tmp_path / "SHA256SUMS.sig", "--public-key", keys / "good.pem"), check=0)


def test_a_manifest_with_a_number_out_of_range_is_bad_input(installed, tmp_path):
    # Found by fuzz/manifest.cpp: nlohmann's out_of_range escaped as an internal error (exit 1, no file named).
    manifest = tmp_path / "manifest.json"
    manifest.write_text('{"schema": 1e400, "components": []}')
    before = manifest_without(installed, *MAY_CHANGE)
    result = upgrade(installed, "--manifest", manifest, check=2)
    assert f"invalid manifest '{manifest}': a number is out of range" in result.stderr
    assert manifest_without(installed, *MAY_CHANGE) == before


# --- what hoist must accept, exactly ----------------------------------------------------------------------------

INVALID_UTF8 = "bad-\udcff\udcfe-name"
LONG_DIR = "d" * 250
LONG_PATH = "/".join([LONG_DIR] * 20) + "/leaf"  # 5 KiB: longer than PATH_MAX


def accepted_entries():
    return [
        reg("bin/setuid", b"#!/bin/sh\n", mode=0o4755),
        reg("bin/setgid", b"#!/bin/sh\n", mode=0o2711, uid=1234, gid=4321),
        dirent("sticky", mode=0o1777),
        node("dev/null", tarfile.CHRTYPE, 1, 3, 0o666),
        node("dev/loop-like", tarfile.BLKTYPE, 7, 200, 0o660),
        node("run/fifo", tarfile.FIFOTYPE, mode=0o640),
        sym("etc-link", "/etc"),
        sym("up-link", "../../../.."),
        reg("odd/" + INVALID_UTF8, b"bytes\n"),
        reg("odd/tab\tand space", b"tab\n"),
        reg("files/a", b"shared\n"),
        hard("files/b", "files/a"),
    ]


def check_accepted(tree, hard_links=True):
    """The accepted entries, installed exactly."""
    def st(rel):
        return os.lstat(os.path.join(os.fsencode(tree), os.fsencode(rel)))

    assert stat.S_IMODE(st("bin/setuid").st_mode) == 0o4755 and st("bin/setuid").st_uid == 0
    setgid = st("bin/setgid")
    assert (stat.S_IMODE(setgid.st_mode), setgid.st_uid, setgid.st_gid) == (0o2711, 1234, 4321)
    assert stat.S_IMODE(st("sticky").st_mode) == 0o1777 and stat.S_ISDIR(st("sticky").st_mode)
    null = st("dev/null")
    assert stat.S_ISCHR(null.st_mode) and null.st_rdev == os.makedev(1, 3) and stat.S_IMODE(null.st_mode) == 0o666
    loop = st("dev/loop-like")
    assert stat.S_ISBLK(loop.st_mode) and loop.st_rdev == os.makedev(7, 200)
    assert stat.S_ISFIFO(st("run/fifo").st_mode) and stat.S_IMODE(st("run/fifo").st_mode) == 0o640
    assert os.readlink(Path(tree) / "etc-link") == "/etc"
    assert os.readlink(Path(tree) / "up-link") == "../../../.."
    assert sorted(os.listdir(os.path.join(os.fsencode(tree), b"odd"))) == \
        sorted([os.fsencode(INVALID_UTF8), b"tab\tand space"])
    assert (Path(tree) / "odd" / INVALID_UTF8).read_bytes() == b"bytes\n"
    assert (st("files/a").st_ino == st("files/b").st_ino) == hard_links


@pytest.mark.parametrize("fmt", ["tar", "tar.gz", "cpio"])
def test_devices_setuid_and_odd_names_in_an_archive_are_installed_exactly(installed, tmp_path, fmt):
    entries = accepted_entries()
    if fmt == "cpio":
        # bsdtar cannot carry a tar's hard link over to cpio (it writes an entry of no type): a file instead.
        entries = [e if e[0].name != "files/b" else reg("files/b", b"shared\n") for e in entries]
    archive = build_archive(tmp_path / "payload", fmt, entries)
    before = manifest_without(installed, "run/hoist", "var/lib/hoist", "opt/app")
    upgrade(installed, *tree_args(archive), check=0)
    check_accepted(installed / "opt/app/2.0.0", hard_links=fmt != "cpio")
    # The links were written as links, never followed: the host's /etc is as it was.
    assert manifest_without(installed, "run/hoist", "var/lib/hoist", "opt/app") == before


def test_a_zip_with_a_symlink_and_odd_names_is_installed_exactly(installed, tmp_path):
    archive = build_archive(tmp_path / "payload", "zip", [
        reg("bin/setuid", b"#!/bin/sh\n", mode=0o4755), sym("etc-link", "/etc"), reg("odd/tab\tand space")])
    upgrade(installed, *tree_args(archive), check=0)
    tree = installed / "opt/app/2.0.0"
    assert stat.S_IMODE(os.lstat(tree / "bin/setuid").st_mode) == 0o4755
    assert os.readlink(tree / "etc-link") == "/etc"
    assert (tree / "odd/tab\tand space").read_bytes() == b"x\n"


def read_deep(tree):
    """The leaf of LONG_PATH under `tree`, walked one directory at a time (its full path is too long to open)."""
    fd = os.open(tree, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in LONG_PATH.split("/")[:-1]:
            next_fd = os.open(part, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = next_fd
        with open(os.open("leaf", os.O_RDONLY, dir_fd=fd), "rb") as leaf:
            return leaf.read()
    finally:
        os.close(fd)


@pytest.mark.parametrize("fmt", ["tar", "tar.gz"])
def test_a_path_longer_than_path_max_in_an_archive_is_installed_and_later_removed(installed, tmp_path, fmt):
    archive = build_archive(tmp_path / "payload", fmt, [reg(LONG_PATH, b"deep\n")])
    upgrade(installed, *tree_args(archive), check=0)
    assert read_deep(installed / "opt/app/2.0.0") == b"deep\n"
    # --keep removes it again, however deep it goes.
    v3 = make_tree(tmp_path / "v3", {"a": "3\n"}, 3)
    upgrade(installed, *tree_args(v3, "3.0.0", "--keep", "2"), check=0)
    upgrade(installed, *tree_args(v3, "4.0.0", "--keep", "2"), check=0)
    assert sorted(os.listdir(installed / "opt/app")) == ["3.0.0", "4.0.0", "current", "previous"]


# --- directories ---------------------------------------------------------------------------------------------


def test_a_directory_with_devices_setuid_links_out_and_odd_names_is_installed_exactly(installed, tmp_path):
    src = tmp_path / "dirpayload"
    (src / "bin").mkdir(parents=True)
    (src / "bin/setuid").write_text("#!/bin/sh\n")
    os.chmod(src / "bin/setuid", 0o4755)
    (src / "bin/setgid").write_text("#!/bin/sh\n")
    os.chown(src / "bin/setgid", 1234, 4321)
    os.chmod(src / "bin/setgid", 0o2711)
    (src / "sticky").mkdir()
    os.chmod(src / "sticky", 0o1777)
    (src / "dev").mkdir()
    os.mknod(src / "dev/null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    os.chmod(src / "dev/null", 0o666)
    os.mknod(src / "dev/loop-like", 0o660 | stat.S_IFBLK, os.makedev(7, 200))
    (src / "run").mkdir()
    os.mkfifo(src / "run/fifo", 0o640)
    os.chmod(src / "run/fifo", 0o640)
    (src / "etc-link").symlink_to("/etc")
    (src / "up-link").symlink_to("../../../..")
    (src / "odd").mkdir()
    (src / "odd" / INVALID_UTF8).write_bytes(b"bytes\n")
    (src / "odd/tab\tand space").write_bytes(b"tab\n")
    (src / "files").mkdir()
    (src / "files/a").write_bytes(b"shared\n")
    os.link(src / "files/a", src / "files/b")
    # A hard link to a file outside the payload: copied as a file of its own.
    os.link(tmp_path / "outside/secret", src / "files/outside-link")
    before = manifest_without(installed, "run/hoist", "var/lib/hoist", "opt/app")
    outside_before = tree_manifest(tmp_path / "outside")
    upgrade(installed, *tree_args(src), check=0)
    tree = installed / "opt/app/2.0.0"
    check_accepted(tree)
    copied = os.lstat(tree / "files/outside-link")
    assert copied.st_ino != os.lstat(tmp_path / "outside/secret").st_ino and copied.st_nlink == 1
    assert (tree / "files/outside-link").read_text() == "outside the payload\n"
    assert manifest_without(installed, "run/hoist", "var/lib/hoist", "opt/app") == before
    assert tree_manifest(tmp_path / "outside") == outside_before


def test_a_directory_entry_with_a_newline_in_its_name_is_kept_exactly(installed, tmp_path):
    # An archive's entry with a newline is refused (see REFUSED), but a directory is copied as rsync -a would.
    src = make_tree(tmp_path / "dirpayload", {"ok": "ok\n"}, 2)
    (src / "a\nb").write_text("newline\n")
    upgrade(installed, *tree_args(src), check=0)
    assert (installed / "opt/app/2.0.0/a\nb").read_text() == "newline\n"


def test_a_directory_path_longer_than_path_max_is_installed(installed, tmp_path):
    src = tmp_path / "dirpayload"
    src.mkdir()
    fd = os.open(src, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in LONG_PATH.split("/")[:-1]:
            os.mkdir(part, dir_fd=fd)
            next_fd = os.open(part, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = next_fd
        with open(os.open("leaf", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "wb") as leaf:
            leaf.write(b"deep\n")
    finally:
        os.close(fd)
    upgrade(installed, *tree_args(src), check=0)
    assert read_deep(installed / "opt/app/2.0.0") == b"deep\n"
    subprocess.run(["rm", "-rf", str(src)], check=False)


def test_a_destination_through_a_host_symlink_out_of_the_root_stays_inside(installed, tmp_path):
    # The host's /srv is a symlink that would climb out of the host root by string prefixing.
    (installed / "srv").symlink_to("../../../../../../../" + str(tmp_path / "escaped").lstrip("/"))
    v2 = make_tree(tmp_path / "v2", {"a": "v2\n"}, 2)
    args = ["--component", "srv", "--kind", "tree", "--source", v2, "--destination", "/srv/app", "--version", "2.0.0"]
    # While the link's target does not exist inside the host root: exit 1, and nothing made outside.
    result = upgrade(installed, *args, check=1)
    assert "No such file or directory" in result.stderr
    assert not (tmp_path / "escaped").exists()
    (installed / str(tmp_path / "escaped").lstrip("/")).mkdir(parents=True)
    upgrade(installed, *args, check=0)
    # The link was resolved inside the host root, as the host would: `..` stops at its root.
    assert not (tmp_path / "escaped").exists()
    assert (installed / str(tmp_path / "escaped").lstrip("/") / "app/current/a").read_text() == "v2\n"
