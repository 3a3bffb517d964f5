"""Archive entry names through the real binary: names with control characters
are installed as they are (they are legal names) and never reach the terminal
raw, in the text log or the JSON one.
"""

import io
import json
import os
import shutil
import struct
import subprocess
import tarfile
import unicodedata
import zipfile
import zlib
from pathlib import Path

import pytest

from payloads import manifest_without, upgrade
from test_hostile import MAY_CHANGE, MTIME, installed, tree_args  # noqa: F401 (installed is a fixture)

# ESC (a terminal escape sequence), BEL and CR (which returns to the start of the line and forges what follows).
BSDTAR = shutil.which("bsdtar")
CONTROL = "\x1b[31mred\x1b[0m\a\rforged"
CONTROL_BYTES = {chr(c) for c in range(0x20)} - {"\n"} | {"\x7f"}


def pax_archive(path, entries):
    """A pax tar of (name, data, pax headers) regular files and ("dir/", None, {}) directories."""
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT, encoding="utf-8", errors="surrogateescape") as archive:
        for name, data, headers in entries:
            info = tarfile.TarInfo(name.rstrip("/"))
            info.mtime, info.pax_headers = MTIME, headers
            if data is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                archive.addfile(info)
            else:
                info.size, info.mode = len(data), 0o644
                archive.addfile(info, io.BytesIO(data))
    return path


def assert_no_raw_control(text):
    raw = sorted({c for c in text if c in CONTROL_BYTES})
    assert not raw, (raw, text)


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_names_with_control_characters_are_installed_and_never_logged_raw(installed, tmp_path,
                                                                          log_format):  # noqa: F811
    archive = pax_archive(tmp_path / "control.tar", [
        (f"d{CONTROL}/", None, {}),
        (f"d{CONTROL}/f{CONTROL}", b"one\n", {}),
        (f"bell\a", b"two\n", {}),
    ])
    result = upgrade(installed, "--log-format", log_format, "-v", *tree_args(archive), check=0)
    root = installed / "opt/app/2.0.0"
    assert (root / f"d{CONTROL}" / f"f{CONTROL}").read_bytes() == b"one\n"
    assert (root / "bell\a").read_bytes() == b"two\n"
    assert_no_raw_control(result.stdout + result.stderr)


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_a_refused_archive_names_its_entry_and_xattr_escaped(installed, tmp_path, log_format):  # noqa: F811
    # An xattr in a namespace the kernel does not have: setting it fails, and the message names the xattr and the
    # entry, both chosen by the archive.
    archive = pax_archive(tmp_path / "xattr.tar", [
        (f"x{CONTROL}", b"x\n", {f"SCHILY.xattr.bogus.{CONTROL}": "v"}),
    ])
    before = manifest_without(installed, *MAY_CHANGE)
    result = upgrade(installed, "--log-format", log_format, *tree_args(archive))
    assert result.returncode == 1, result
    assert_no_raw_control(result.stdout + result.stderr)
    message = result.stderr
    if log_format == "json":
        message = "".join(json.loads(line)["msg"] for line in result.stderr.splitlines())
    assert "set xattr 'bogus.\\x1b[31mred\\x1b[0m\\x07\\rforged' on '" in message, result
    assert "/x\\x1b[31mred\\x1b[0m\\x07\\rforged': Operation not supported" in message, result
    assert manifest_without(installed, *MAY_CHANGE) == before
    assert os.readlink(installed / "opt/app/current") == "1.0.0"


def test_an_acl_user_name_is_quoted_escaped(installed, tmp_path):  # noqa: F811
    archive = pax_archive(tmp_path / "acl.tar", [
        ("acl", b"x\n", {"SCHILY.acl.access": f"user::rw-\nuser:al{CONTROL}:rw-\ngroup::r--\nmask::rw-\nother::r--\n"}),
    ])
    before = manifest_without(installed, *MAY_CHANGE)
    result = upgrade(installed, *tree_args(archive))
    assert result.returncode == 5, result
    assert_no_raw_control(result.stderr)
    assert "its access ACL names user 'al\\x1b[31mred\\x1b[0m\\x07\\rforged' without a numeric id" in result.stderr
    assert manifest_without(installed, *MAY_CHANGE) == before


# --- names in UTF-8 and other bytes --------------------------------------------------------------------------

NAMES = ["café/naïve.txt", "日本/ü", "plain/ascii.txt"]


def zip_archive(path, names, utf8_flag=True, directory=None):
    """A zip of `names` (data: the name's bytes); zipfile sets the UTF-8 flag on non-ASCII names, which is cleared
    again (local headers and central directory) when `utf8_flag` is false: the bytes stay UTF-8 either way."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        if directory is not None:
            archive.writestr(zipfile.ZipInfo(directory, date_time=(2023, 11, 14, 0, 0, 0)), b"")
        for name in names:
            archive.writestr(zipfile.ZipInfo(name, date_time=(2023, 11, 14, 0, 0, 0)), name.encode())
    data = bytearray(out.getvalue())
    if not utf8_flag:
        for signature, flags in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
            at = data.find(signature)
            while at >= 0:
                data[at + flags + 1] &= ~0x08 & 0xFF
                at = data.find(signature, at + 4)
    Path(path).write_bytes(bytes(data))
    return Path(path)


def installed_names(root):
    """Every path under `root` as bytes, relative."""
    root = os.fsencode(root)
    out = set()
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            out.add(os.path.relpath(os.path.join(directory, name), root))
    return out


def expected_names(names):
    out = set()
    for name in names:
        parts = name.encode().split(b"/")
        out.update(b"/".join(parts[:i]) for i in range(1, len(parts) + 1))
    return out


@pytest.mark.parametrize("utf8_flag", [True, False], ids=["utf8-flag", "no-flag"])
def test_a_zip_with_utf8_names_is_installed_with_those_bytes(installed, tmp_path, utf8_flag):  # noqa: F811
    archive = zip_archive(tmp_path / "names.zip", NAMES, utf8_flag, directory="répertoire/")
    upgrade(installed, *tree_args(archive), check=0)
    root = installed / "opt/app/2.0.0"
    assert installed_names(root) == expected_names(NAMES) | {"répertoire".encode()}
    assert (root / "répertoire").is_dir()
    for name in NAMES:
        assert (root / name).read_bytes() == name.encode()


def test_a_bsdtar_zip_and_a_pax_tar_with_utf8_names_are_installed_with_those_bytes(installed, tmp_path):  # noqa: F811
    if BSDTAR is None:
        pytest.skip("bsdtar is not installed")
    tree = tmp_path / "tree"
    for name in NAMES:
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_bytes(name.encode())
    for fmt, extra in (("zip", ["--options", "zip:hdrcharset=UTF-8"]), ("pax", [])):
        archive = tmp_path / f"names.{fmt}"
        subprocess.run([BSDTAR, "-cf", str(archive), "--format", fmt, *extra, "-C", str(tree), *sorted(
            {name.split("/")[0] for name in NAMES})], check=True, env={"LC_ALL": "C.UTF-8", "PATH": os.environ["PATH"]})
        version = "2.0.0" if fmt == "zip" else "3.0.0"
        upgrade(installed, *tree_args(archive, version), check=0)
        root = installed / "opt/app" / version
        assert installed_names(root) == expected_names(NAMES), fmt
        for name in NAMES:
            assert (root / name).read_bytes() == name.encode(), fmt


def test_a_zip_name_in_invalid_utf8_is_installed_with_its_bytes(installed, tmp_path):  # noqa: F811
    # No UTF-8 flag: libarchive leaves the bytes as they are, and so does hoist.
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr(zipfile.ZipInfo("QQ-name", date_time=(2023, 11, 14, 0, 0, 0)), b"content\n")
    data = out.getvalue()
    assert data.count(b"QQ-name") == 2  # the local header and the central directory
    archive = tmp_path / "latin1.zip"
    archive.write_bytes(data.replace(b"QQ-name", b"\xe9\xe8-name"))
    upgrade(installed, *tree_args(archive), check=0)
    root = installed / "opt/app/2.0.0"
    assert installed_names(root) == {b"\xe9\xe8-name"}
    assert (root / os.fsdecode(b"\xe9\xe8-name")).read_bytes() == b"content\n"


def test_a_zip64_zip_with_utf8_names_is_installed_with_those_bytes(installed, tmp_path, monkeypatch):  # noqa: F811
    # zip64 records for everything zipfile can: the central directory gives the second entry's local header
    # offset in its zip64 extra field, and the end record sends the reader to the zip64 end record.
    monkeypatch.setattr(zipfile, "ZIP64_LIMIT", 1)
    monkeypatch.setattr(zipfile, "ZIP_FILECOUNT_LIMIT", 0)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name in NAMES:
            archive.writestr(zipfile.ZipInfo(name, date_time=(2023, 11, 14, 0, 0, 0)), name.encode())
    data = bytearray(out.getvalue())
    end = data.rfind(b"PK\x05\x06")
    data[end + 8:end + 12] = b"\xff" * 4  # entry counts
    data[end + 16:end + 20] = b"\xff" * 4  # central directory offset
    archive = tmp_path / "zip64.zip"
    archive.write_bytes(bytes(data))
    upgrade(installed, *tree_args(archive), check=0)
    root = installed / "opt/app/2.0.0"
    assert installed_names(root) == expected_names(NAMES)
    for name in NAMES:
        assert (root / name).read_bytes() == name.encode()


def test_a_refused_name_in_invalid_utf8_is_escaped_and_the_log_stays_utf8(installed, tmp_path):  # noqa: F811
    # The entry's data does not match its CRC-32, so the refusal quotes the name: its bytes are not UTF-8, and
    # some of them (0x9b is CSI) mean something to a terminal. The harness decodes stderr as strict UTF-8.
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr(zipfile.ZipInfo("QQQ-name", date_time=(2023, 11, 14, 0, 0, 0)), b"content\n")
    data = out.getvalue().replace(b"QQQ-name", b"\xe9\x9b\xe8-name").replace(b"content\n", b"CONTENT\n")
    archive = tmp_path / "latin1.zip"
    archive.write_bytes(data)
    before = manifest_without(installed, *MAY_CHANGE)
    for log_format in ("text", "json"):
        result = upgrade(installed, "--log-format", log_format, *tree_args(archive))
        assert result.returncode == 5, result
        assert "the data of entry '\\xe9\\x9b\\xe8-name' does not pass the format's check (ZIP bad CRC" in (
            result.stderr if log_format == "text" else "".join(
                json.loads(line)["msg"] for line in result.stderr.splitlines())), result
        assert_no_raw_control(result.stderr)
    assert manifest_without(installed, *MAY_CHANGE) == before


# --- every format libarchive reads, made by the archivers of Debian, through the static binary ------------------

SEVEN_Z = shutil.which("7z")
GNU_CPIO = shutil.which("cpio")
GENISOIMAGE = shutil.which("genisoimage")
XORRISO = shutil.which("xorriso")
GCAB = shutil.which("gcab")
INFO_ZIP = shutil.which("zip")
GNU_TAR = shutil.which("tar")
UTF8_ENV = {"LC_ALL": "C.UTF-8", "PATH": os.environ["PATH"]}
# A decomposed (NFD) name: e and U+0301. Where the format stores bytes, they are installed as they are.
NFD = "nfd-cafe\u0301/x.txt"


def names_tree(path, names=NAMES):
    """A directory with a file per name, whose content is the name's bytes."""
    for name in names:
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_bytes(name.encode())
    for directory, dirs, files in os.walk(path):
        for entry in dirs + files:
            os.utime(os.path.join(directory, entry), (MTIME, MTIME))
    return path


def tops(names):
    return sorted({name.split("/")[0] for name in names})


def archivers():
    """format id → (the tool it needs, how to make the archive of a names_tree: (tree, out) → argv, cwd)."""
    def bsdtar(fmt):
        return BSDTAR, lambda tree, out: ([BSDTAR, "-cf", out, "--format", fmt, *tops(NAMES_ALL)], tree)

    return {
        "7z-bsdtar": bsdtar("7zip"),
        "7z-p7zip": (SEVEN_Z, lambda tree, out: ([SEVEN_Z, "a", "-bd", "-bso0", out, *tops(NAMES_ALL)], tree)),
        "zip-p7zip": (SEVEN_Z, lambda tree, out: ([SEVEN_Z, "a", "-bd", "-bso0", "-tzip", out, *tops(NAMES_ALL)],
                                                  tree)),
        "zip-info-zip": (INFO_ZIP, lambda tree, out: ([INFO_ZIP, "-qr", out, *tops(NAMES_ALL)], tree)),
        "ustar-bsdtar": bsdtar("ustar"),
        "gnutar-bsdtar": bsdtar("gnutar"),
        "pax-bsdtar": bsdtar("pax"),
        "gnu-tar": (GNU_TAR, lambda tree, out: ([GNU_TAR, "--format=gnu", "-cf", out, *tops(NAMES_ALL)], tree)),
        "posix-tar": (GNU_TAR, lambda tree, out: ([GNU_TAR, "--format=posix", "-cf", out, *tops(NAMES_ALL)], tree)),
        "newc-bsdtar": bsdtar("newc"),
        "odc-bsdtar": bsdtar("odc"),
        "cpio": (GNU_CPIO, lambda tree, out: (["sh", "-c", f"find {' '.join(tops(NAMES_ALL))} | "
                                                     f"{GNU_CPIO} -o -H newc --quiet > {out}"], tree)),
        "iso9660-bsdtar": bsdtar("iso9660"),
        "iso-joliet-genisoimage": (GENISOIMAGE, lambda tree, out: ([GENISOIMAGE, "-quiet", "-J", "-joliet-long",
                                                                     "-o", out, "."], tree)),
        "iso-rockridge-joliet-xorriso": (XORRISO, lambda tree, out: ([XORRISO, "-outdev", out, "-joliet", "on",
                                                                       "-map", ".", "/"], tree)),
        # CAB holds files only, each name with its directories, in UTF-8 with the format's UTF-8 attribute.
        "cab-gcab": (GCAB, lambda tree, out: ([GCAB, "-c", out, *NAMES_ALL], tree)),
    }


# A 7-Zip and a Joliet-only ISO hold UTF-16 names, a CAB UTF-8 ones it converts: libarchive decodes them and
# composes a decomposed one (NFC); the formats that store bytes keep the NFD name as it is (docs/payloads.md,
# "Entry names").
NAMES_ALL = NAMES + [NFD]
COMPOSED = {"7z-bsdtar", "7z-p7zip", "iso-joliet-genisoimage", "cab-gcab"}


@pytest.mark.parametrize("archiver", list(archivers()))
def test_utf8_names_are_installed_as_the_archives_bytes_in_every_format(installed, tmp_path,
                                                                       archiver):  # noqa: F811
    # A 7-Zip (and a Joliet ISO's) UTF-16 names could not be converted in the static binary's C locale, and came
    # out as '': `refusing archive entry '' ... its name is empty`.
    tool, make = archivers()[archiver]
    if tool is None:
        pytest.skip(f"the archiver of {archiver} is not installed (scripts/apt-packages lists it)")
    tree = names_tree(tmp_path / "tree", NAMES_ALL)
    archive = tmp_path / f"names.{archiver}"
    argv, cwd = make(tree, archive)
    subprocess.run(list(map(str, argv)), cwd=cwd, check=True, env=UTF8_ENV, capture_output=True)
    result = upgrade(installed, *tree_args(archive), check=0)
    root = installed / "opt/app/2.0.0"
    nfd = unicodedata.normalize("NFC", NFD) if archiver in COMPOSED else NFD
    expected = NAMES + [nfd]
    assert installed_names(root) == expected_names(expected), (archiver, result.stderr[-600:])
    for name, stored in zip(expected, NAMES_ALL):
        assert (root / name).read_bytes() == stored.encode(), (archiver, name)


def test_an_ar_archive_names_its_utf8_entry_as_its_bytes(installed, tmp_path):  # noqa: F811
    # ar members have no file type that libarchive gives (GNU ar writes a mode without one): refused, whatever the
    # name; the refusal names the member by its bytes.
    tree = names_tree(tmp_path / "tree", ["naïve.txt"])
    subprocess.run(["ar", "rc", tmp_path / "names.a", "naïve.txt"], cwd=tree, check=True, env=UTF8_ENV)
    result = upgrade(installed, *tree_args(tmp_path / "names.a"))
    assert result.returncode == 5, result
    assert "refusing archive entry 'naïve.txt' in '" in result.stderr, result.stderr


def seven_zip_with_lone_surrogate(path):
    """A 7-Zip archive (bsdtar's, its header stored, not compressed) whose one entry's UTF-16 name holds a high
    surrogate that no low one follows: a name that is no text, which 7-Zip itself never writes."""
    tree = names_tree(path.parent / "lone", ["QQQQ.txt"])
    subprocess.run([BSDTAR, "-cf", path, "--format", "7zip", "--options", "7zip:compression=store", "QQQQ.txt"],
                   cwd=tree, check=True, env=UTF8_ENV)
    data = bytearray(path.read_bytes())
    at = data.find("QQQQ".encode("utf-16-le"))
    assert at > 0 and data.find("QQQQ".encode("utf-16-le"), at + 1) < 0
    data[at:at + 2] = b"\x00\xd8"  # U+D800
    # The start header: signature (6), version (2), its CRC (4), then the next header's offset, size, CRC.
    offset, size = struct.unpack_from("<QQ", data, 12)
    header = bytes(data[32 + offset:32 + offset + size])
    struct.pack_into("<I", data, 28, zlib.crc32(header))
    struct.pack_into("<I", data, 8, zlib.crc32(bytes(data[12:32])))
    path.write_bytes(bytes(data))
    return path


@pytest.mark.skipif(BSDTAR is None, reason="bsdtar is not installed")
def test_a_7z_name_that_is_not_utf16_text_is_refused_naming_the_archive_and_entry(installed, tmp_path):  # noqa: F811
    archive = seven_zip_with_lone_surrogate(tmp_path / "lone.7z")
    before = manifest_without(installed, *MAY_CHANGE)
    result = upgrade(installed, *tree_args(archive))
    assert result.returncode == 5, result
    assert (f"failed to read archive '{archive}': the name of its entry 1 (the first) cannot be decoded as UTF-8 "
            "(Pathname cannot be converted from UTF-16LE to current locale.)") in result.stderr, result.stderr
    assert "refusing archive entry ''" not in result.stderr
    assert manifest_without(installed, *MAY_CHANGE) == before
