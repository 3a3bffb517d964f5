"""images/k3s/payload built from a k3s release directory (the k3s binary per arch and k3s' sha256sum-<arch>.txt),
checked by hoist's own dry run when it is made: here from a fixture release, as CI has no network."""

import hashlib
import json
import os
import re
import subprocess
from pathlib import Path

from conftest import HOIST_BIN, run_hoist, tree_manifest
from payloads import fake_k3s, host_read, manifest_without, state_of, upgrade

SOURCE_DIR = Path(os.environ.get("HOIST_SOURCE_DIR") or Path(__file__).resolve().parent.parent)
RECIPE = SOURCE_DIR / "images/k3s/payload"
VERSION = "v1.30.1+k3s1"


def release_dir(tmp_path, corrupt=None):
    """A directory shaped as k3s' release assets: k3s and k3s-arm64, their sum files, which (as k3s' do) also
    list assets that are not here. CORRUPT names a binary changed after its sum was taken."""
    release = tmp_path / "release"
    release.mkdir()
    fake_k3s(tmp_path / "build-root", tmp_path, VERSION)
    (release / "k3s").write_bytes((tmp_path / "build-root/usr/local/bin/k3s").read_bytes())
    (release / "k3s-arm64").write_bytes(b"\x7fELF arm64 k3s of the fixture\n")
    for arch, binary in (("amd64", "k3s"), ("arm64", "k3s-arm64")):
        digest = hashlib.sha256((release / binary).read_bytes()).hexdigest()
        (release / f"sha256sum-{arch}.txt").write_text(
            f"{'1' * 64}  k3s-airgap-images-{arch}.tar.zst\n{digest}  {binary}\n{'2' * 64}  k3s-images.txt\n")
    if corrupt:
        with open(release / corrupt, "ab") as f:
            f.write(b"\0")
    return release


def recipe(out, release, arch="amd64"):
    env = {**os.environ, "K3S_RELEASE_DIR": str(release), "K3S_ARCH": arch, "HOIST_BIN": HOIST_BIN,
           "SOURCE_DATE_EPOCH": "1717200000"}
    env.pop("HOIST_SIGNING_KEY", None)
    return subprocess.run([str(RECIPE), str(out), VERSION.replace("+", "-")], capture_output=True, text=True,
                          env=env, timeout=120)


def test_a_payload_from_a_k3s_release_carries_its_binary_and_sum_file_and_installs(tmp_path, host_root):
    release = release_dir(tmp_path)
    result = recipe(tmp_path / "payload", release)
    assert result.returncode == 0, result.stderr
    payload = tmp_path / "payload"
    assert sorted(p.name for p in payload.iterdir()) == ["hoist.json", "k3s", "sha256sum-amd64.txt"]
    assert (payload / "k3s").read_bytes() == (release / "k3s").read_bytes()
    assert (payload / "sha256sum-amd64.txt").read_bytes() == (release / "sha256sum-amd64.txt").read_bytes()
    assert '"source": "k3s"' in (payload / "hoist.json").read_text()
    assert '"sha256sums": "sha256sum-amd64.txt"' in (payload / "hoist.json").read_text()
    assert f"k3s: verified {payload}/k3s against {payload}/sha256sum-amd64.txt" in result.stderr
    # The Plan's Job, minus the container: the release's binary is what lands on the host.
    upgrade(host_root, f"--manifest={payload}/hoist.json", check=0)
    assert os.readlink(host_root / "usr/local/bin/k3s") == f"/var/lib/hoist/k3s/{VERSION}/k3s"
    assert host_read(host_root, "/usr/local/bin/k3s") == (release / "k3s").read_bytes()
    assert state_of(host_root, "k3s")["current"] == VERSION


def test_the_arm64_payload_takes_k3s_arm64_and_its_own_sum_file(tmp_path):
    release = release_dir(tmp_path)
    result = recipe(tmp_path / "payload", release, arch="arm64")
    assert result.returncode == 0, result.stderr
    payload = tmp_path / "payload"
    assert sorted(p.name for p in payload.iterdir()) == ["hoist.json", "k3s-arm64", "sha256sum-arm64.txt"]
    assert '"source": "k3s-arm64", "destination": "/usr/local/bin/k3s"' in (payload / "hoist.json").read_text()


def test_a_corrupted_release_fails_the_build_with_hoist_s_checksum_error(tmp_path):
    release = release_dir(tmp_path, corrupt="k3s")
    before = tree_manifest(release)
    result = recipe(tmp_path / "payload", release)
    assert result.returncode == 1
    # hoist's error names the component, the payload and the sums file, then the file that differs.
    assert re.search(r" error: k3s: \S+/k3s does not verify against \S+/sha256sum-amd64\.txt: checksum mismatch for "
                     r"'k3s': expected ", result.stderr), result.stderr
    assert result.stderr.endswith("payload: error: hoist's check of the payload failed (exit 5): "
                                  "k3s does not match sha256sum-amd64.txt\n")
    assert tree_manifest(release) == before


def test_a_release_without_the_binary_s_sum_or_arch_is_refused(tmp_path):
    release = release_dir(tmp_path)
    (release / "sha256sum-amd64.txt").write_text(f"{'1' * 64}  k3s-airgap-images-amd64.tar.zst\n")
    result = recipe(tmp_path / "p1", release)
    assert (result.returncode, result.stderr) == (1, f"payload: error: '{release}/sha256sum-amd64.txt' has no "
                                                     "line for k3s\n")
    (release / "k3s-arm64").unlink()
    result = recipe(tmp_path / "p2", release, arch="arm64")
    assert (result.returncode, result.stderr) == (1, f"payload: error: '{release}/k3s-arm64' does not exist "
                                                     "(a k3s release directory has k3s-arm64 and "
                                                     "sha256sum-arm64.txt)\n")
    result = recipe(tmp_path / "p3", release, arch="s390x")
    assert (result.returncode, result.stderr) == (1, "payload: error: K3S_ARCH 's390x' is not one k3s releases "
                                                     "(amd64, arm64, arm)\n")


# Upstream upgrade images keep the release's binary under a name of their own: rancher/k3s-upgrade at /opt/k3s for
# every arch (its sum file lists k3s-arm64 on arm64), rancher/rke2-upgrade at /opt/rke2 (listed as
# rke2.linux-amd64). --sha256sums-entry names the line that vouches for it.

def upstream_layout(tmp_path, release, binary, as_name):
    """An upstream image's filesystem, as far as hoist reads it: the release's BINARY at /opt/AS_NAME."""
    image = tmp_path / "image"
    (image / "opt").mkdir(parents=True, exist_ok=True)
    (image / "opt" / as_name).write_bytes((release / binary).read_bytes())
    (image / "opt" / as_name).chmod(0o755)
    return image


def file_args(source, sums, *extra):
    return ("--component", "k3s", "--kind", "file", "--source", str(source), "--destination", "/usr/local/bin/k3s",
            "--version", VERSION, "--version-scheme", "k3s", "--sha256sums", str(sums), *extra)


def test_an_upstream_images_opt_k3s_verifies_by_the_entry_its_release_lists(tmp_path, host_root):
    release = release_dir(tmp_path)
    image = upstream_layout(tmp_path, release, "k3s-arm64", "k3s")
    sums = release / "sha256sum-arm64.txt"
    before = manifest_without(host_root, "run/hoist", "var/lib/hoist")
    # Without the entry, /opt/k3s is looked up as k3s, which the arm64 sum file does not list.
    result = upgrade(host_root, *file_args(image / "opt/k3s", sums), check=5)
    assert f"k3s: {image}/opt/k3s does not verify against {sums}: " in result.stderr
    assert "'k3s'" in result.stderr
    # The wrong arch's line: its digest is another binary's.
    result = upgrade(host_root, *file_args(image / "opt/k3s", release / "sha256sum-amd64.txt",
                                           "--sha256sums-entry", "k3s"), check=5)
    assert "checksum mismatch for 'k3s'" in result.stderr
    assert manifest_without(host_root, "run/hoist", "var/lib/hoist") == before
    result = upgrade(host_root, *file_args(image / "opt/k3s", sums, "--sha256sums-entry", "k3s-arm64"), check=0)
    assert f"k3s: verified {image}/opt/k3s against {sums}" in result.stderr
    assert host_read(host_root, "/usr/local/bin/k3s") == (release / "k3s-arm64").read_bytes()
    assert state_of(host_root, "k3s")["current"] == VERSION


def test_rke2s_release_entry_and_the_manifest_key(tmp_path, host_root):
    release = tmp_path / "rke2-release"
    release.mkdir()
    (release / "rke2.linux-amd64").write_bytes(b"\x7fELF rke2 of the fixture\n")
    digest = hashlib.sha256((release / "rke2.linux-amd64").read_bytes()).hexdigest()
    (release / "sha256sum-amd64.txt").write_text(f"{'3' * 64}  rke2-images.linux-amd64.tar.zst\n"
                                                 f"{digest}  rke2.linux-amd64\n")
    image = upstream_layout(tmp_path, release, "rke2.linux-amd64", "rke2")
    manifest = tmp_path / "hoist.json"
    manifest.write_text(json.dumps({
        "schema": 1, "version": "v1.30.1+rke2r1", "version_scheme": "k3s",
        "components": [{"name": "rke2", "kind": "file", "source": str(image / "opt/rke2"),
                        "destination": "/usr/local/bin/rke2", "sha256sums": str(release / "sha256sum-amd64.txt"),
                        "sha256sums_entry": "rke2.linux-amd64"}]}))
    upgrade(host_root, "--manifest", str(manifest), check=0)
    assert host_read(host_root, "/usr/local/bin/rke2") == (release / "rke2.linux-amd64").read_bytes()


def test_the_entry_is_refused_without_sums_with_a_line_break_and_for_a_directory_payload(tmp_path, host_root):
    release = release_dir(tmp_path)
    image = upstream_layout(tmp_path, release, "k3s", "k3s")
    before = manifest_without(host_root, "run/hoist", "var/lib/hoist")
    result = upgrade(host_root, "--component", "k3s", "--kind", "file", "--source", str(image / "opt/k3s"),
                     "--destination", "/usr/local/bin/k3s", "--version", VERSION, "--version-scheme", "k3s",
                     "--sha256sums-entry", "k3s", check=2)
    assert "sha256sums entry 'k3s' names a line of SHA256SUMS: give --sha256sums too" in result.stderr
    result = upgrade(host_root, *file_args(image / "opt/k3s", release / "sha256sum-amd64.txt",
                                           "--sha256sums-entry", "k3s\nk3s"), check=2)
    assert "sha256sums entry of component 'k3s' must be one line of SHA256SUMS" in result.stderr
    result = upgrade(host_root, "--component", "opt", "--kind", "tree", "--source", str(image / "opt"),
                     "--destination", "/opt/k3s-tree", "--version", "1.0.0", "--sha256sums",
                     str(release / "sha256sum-amd64.txt"), "--sha256sums-entry", "k3s", check=2)
    assert (f"sha256sums entry 'k3s' names the one file of a file or archive payload, and payload '{image}/opt' is "
            "a directory") in result.stderr
    assert manifest_without(host_root, "run/hoist", "var/lib/hoist") == before
    # The same after `hoist stage` staged the directory: the upgrade that switches to it checks the staged copy
    # through its index instead of verifying the payload again, and refuses the entry as well.
    sums = tmp_path / "opt.SHA256SUMS"
    sums.write_text(f"{hashlib.sha256((image / 'opt/k3s').read_bytes()).hexdigest()}  k3s\n")
    tree = ("--component", "opt", "--kind", "tree", "--source", str(image / "opt"), "--destination", "/opt/k3s-tree",
            "--version", "1.0.0", "--sha256sums", str(sums))
    run_hoist("stage", "--host-root", host_root, "--lock-timeout", "5", *tree, check=0)
    staged = tree_manifest(host_root)
    result = upgrade(host_root, *tree, "--sha256sums-entry", "k3s", check=2)
    assert (f"sha256sums entry 'k3s' names the one file of a file or archive payload, and payload '{image}/opt' is "
            "a directory") in result.stderr
    assert not (host_root / "opt/k3s-tree/current").exists()
    assert manifest_without(host_root, "run/hoist", "var/lib/hoist") == \
        {k: v for k, v in staged.items() if not k.startswith(("run/hoist", "var/lib/hoist"))}
