"""Archive entry names through the real binary: names with control characters
are installed as they are (they are legal names) and never reach the terminal
raw, in the text log or the JSON one.
"""

import io
import json
import os
import tarfile

import pytest

from payloads import manifest_without, upgrade
from test_hostile import MAY_CHANGE, MTIME, installed, tree_args  # noqa: F401 (installed is a fixture)

# ESC (a terminal escape sequence), BEL and CR (which returns to the start of the line and forges what follows).
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
