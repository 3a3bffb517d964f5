"""scripts/deps --check: what the archive has newer than the last build of the static dependencies."""

import hashlib
import os
import re
import subprocess
from pathlib import Path

import pytest

SOURCE_DIR = Path(os.environ.get("HOIST_SOURCE_DIR") or Path(__file__).resolve().parent.parent)


def fake_deps_cache(tmp_path, packages, sources):
    """A cache with one complete build of the current scripts/deps that recorded PACKAGES and SOURCES."""
    prefix = tmp_path / "cache" / "0123456789abcdef" / "prefix"
    record = prefix / "share" / "hoist-deps"
    record.mkdir(parents=True)
    (prefix / ".complete").touch()
    digest = hashlib.sha256((SOURCE_DIR / "scripts/deps").read_bytes()).hexdigest()
    (record / "script.sha256").write_text(digest + "\n")
    (record / "packages.txt").write_text("".join(f"{p} {v}\n" for p, v in packages.items()))
    (record / "sources.txt").write_text("".join(f"{p} {v} (Debian source, bookworm)\n" for p, v in sources.items()))
    return tmp_path / "cache"


def candidate(package):
    policy = subprocess.run(["apt-cache", "policy", package], capture_output=True, text=True).stdout
    return re.search(r"Candidate: (\S+)", policy).group(1)


def newest_source(name, series):
    showsrc = subprocess.run(["apt-cache", "showsrc", name], capture_output=True, text=True).stdout
    versions = [v for v in re.findall(r"^Version: (\S+)$", showsrc, re.M) if v.startswith(series)]
    return subprocess.run(["sort", "-V"], input="\n".join(versions), capture_output=True,
                          text=True).stdout.split()[-1]


def deps_check(cache):
    return subprocess.run([str(SOURCE_DIR / "scripts/deps"), "--check"], capture_output=True, text=True,
                          env={**os.environ, "HOIST_DEPS_CACHE": str(cache), "HOIST_DEPS_NO_UPDATE": "1"})


def test_deps_check_lists_what_the_archive_has_newer_than_the_last_build(tmp_path):
    if not newest_source_available():
        pytest.skip("apt has no deb-src lists here (scripts/deps adds them when it builds)")
    packages = {"libssl-dev": candidate("libssl-dev"), "zlib1g-dev": candidate("zlib1g-dev")}
    sources = {"util-linux": newest_source("util-linux", "2.38.1-"), "systemd": newest_source("systemd", "252."),
               "libarchive": newest_source("libarchive", "3.6.2-")}
    current = deps_check(fake_deps_cache(tmp_path / "current", packages, sources))
    assert (current.returncode, current.stdout) == (0, ""), current.stderr
    assert "deps: nothing newer in the archive" in current.stderr

    old = deps_check(fake_deps_cache(tmp_path / "old", {**packages, "libssl-dev": "3.0.0-1"},
                                     {**sources, "systemd": "252.1-1"}))
    assert old.returncode == 1, old.stderr
    assert old.stdout == (f"libssl-dev 3.0.0-1 -> {packages['libssl-dev']} (binary)\n"
                          f"systemd 252.1-1 -> {sources['systemd']} (source)\n")

    none = deps_check(tmp_path / "empty")
    assert none.returncode == 2
    assert f"no complete build of this scripts/deps in {tmp_path / 'empty'} to compare" in none.stderr


def newest_source_available():
    return bool(subprocess.run(["apt-cache", "showsrc", "util-linux"], capture_output=True, text=True).stdout)
