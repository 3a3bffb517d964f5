"""hoist's sysext verdicts against systemd 252's own: each case is a host os-release and a directory extension
(its release file, under its own name or another one with the xattr user.extension-release.strict), and
`systemd-sysext merge --root` decides in a private mount namespace whether it merges the extension, while
`hoist upgrade --dry-run` decides whether it installs it (exit 0) or refuses it (exit 5). Both must agree: the
release-file parser (systemd's env-file parser) and the checks of extension_release_validate() alike."""

import os
import shutil
import subprocess

import pytest

from conftest import run_hoist

HOST = b"ID=debian\nVERSION_ID=12\n"
NAME = "extension-release.tools"

# (case, host os-release, release file text, release file name, user.extension-release.strict or None)
CASES = [
    ("plain match", HOST, b"ID=debian\nVERSION_ID=12\n", NAME, None),
    ("another ID", HOST, b"ID=fedora\nVERSION_ID=12\n", NAME, None),
    ("another VERSION_ID", HOST, b"ID=debian\nVERSION_ID=11\n", NAME, None),
    ("ID=_any", HOST, b"ID=_any\n", NAME, None),
    ("no ID", HOST, b"VERSION_ID=12\n", NAME, None),
    ("blanks around key and value", HOST, b"  ID = debian  \n\tVERSION_ID=\t12\t\n", NAME, None),
    # backslash-newline continuations
    ("continuation, unquoted", HOST, b"ID=debian\nVERSION_ID=1\\\n2\n", NAME, None),
    ("continuation, double quotes", HOST, b"ID=debian\nVERSION_ID=\"1\\\n2\"\n", NAME, None),
    ("continuation, single quotes", HOST, b"ID=debian\nVERSION_ID='1\\\n2'\n", NAME, None),
    ("continuation into the next key", HOST, b"ID=debian\\\nVERSION_ID=12\n", NAME, None),
    # comments
    ("a comment ending in a backslash hides the ID", HOST, b"# note \\\nID=debian\nVERSION_ID=12\n", NAME, None),
    ("a comment ending in a backslash hides a later ID", HOST,
     b"ID=debian\nVERSION_ID=12\n; note \\\nID=fedora\n", NAME, None),
    ("a '#' inside a value", HOST, b"ID=debian#x\nVERSION_ID=12\n", NAME, None),
    # quotes
    ("quotes inside an unquoted value", HOST, b"ID=deb\"ian\"\nVERSION_ID=12\n", NAME, None),
    ("single quotes inside an unquoted value", HOST, b"ID=deb'ian'\nVERSION_ID=12\n", NAME, None),
    ("an unquoted part after quotes", HOST, b"ID=\"deb\"ian\nVERSION_ID=12\n", NAME, None),
    ("two quoted parts with a blank between", HOST, b"ID=\"deb\" 'ian'\nVERSION_ID=12\n", NAME, None),
    ("escapes in double quotes", HOST, b"ID=\"deb\\ian\"\nVERSION_ID=12\n", NAME, None),
    ("an unterminated quote at the end", HOST, b"VERSION_ID=12\nID=\"debian", NAME, None),
    ("an unterminated quote before a newline at the end", HOST, b"VERSION_ID=12\nID=\"debian\n", NAME, None),
    ("an unterminated quote swallows the next lines", HOST, b"ID='debian\nVERSION_ID=12\n", NAME, None),
    # line ends, NUL, UTF-8
    ("CR ends a line", HOST, b"ID=debian\rVERSION_ID=12\r", NAME, None),
    ("CRLF", HOST, b"ID=debian\r\nVERSION_ID=12\r\n", NAME, None),
    ("a NUL inside the text", HOST, b"ID=debian\nVERSION_ID=12\n\0ID=fedora\n", NAME, None),
    ("invalid UTF-8 in another value", HOST, b"ID=debian\nVERSION_ID=12\nNAME=caf\xe9\n", NAME, None),
    ("valid UTF-8 in another value", HOST, "ID=debian\nVERSION_ID=12\nNAME=café\n".encode(), NAME, None),
    ("a noncharacter in another value", HOST, b"ID=debian\nVERSION_ID=12\nNAME=\xef\xb7\x90\n", NAME, None),
    ("invalid UTF-8 in the host's os-release", b"ID=debian\nVERSION_ID=12\nNAME=caf\xe9\n",
     b"ID=debian\nVERSION_ID=12\n", NAME, None),
    ("a host continuation line", b"ID=deb\\\nian\nVERSION_ID=12\n", b"ID=debian\nVERSION_ID=12\n", NAME, None),
    # SYSEXT_SCOPE
    ("SYSEXT_SCOPE=system", HOST, b"ID=debian\nVERSION_ID=12\nSYSEXT_SCOPE=system\n", NAME, None),
    ("SYSEXT_SCOPE without system", HOST, b"ID=debian\nVERSION_ID=12\nSYSEXT_SCOPE=\"portable initrd\"\n", NAME,
     None),
    ("an empty SYSEXT_SCOPE", HOST, b"ID=debian\nVERSION_ID=12\nSYSEXT_SCOPE=\n", NAME, None),
    ("a blank SYSEXT_SCOPE", HOST, b"ID=debian\nVERSION_ID=12\nSYSEXT_SCOPE=\" \"\n", NAME, None),
    # the host's ID
    ("a host with an empty ID, ID=_any", b"ID=\nVERSION_ID=12\n", b"ID=_any\n", NAME, None),
    ("a host without ID, ID=_any", b"VERSION_ID=12\n", b"ID=_any\n", NAME, None),
    ("a rolling host", b"ID=arch\n", b"ID=arch\nVERSION_ID=1\n", NAME, None),
    ("SYSEXT_LEVEL on both sides", b"ID=debian\nVERSION_ID=12\nSYSEXT_LEVEL=2\n", b"ID=debian\nSYSEXT_LEVEL=2\n",
     NAME, None),
    ("another SYSEXT_LEVEL", b"ID=debian\nVERSION_ID=12\nSYSEXT_LEVEL=2\n", b"ID=debian\nSYSEXT_LEVEL=3\n", NAME,
     None),
    ("ARCHITECTURE=_any", HOST, b"ID=debian\nVERSION_ID=12\nARCHITECTURE=_any\n", NAME, None),
    ("a foreign ARCHITECTURE", HOST, b"ID=debian\nVERSION_ID=12\nARCHITECTURE=s390x\n", NAME, None),
    # the release file under another name
    ("another name, strict=0", HOST, b"ID=debian\nVERSION_ID=12\n", "extension-release.other", b"0"),
    ("another name, strict=off", HOST, b"ID=debian\nVERSION_ID=12\n", "extension-release.other", b"off"),
    ("another name, strict=No", HOST, b"ID=debian\nVERSION_ID=12\n", "extension-release.other", b"No"),
    ("another name, strict=1", HOST, b"ID=debian\nVERSION_ID=12\n", "extension-release.other", b"1"),
    ("another name, strict=maybe", HOST, b"ID=debian\nVERSION_ID=12\n", "extension-release.other", b"maybe"),
    ("another name, no xattr", HOST, b"ID=debian\nVERSION_ID=12\n", "extension-release.other", None),
    ("another name, strict=0, mismatched", HOST, b"ID=fedora\nVERSION_ID=12\n", "extension-release.other", b"0"),
    ("the own name wins over strict=0", HOST, b"ID=debian\nVERSION_ID=12\n", NAME, b"0"),
]

# Where hoist knowingly differs from systemd 252 (docs/sysext.md, "System extensions"): newer systemd matches ID_LIKE too.
KNOWN_DIFFERENCES = [
    ("the host's ID_LIKE", b"ID=ubuntu\nID_LIKE=debian\nVERSION_ID=24.04\n", b"ID=debian\nVERSION_ID=24.04\n",
     NAME, None),
]


def needs_systemd_sysext():
    if os.geteuid() != 0 or not shutil.which("systemd-sysext") or not shutil.which("unshare"):
        pytest.skip("needs root, systemd-sysext and unshare (a private mount namespace)")


def make_extension(directory, release, file_name, strict):
    release_dir = directory / "usr/lib/extension-release.d"
    release_dir.mkdir(parents=True)
    (release_dir / file_name).write_bytes(release)
    if strict is not None:
        os.setxattr(release_dir / file_name, "user.extension-release.strict", strict)
    (directory / "usr/bin").mkdir(parents=True)
    (directory / "usr/bin/tool").write_text("tool\n")


def systemd_verdicts(tmp_path, cases):
    """Whether systemd-sysext 252 merges each case's extension, from one private mount namespace."""
    # unshare makes every mount private to the new namespace first; shared again inside it, the merge that
    # systemd-sysext's child makes shows here, and never on the machine. /run is systemd-sysext's workspace.
    script = ["set -u", "mount --make-rshared /", "mount -t tmpfs tmpfs /run"]
    for index, (_, host, release, file_name, strict) in enumerate(cases):
        root = tmp_path / f"systemd/{index}"
        (root / "etc").mkdir(parents=True)
        (root / "usr/lib").mkdir(parents=True)
        (root / "etc/os-release").write_bytes(host)
        make_extension(root / "var/lib/extensions/tools", release, file_name, strict)
        script.append(f"systemd-sysext merge --root={root} >/dev/null 2>&1; echo \"{index} $?\"; "
                      f"if test -e {root}/usr/bin/tool; then echo \"{index} merged\"; fi")
    result = subprocess.run(["unshare", "-m", "sh", "-c", "\n".join(script)], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    merged = {int(line.split()[0]) for line in result.stdout.splitlines() if line.endswith(" merged")}
    statuses = [line for line in result.stdout.splitlines() if not line.endswith(" merged")]
    assert len(statuses) == len(cases), result.stdout
    return [index in merged for index in range(len(cases))]


def hoist_verdicts(tmp_path, cases):
    """Whether hoist would install each case's extension: exit 0, or 5 when it refuses it."""
    verdicts = []
    for index, (name, host, release, file_name, strict) in enumerate(cases):
        host_root = tmp_path / f"hoist/{index}/host"
        (host_root / "etc").mkdir(parents=True)
        (host_root / "etc/os-release").write_bytes(host)
        extension = tmp_path / f"hoist/{index}/tools"
        make_extension(extension, release, file_name, strict)
        result = run_hoist("upgrade", "--host-root", host_root, "--component", "tools", "--kind", "sysext",
                           "--source", extension, "--destination", "/etc/extensions/tools", "--version", "1",
                           "--version-scheme", "systemd", "--dry-run")
        assert result.returncode in (0, 5), (name, result)
        verdicts.append(result.returncode == 0)
    return verdicts


def test_sysext_verdicts_agree_with_systemd_sysext_252(tmp_path):
    needs_systemd_sysext()
    systemd = systemd_verdicts(tmp_path, CASES)
    hoist = hoist_verdicts(tmp_path, CASES)
    differ = [(case[0], "systemd merges" if s else "systemd refuses", "hoist installs" if h else "hoist refuses")
              for case, s, h in zip(CASES, systemd, hoist) if s != h]
    assert differ == []
    # Both sides say yes and no: the cases test something.
    assert 0 < sum(systemd) < len(CASES)


def test_the_known_differences_are_still_there(tmp_path):
    needs_systemd_sysext()
    systemd = systemd_verdicts(tmp_path, KNOWN_DIFFERENCES)
    hoist = hoist_verdicts(tmp_path, KNOWN_DIFFERENCES)
    assert systemd == [False] and hoist == [True]
