"""Payloads and host inspection for the upgrade, rollback and manifest tests."""

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import run_hoist, tree_manifest

# Distinct mtimes per version: the quick check (size, mtime, mode, owner) must
# see a changed file as changed even when its size is the same.
_MTIME_BASE = 1_700_000_000


def make_tree(root, files, version_index=0):
    """Writes `files` (relative path -> bytes or str) under `root`; returns root."""
    root = Path(root)
    for i, (rel, content) in enumerate(sorted(files.items())):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
        stamp = _MTIME_BASE + version_index * 1000 + i
        os.utime(path, (stamp, stamp))
    return root


def write_sha256sums(path, files):
    """SHA256SUMS in sha256sum's format for `files` (name -> path)."""
    lines = []
    for name, file in sorted(files.items()):
        digest = hashlib.sha256(Path(file).read_bytes()).hexdigest()
        lines.append(f"{digest}  {name}\n")
    Path(path).write_text("".join(lines))
    return Path(path)


def sums_for_tree(tree, path):
    tree = Path(tree)
    files = {str(p.relative_to(tree)): p for p in tree.rglob("*") if p.is_file() and not p.is_symlink()}
    return write_sha256sums(path, files)


def read_tree(root):
    """relative path -> content (files), '-> target' (links), None (dirs)."""
    root = Path(root)
    out = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = "-> " + os.readlink(path)
        elif path.is_dir():
            out[rel] = None
        else:
            out[rel] = path.read_bytes()
    return out


def state_of(host_root, component, state_dir="var/lib/hoist"):
    return json.loads((Path(host_root) / state_dir / component / "state.json").read_text())


def upgrade(host_root, *args, env=None, check=None, timeout=120, wrapper=()):
    return run_hoist("upgrade", "--host-root", host_root, "--lock-timeout", "5", *args, env=env, check=check,
                     timeout=timeout, wrapper=wrapper)


def rollback(host_root, *args, env=None, check=None):
    return run_hoist("rollback", "--host-root", host_root, "--lock-timeout", "5", *args, env=env, check=check)


def manifest_without(host_root, *excluded_prefixes):
    """tree_manifest of the host minus the paths a refused run may still write
    (the lock file, a state.json that records the refusal)."""
    entries = tree_manifest(host_root)
    return {k: v for k, v in entries.items() if not any(k == p or k.startswith(p + "/") for p in excluded_prefixes)}


def host_read(host_root, host_path):
    """The bytes at `host_path` as the host reads them: a host-absolute link
    (the file kind's) is followed inside the host root, not in this process's."""
    path = Path(host_root) / host_path.lstrip("/")
    for _ in range(8):
        if not path.is_symlink():
            break
        target = os.readlink(path)
        path = Path(host_root) / target.lstrip("/") if target.startswith("/") else path.parent / target
    return path.read_bytes()


FAKE_K3S = r'''
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--version") == 0) {
    printf("k3s version %s (6da14b51)\ngo version go1.22.8\n", VERSION);
    return 0;
  }
  fprintf(stderr, "unexpected arguments\n");
  return 2;
}
'''


def fake_k3s(host_root, tmp_path, printed):
    """A static stand-in for the k3s binary that the k3s installer put at /usr/local/bin/k3s: it prints
    `printed` as `k3s --version` prints its version. Static, because it runs chrooted in the host root."""
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc to build a static stand-in for k3s")
    source = tmp_path / "fake-k3s.c"
    source.write_text(FAKE_K3S)
    binary = host_root / "usr/local/bin/k3s"
    binary.parent.mkdir(parents=True, exist_ok=True)
    if binary.is_symlink() or binary.exists():
        binary.unlink()
    subprocess.run(["gcc", "-static", "-O1", f'-DVERSION="{printed}"', "-o", str(binary), str(source)],
                   check=True, capture_output=True)
    return binary


def openssl(*args, cwd):
    subprocess.run(["openssl", *map(str, args)], cwd=cwd, check=True, capture_output=True)


def make_keys(directory, names, algorithm="ed25519"):
    """Key pairs made with the openssl command: <name>.key and <name>.pem in `directory`, for each name;
    `algorithm` is ed25519 or p256 (the two hoist checks). Skips the test when openssl is missing."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    generate = {"ed25519": ("-algorithm", "ed25519"),
                "p256": ("-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256")}[algorithm]
    for name in names:
        openssl("genpkey", *generate, "-out", f"{name}.key", cwd=directory)
        openssl("pkey", "-in", f"{name}.key", "-pubout", "-out", f"{name}.pem", cwd=directory)
    return directory


def read_content_index(path, sources=None):
    """hoist's content index file (src/transfer/content_index.cpp), read independently of hoist: relative path (bytes)
    -> (SHA-256, inode, size, mtime ns, ctime ns). Checks its trailing SHA-256. `sources`, a dict when given, gets
    the payload file each digest was read from where the index names one: relative path -> (st_dev, inode, ctime
    ns)."""
    data = Path(path).read_bytes()
    body, trailer = data[:-32], data[-32:]
    assert hashlib.sha256(body).digest() == trailer, f"{path}: the trailing SHA-256 does not match"
    magic = b"hoist-content-index 2\n"
    assert body.startswith(magic), path
    at = len(magic)

    def varint():
        nonlocal at
        value, shift = 0, 0
        while True:
            byte = body[at]
            at += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value

    def signed():
        raw = varint()
        return (raw >> 1) ^ -(raw & 1)

    def string():
        nonlocal at
        size = varint()
        at += size
        return body[at - size:at]

    entries = {}
    for _ in range(varint()):
        directory = string()
        for _ in range(varint()):
            name = string()
            digest = body[at:at + 32]
            at += 32
            ino, size = varint(), signed()
            mtime = signed() * 10**9 + varint()
            ctime = signed() * 10**9 + varint()
            rel = directory + b"/" + name if directory else name
            entries[rel] = (digest, ino, size, mtime, ctime)
            source_ino = varint()
            if source_ino:
                dev = varint()
                source_ctime = signed() * 10**9 + varint()
                if sources is not None:
                    sources[rel] = (dev, source_ino, source_ctime)
    assert at == len(body), path
    return entries
