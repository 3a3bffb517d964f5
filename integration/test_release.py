"""What a release ships beside the binary: its SBOM and third-party notices (scripts/sbom, made by each build),
the relink kit the LGPL asks for (scripts/relink-kit), and the hardening of the static-pie."""

import hashlib
import json
import os
import re
import subprocess
import tarfile
from pathlib import Path

import pytest

from conftest import HOIST_BIN, run_hoist

SOURCE_DIR = Path(os.environ.get("HOIST_SOURCE_DIR") or Path(__file__).resolve().parent.parent)
BUILD_DIR = Path(os.environ.get("HOIST_BUILD_DIR") or Path(HOIST_BIN).parent)
STATIC = os.environ.get("HOIST_STATIC") != "OFF"
needs_static = pytest.mark.skipif(not STATIC, reason="a build configured with HOIST_STATIC=OFF (the sanitizer "
                                                     "build) links dynamically")


def sbom():
    return json.loads((Path(HOIST_BIN).parent / "hoist.spdx.json").read_text())


def package(document, name):
    found = [p for p in document["packages"] if p["name"] == name]
    assert len(found) == 1, f"the SBOM names {name!r} {len(found)} times"
    return found[0]


def same_version(reported, recorded):
    # libsystemd reports its major version only, as its pkg-config file says (252 for 252.39).
    return recorded == reported or recorded.startswith(reported + ".")


def readelf(*args):
    return subprocess.run(["readelf", "-W", *args, HOIST_BIN], check=True, capture_output=True, text=True).stdout


def cache_value(name):
    text = (BUILD_DIR / "CMakeCache.txt").read_text()
    return re.search(rf"^{name}:[A-Z]+=(.*)$", text, re.M).group(1)


def test_the_sbom_names_every_library_hoist_version_lists_at_the_same_version():
    document = sbom()
    libraries = json.loads(run_hoist("version", "--json", check=0).stdout)["libraries"]
    assert len(libraries) >= 9
    # The compression libraries libarchive was built with are entries of their own, at the SBOM's versions.
    assert set(libraries) >= {"zlib", "liblzma", "libbz2", "liblz4", "libzstd"}
    for name, version in libraries.items():
        # "libsystemd (sd-bus)": the library, and what hoist uses of it; libbz2 is Debian's bzip2 package.
        entry = package(document, {"libbz2": "bzip2"}.get(name, name.split(" (")[0]))
        assert same_version(version, entry["versionInfo"]), (name, version, entry["versionInfo"])


def test_the_sbom_describes_this_binary_and_where_each_component_comes_from():
    document = sbom()
    assert document["spdxVersion"] == "SPDX-2.3" and document["dataLicense"] == "CC0-1.0"
    hoist = package(document, "hoist")
    assert hoist["versionInfo"] == run_hoist("--version", check=0).stdout.split()[-1]
    assert hoist["checksums"] == [{"algorithm": "SHA256",
                                   "checksumValue": hashlib.sha256(Path(HOIST_BIN).read_bytes()).hexdigest()}]
    assert hoist["licenseDeclared"] == "Apache-2.0"
    names = {p["name"] for p in document["packages"]}
    assert names >= {"hoist", "libarchive", "openssl", "libmount", "libblkid", "libsystemd", "sdbus-c++", "libacl",
                     "libcap", "libyaml", "zlib", "liblzma", "bzip2", "liblz4", "libzstd", "glibc", "libstdc++",
                     "libgcc", "CLI11", "spdlog", "fmt", "nlohmann-json"}
    linked = {r["relatedSpdxElement"] for r in document["relationships"] if r["relationshipType"] == "STATIC_LINK"}
    for p in document["packages"]:
        assert p["versionInfo"] and p["downloadLocation"] and p["licenseDeclared"] not in ("", "NOASSERTION"), p
        if p["name"] != "hoist":
            assert p["SPDXID"] in linked, p["name"]
            assert p["externalRefs"][0]["referenceLocator"].startswith(("pkg:deb/debian/", "pkg:generic/")), p
    # The sources scripts/deps built, at the versions it recorded.
    sources = (Path(cache_value("HOIST_DEPS_PREFIX")) / "share/hoist-deps/sources.txt").read_text().split("\n")
    util_linux = next(line.split()[1] for line in sources if line.startswith("util-linux "))
    assert package(document, "libmount")["externalRefs"][0]["referenceLocator"] == \
        f"pkg:deb/debian/util-linux@{util_linux}?arch=source&distro=debian-12"
    # And the Debian packages hoist links, at the version dpkg has installed for the build's architecture (the
    # arm64 cross build installs libssl-dev:arm64 beside it, and a bare name then prints both versions).
    arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True).stdout.strip()
    installed = subprocess.run(["dpkg-query", "-W", "-f=${Version}", f"libssl-dev:{arch}"], capture_output=True,
                               text=True).stdout
    assert installed, f"dpkg-query found no libssl-dev:{arch}"
    assert package(document, "openssl")["externalRefs"][0]["referenceLocator"] == \
        f"pkg:deb/debian/libssl-dev@{installed}?arch={arch}&distro=debian-12"


def test_the_notices_reproduce_each_library_s_copyright_file_and_the_licenses_they_name():
    notices = (Path(HOIST_BIN).parent / "THIRD_PARTY_NOTICES").read_text()
    for p in sbom()["packages"][1:]:
        assert f"\n{p['name']} {p['versionInfo']}  ({p['licenseDeclared']})\n" in notices, p["name"]
    # Debian's copyright files, as installed or as the source package had them, and sdbus-c++'s exception.
    assert Path("/usr/share/doc/libyaml-dev/copyright").read_text().strip() in notices
    assert "sdbus-c++ LGPL Exception" in notices or "LGPL Exception" in notices
    assert "Files: libmount/*" in notices or "libmount" in notices
    assert "GNU LESSER GENERAL PUBLIC LICENSE\n                       Version 2.1" in notices
    assert "relink" in notices and "hoist-<version>-relink.tar.gz" in notices
    assert (SOURCE_DIR / "LICENSE").read_text().startswith("\n                                 Apache License")


def test_a_library_the_sbom_does_not_know_stops_the_build(tmp_path):
    result = subprocess.run([str(SOURCE_DIR / "scripts/sbom"), "--binary", HOIST_BIN,
                             "--prefix", cache_value("HOIST_DEPS_PREFIX"), "--version", "0",
                             "--libs", "archive;z;gnutls", "--sbom", str(tmp_path / "s.json"),
                             "--notices", str(tmp_path / "n")], capture_output=True, text=True)
    assert result.returncode == 1
    assert result.stderr == ("sbom: error: hoist links -lgnutls, which scripts/sbom does not know: "
                             "add it to LIBRARIES with its license\n")
    assert not (tmp_path / "s.json").exists()


@needs_static
def test_the_relink_kit_relinks_the_same_bytes(tmp_path):
    kit = tmp_path / "kit.tar"
    subprocess.run([str(SOURCE_DIR / "scripts/relink-kit"), str(BUILD_DIR), str(kit)], check=True,
                   capture_output=True, timeout=600)
    with tarfile.open(kit) as tar:
        tar.extractall(tmp_path)
    version = run_hoist("--version", check=0).stdout.split()[-1]
    root = tmp_path / f"hoist-{version}-relink"
    names = {p.name for p in (root / "lib").iterdir()}
    assert {"libmount.a", "libblkid.a", "libsystemd.a", "libsdbus-c++.a", "libacl.a", "libhoist_cli.a"} <= names
    assert "-Llib" in (root / "relink.sh").read_text()
    subprocess.run(["./relink.sh"], cwd=root, check=True, capture_output=True, timeout=600)
    assert hashlib.sha256((root / "hoist").read_bytes()).digest() == hashlib.sha256(
        Path(HOIST_BIN).read_bytes()).digest()


@needs_static
def test_the_binary_is_a_hardened_static_pie():
    header = readelf("-h")
    assert re.search(r"Type:\s+DYN ", header), header
    segments = readelf("-l")
    assert "INTERP" not in segments                 # static: no dynamic loader
    assert re.search(r"^\s+GNU_RELRO ", segments, re.M)
    assert re.search(r"^\s+GNU_EH_FRAME ", segments, re.M)   # the unwinder's binary-search table
    stack = re.search(r"^\s+GNU_STACK\s+.*\s(R?W?E?)\s+0x10$", segments, re.M)
    assert stack and "E" not in stack.group(1), segments
    dynamic = readelf("-d")
    assert re.search(r"\(FLAGS\)\s+BIND_NOW", dynamic) or re.search(r"\(FLAGS_1\)\s+Flags: NOW", dynamic), dynamic
    assert "RUNPATH" not in dynamic and "RPATH" not in dynamic
    # Fortified calls and stack canaries are in the code (the binary is not stripped).
    symbols = subprocess.run(["nm", HOIST_BIN], check=True, capture_output=True, text=True).stdout
    assert re.search(r" __memcpy_chk$", symbols, re.M) and re.search(r" __stack_chk_fail$", symbols, re.M)
