"""Damaged and unsupported archives against the real binary, on a scratch host
root that already has version 1.0.0 of a tree component installed.

With no SHA256SUMS, a compressed archive's own checks (gzip's CRC-32 and ISIZE,
bzip2's CRCs, xz's check, zstd's and lz4's content checksums, zip's CRC-32 per
entry) are the only integrity there is. For each format, one byte is flipped in
the compressed data and one in the stored check: hoist must refuse the archive
(exit 5, naming it and the check), and leave the host exactly as it was.
libarchive reads some compressions through a program found on PATH (lzop,
lrzip, grzip): hoist must never run one.
"""

import hashlib
import io
import random
import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest

from payloads import manifest_without, read_tree, upgrade
from test_hostile import MAY_CHANGE, MTIME, installed, tree_args  # noqa: F401 (installed is a fixture)

BSDTAR = shutil.which("bsdtar")


def refused(host_root, tmp_path, source, code, message, *extra, env=None):
    """Runs the upgrade to 2.0.0; asserts the exit code and message, and that the host is as it was: 1.0.0 current
    and whole, no 2.0.0 staged (a damaged archive may be refused before the state is read, or after)."""
    before = manifest_without(host_root, *MAY_CHANGE)
    result = upgrade(host_root, *tree_args(source, "2.0.0", *extra), env=env)
    assert result.returncode == code, result
    assert message in result.stderr, result
    assert manifest_without(host_root, *MAY_CHANGE) == before
    assert (host_root / "opt/app/current").readlink() == Path("1.0.0")
    assert read_tree(host_root / "opt/app/1.0.0") == read_tree(tmp_path / "v1")
    assert not (host_root / "opt/app/2.0.0").exists() and not (host_root / "opt/app/.2.0.0.partial").exists()
    return result


def content():
    """256 KiB: half incompressible (deflate stores it as it is: only the CRC can tell a flipped byte), half text."""
    rng = random.Random(19)
    noise = bytes(rng.getrandbits(8) for _ in range(128 * 1024))
    text = b"".join(b"line %06d of the new version\n" % i for i in range(128 * 1024 // 29 + 1))[:128 * 1024]
    return noise + text


def tar_bytes(data):
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as archive:
        info = tarfile.TarInfo("bin/app")
        info.size, info.mode, info.mtime = len(data), 0o755, MTIME
        archive.addfile(info, io.BytesIO(data))
    return out.getvalue()


def compress(tool, data):
    return subprocess.run([tool, *COMPRESSORS[tool]], input=data, capture_output=True, check=True).stdout


COMPRESSORS = {"gzip": ["-n", "-c"], "xz": ["-c"], "zstd": ["-q", "-c"], "lz4": ["-q", "-c"], "bzip2": ["-c"]}
SUFFIX = {"gzip": "tar.gz", "xz": "tar.xz", "zstd": "tar.zst", "lz4": "tar.lz4", "bzip2": "tar.bz2"}


def zip_bytes(data, method):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=method) as archive:
        info = zipfile.ZipInfo("bin/app", date_time=(2023, 11, 14, 22, 15, 22))
        info.compress_type = method
        info.external_attr = 0o100755 << 16
        archive.writestr(info, data)
    return out.getvalue()


def cpio_gz_bytes(tmp_path, data):
    if BSDTAR is None:
        pytest.skip("bsdtar is not installed: no cpio archives")
    tar = tmp_path / "inner.tar"
    tar.write_bytes(tar_bytes(data))
    cpio = subprocess.run([BSDTAR, "-cf", "-", "--format", "newc", f"@{tar}"], capture_output=True, check=True).stdout
    return compress("gzip", cpio)


def make(fmt, tmp_path, data):
    if fmt in COMPRESSORS:
        if shutil.which(fmt) is None:
            pytest.skip(f"{fmt} is not installed")
        return SUFFIX[fmt], compress(fmt, tar_bytes(data))
    if fmt == "zip-deflate":
        return "zip", zip_bytes(data, zipfile.ZIP_DEFLATED)
    if fmt == "zip-stored":
        return "zip", zip_bytes(data, zipfile.ZIP_STORED)
    assert fmt == "cpio.gz"
    return "cpio.gz", cpio_gz_bytes(tmp_path, data)


def flip(data, offset):
    damaged = bytearray(data)
    damaged[offset] ^= 0x5A
    return bytes(damaged)


def zip_with_crc(data, delta):
    """The zip with its entry's stored CRC-32 changed, in the local header and the central directory alike."""
    damaged = bytearray(data)
    local = damaged.index(b"PK\x03\x04")
    central = damaged.index(b"PK\x01\x02")
    for field in (local + 14, central + 16):
        damaged[field] ^= delta
    return bytes(damaged)


GZIP_DATA = ("its gzip CRC-32 does not match its data", "its gzip data is damaged")
# format -> damage -> (how to damage the archive's bytes, what the message must say (one of))
DAMAGES = {
    "gzip": {"data": (lambda d: flip(d, len(d) // 2), GZIP_DATA),
             "crc": (lambda d: flip(d, len(d) - 8), ("its gzip CRC-32 does not match its data",)),
             "isize": (lambda d: flip(d, len(d) - 4), ("its gzip ISIZE does not match its data's length",))},
    "cpio.gz": {"data": (lambda d: flip(d, len(d) // 2), GZIP_DATA),
                "crc": (lambda d: flip(d, len(d) - 7), ("its gzip CRC-32 does not match its data",))},
    "xz": {"data": (lambda d: flip(d, len(d) // 2), ("its xz data does not decode or does not match its check",)),
           "footer": (lambda d: flip(d, len(d) - 10), ("its xz data does not decode or does not match its check",))},
    "zstd": {"data": (lambda d: flip(d, len(d) // 2), ("its zstd content checksum does not match its data",
                                                       "its zstd stream is damaged")),
             "checksum": (lambda d: flip(d, len(d) - 1), ("its zstd content checksum does not match its data",))},
    "lz4": {"data": (lambda d: flip(d, len(d) // 2), ("its lz4 content checksum does not match its data",
                                                      "its lz4 stream is damaged")),
            "checksum": (lambda d: flip(d, len(d) - 1), ("its lz4 content checksum does not match its data",))},
    "bzip2": {"data": (lambda d: flip(d, len(d) // 2), ("its bzip2 data does not match its CRC (or is damaged)",)),
              "crc": (lambda d: flip(d, len(d) - 3), ("its bzip2 data does not match its CRC (or is damaged)",))},
    "zip-deflate": {"data": (lambda d: flip(d, len(d) // 2), ("ZIP bad CRC",)),
                    "crc": (lambda d: zip_with_crc(d, 0x01), ("ZIP bad CRC",))},
    "zip-stored": {"data": (lambda d: flip(d, len(d) // 2), ("ZIP bad CRC",)),
                   "crc": (lambda d: zip_with_crc(d, 0x01), ("ZIP bad CRC",))},
}


def damage_cases():
    for fmt, damages in DAMAGES.items():
        for damage in damages:
            yield pytest.param(fmt, damage, id=f"{fmt}-{damage}")


@pytest.mark.parametrize("fmt", list(DAMAGES))
def test_an_undamaged_archive_of_each_format_is_installed_exactly(installed, tmp_path, fmt):  # noqa: F811
    data = content()
    suffix, archive_bytes = make(fmt, tmp_path, data)
    archive = tmp_path / f"payload.{suffix}"
    archive.write_bytes(archive_bytes)
    upgrade(installed, *tree_args(archive), check=0)
    assert (installed / "opt/app/2.0.0/bin/app").read_bytes() == data


@pytest.mark.parametrize("fmt,damage", list(damage_cases()))
def test_a_damaged_archive_is_refused_naming_the_check_and_the_host_is_untouched(installed, tmp_path, fmt,
                                                                                 damage):  # noqa: F811
    suffix, archive_bytes = make(fmt, tmp_path, content())
    how, messages = DAMAGES[fmt][damage]
    archive = tmp_path / f"damaged.{suffix}"
    archive.write_bytes(how(archive_bytes))
    assert archive.read_bytes() != archive_bytes
    result = refused(installed, tmp_path, archive, 5, f"refusing archive '{archive}': ")
    assert any(message in result.stderr for message in messages), result


def test_a_dry_run_of_a_damaged_archive_is_refused_too(installed, tmp_path):  # noqa: F811
    _, archive_bytes = make("gzip", tmp_path, content())
    archive = tmp_path / "damaged.tar.gz"
    archive.write_bytes(flip(archive_bytes, len(archive_bytes) - 8))
    refused(installed, tmp_path, archive, 5, "its gzip CRC-32 does not match its data", "--dry-run")


def test_bytes_after_the_last_gzip_member_are_refused(installed, tmp_path):  # noqa: F811
    data = content()
    _, archive_bytes = make("gzip", tmp_path, data)
    archive = tmp_path / "trailing.tar.gz"
    archive.write_bytes(archive_bytes + b"garbage after the stream")
    refused(installed, tmp_path, archive, 5, "bytes that are not a gzip member follow its last gzip member")
    # Members one after another are one gzip stream (`cat a.gz b.gz`): accepted.
    tar = tar_bytes(data)
    archive.write_bytes(compress("gzip", tar[:10240]) + compress("gzip", tar[10240:]))
    upgrade(installed, *tree_args(archive), check=0)
    assert (installed / "opt/app/2.0.0/bin/app").read_bytes() == data


# --- compressions that libarchive reads through a program on PATH ----------------------------------------------

# The first bytes that make libarchive pick each program's filter.
EXTERNAL = {
    "lzop": b"\x89LZO\x00\r\n\x1a\n" + bytes([0x10, 0x30, 0x20, 0x80, 0x09, 0x40, 0x02]) + bytes(64),
    "lrzip": b"LRZI\x00\x06" + bytes(64),
    "grzip": b"GRZipII\x00\x02\x04:)" + bytes(64),
}


@pytest.mark.parametrize("program", list(EXTERNAL))
def test_no_external_decompressor_is_run_for_a_payload(installed, tmp_path, program):  # noqa: F811
    # A decompressor first on PATH that would leave a marker and hand libarchive a real tar.
    fake_bin = tmp_path / "fake-bin"
    fake_bin.mkdir()
    marker = tmp_path / f"{program}-ran"
    inner = tmp_path / "inner.tar"
    inner.write_bytes(tar_bytes(b"from the fake decompressor\n"))
    script = fake_bin / program
    script.write_text(f"#!/bin/sh\necho \"$@\" > '{marker}'\ncat >/dev/null\ncat '{inner}'\n")
    script.chmod(0o755)
    archive = tmp_path / f"payload.tar.{program}"
    archive.write_bytes(EXTERNAL[program])
    result = refused(installed, tmp_path, archive, 2, f"'{archive}' is compressed with {program}, which hoist "
                            "does not read", env={"PATH": f"{fake_bin}:/usr/sbin:/usr/bin:/sbin:/bin"})
    assert not marker.exists(), result
