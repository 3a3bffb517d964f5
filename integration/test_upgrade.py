"""`hoist upgrade` of the static binary on scratch host roots: the tree kind
(the k3OS layout), the version gate, verification, dry run, lock, --keep."""

import fcntl
import json
import os
import re
import subprocess
import time

import pytest

from conftest import run_hoist, tree_manifest
from payloads import (make_tree, manifest_without, read_tree, state_of, sums_for_tree, upgrade, write_sha256sums)

V1 = {"bin/app": "app one\n", "lib/common.so": "common bytes\n", "etc/app.conf": "level=1\n"}
V2 = {"bin/app": "app two, longer\n", "lib/common.so": "common bytes\n", "share/new.txt": "new\n"}


@pytest.fixture
def payloads(tmp_path):
    v1 = make_tree(tmp_path / "payloads/v1", V1, 1)
    v2 = make_tree(tmp_path / "payloads/v2", V2, 2)
    # The same unchanged file in both, with the same mtime: it is hard-linked.
    os.utime(v2 / "lib/common.so", ns=(os.stat(v1 / "lib/common.so").st_mtime_ns,) * 2)
    return v1, v2


def tree_args(source, version, *extra):
    return ["--component", "app", "--kind", "tree", "--source", source, "--destination", "/opt/app",
            "--version", version, *extra]


def test_tree_upgrade_v1_to_v2_switches_links_and_links_unchanged_files(host_root, payloads):
    v1, v2 = payloads
    upgrade(host_root, *tree_args(v1, "1.0.0"), check=0)
    app = host_root / "opt/app"
    assert os.readlink(app / "current") == "1.0.0"
    assert read_tree(app / "1.0.0") == read_tree(v1)

    result = upgrade(host_root, *tree_args(v2, "1.1.0"), check=0)
    assert os.readlink(app / "current") == "1.1.0"
    assert os.readlink(app / "previous") == "1.0.0"
    assert read_tree(app / "1.1.0") == read_tree(v2)
    assert read_tree(app / "1.0.0") == read_tree(v1)
    assert os.stat(app / "1.1.0/lib/common.so").st_ino == os.stat(app / "1.0.0/lib/common.so").st_ino
    assert sorted(p.name for p in app.iterdir()) == ["1.0.0", "1.1.0", "current", "previous"]
    for step in ["lock taken:", "gate: app: 1.0.0 -> 1.1.0 (upgrade)", "app: staged 1.1.0 in",
                 "app: switched", "app: kept versions: 1.0.0, 1.1.0"]:
        assert step in result.stderr, step

    state = state_of(host_root, "app")
    assert state["current"] == "1.1.0" and state["previous"] == "1.0.0"
    assert [v["version"] for v in state["versions"]] == ["1.0.0", "1.1.0"]
    assert state["kind"] == "tree" and state["destination"] == "/opt/app"
    assert state["last_result"]["outcome"] == "succeeded" and state["last_result"]["command"] == "upgrade"
    assert state["boot_id"] == "11111111-2222-4333-8444-555555555555"


def test_a_rerun_is_a_no_op_that_exits_0(host_root, payloads):
    v1, _ = payloads
    upgrade(host_root, *tree_args(v1, "1.0.0"), check=0)
    before = manifest_without(host_root, "run/hoist", "var/lib/hoist/app/state.json")
    result = upgrade(host_root, *tree_args(v1, "1.0.0"), check=0)
    assert "app: already at 1.0.0, nothing to do" in result.stderr
    assert manifest_without(host_root, "run/hoist", "var/lib/hoist/app/state.json") == before
    assert state_of(host_root, "app")["last_result"]["outcome"] == "unchanged"


def test_a_broken_current_link_is_repaired_by_a_rerun(host_root, payloads):
    v1, _ = payloads
    upgrade(host_root, *tree_args(v1, "1.0.0"), check=0)
    (host_root / "opt/app/current").unlink()
    result = upgrade(host_root, *tree_args(v1, "1.0.0"), check=0)
    assert "is installed but not intact" in result.stderr
    assert os.readlink(host_root / "opt/app/current") == "1.0.0"


def test_a_downgrade_is_refused_with_exit_3_and_allowed_with_the_flag(host_root, payloads):
    v1, v2 = payloads
    upgrade(host_root, *tree_args(v2, "2.0.0"), check=0)
    before = manifest_without(host_root, "run/hoist", "var/lib/hoist/app/state.json")
    result = upgrade(host_root, *tree_args(v1, "1.0.0"), check=3)
    assert "refusing to downgrade from 2.0.0 to 1.0.0" in result.stderr
    assert manifest_without(host_root, "run/hoist", "var/lib/hoist/app/state.json") == before
    assert state_of(host_root, "app")["last_result"]["outcome"] == "refused"

    upgrade(host_root, *tree_args(v1, "1.0.0", "--allow-downgrade"), check=0)
    assert os.readlink(host_root / "opt/app/current") == "1.0.0"
    assert os.readlink(host_root / "opt/app/previous") == "2.0.0"


def test_versions_that_disagree_exit_2_before_anything(host_root, payloads):
    v1, _ = payloads
    before = tree_manifest(host_root)
    env = {"SYSTEM_UPGRADE_PLAN_LATEST_VERSION": "1.0.1"}
    result = upgrade(host_root, *tree_args(v1, "1.0.0"), env=env, check=2)
    assert "versions disagree for component 'app': '1.0.0' from --version but '1.0.1' from " \
           "SYSTEM_UPGRADE_PLAN_LATEST_VERSION" in result.stderr
    assert tree_manifest(host_root) == before


def test_the_version_defaults_to_the_munged_suc_env(host_root, payloads):
    v1, _ = payloads
    env = {"SYSTEM_UPGRADE_PLAN_LATEST_VERSION": "v1.30.1-k3s1", "SYSTEM_UPGRADE_PLAN_NAME": "k3s-server"}
    upgrade(host_root, "--component", "app", "--kind", "tree", "--source", v1, "--destination", "/opt/app",
            "--version-scheme", "k3s", env=env, check=0)
    assert os.readlink(host_root / "opt/app/current") == "v1.30.1+k3s1"
    # The tag's spelling agrees with the munged env too.
    upgrade(host_root, "--component", "app", "--kind", "tree", "--source", v1, "--destination", "/opt/app",
            "--version-scheme", "k3s", "--version", "v1.30.1+k3s1", env=env, check=0)


@pytest.mark.parametrize("released, fix", [("v1.19.3+k3s1", "v1.19.3-rc1+k3s2"),
                                          ("v1.19.3-k3s1", "v1.19.3-rc1-k3s2"),
                                          ("v1.18.12+rke2r1", "v1.18.12-rc1+rke2r2")])
def test_an_rc_of_the_next_k3s_counter_upgrades_the_release_it_fixes(host_root, payloads, released, fix):
    # k3s cuts v1.19.3-rc1+k3s2 after v1.19.3+k3s1 when that release needs a fix: the counter outranks the rc.
    v1, v2 = payloads
    upgrade(host_root, *tree_args(v1, released, "--version-scheme", "k3s"), check=0)
    upgrade(host_root, *tree_args(v2, fix, "--version-scheme", "k3s"), check=0)
    canonical_fix = fix.replace("-k3s", "+k3s")
    assert os.readlink(host_root / "opt/app/current") == canonical_fix
    assert read_tree(host_root / "opt/app" / canonical_fix) == read_tree(v2)


def test_a_k3s_release_does_not_go_back_to_an_rc_of_the_next_counter(host_root, payloads):
    v1, v2 = payloads
    upgrade(host_root, *tree_args(v2, "v1.19.3-rc1+k3s2", "--version-scheme", "k3s"), check=0)
    before = manifest_without(host_root, "run/hoist", "var/lib/hoist/app/state.json")
    result = upgrade(host_root, *tree_args(v1, "v1.19.3+k3s1", "--version-scheme", "k3s"), check=3)
    assert "refusing to downgrade from v1.19.3-rc1+k3s2 to v1.19.3+k3s1" in result.stderr
    assert manifest_without(host_root, "run/hoist", "var/lib/hoist/app/state.json") == before


def test_bad_usage_exits_2(host_root, payloads):
    v1, _ = payloads
    assert "upgrade needs --kind, --source, --destination (or --manifest)" in \
        upgrade(host_root, "--component", "app", check=2).stderr
    assert "invalid kind 'squashfs': expected tree, file, sysext or sync" in upgrade(
        host_root, "--component", "app", "--kind", "squashfs", "--source", v1, "--destination", "/opt/app",
        "--version", "1.0.0", check=2).stderr
    assert "no version for component 'app'" in upgrade(
        host_root, "--component", "app", "--kind", "tree", "--source", v1, "--destination", "/opt/app", check=2).stderr
    assert "must be an absolute host path" in upgrade(
        host_root, "--component", "app", "--kind", "tree", "--source", v1, "--destination", "opt", "--version", "1.0.0",
        check=2).stderr
    assert "--keep" in run_hoist("upgrade", "--keep", "0", check=2).stderr
    assert "the file kind needs a file as its source" in upgrade(
        host_root, "--component", "f", "--kind", "file", "--source", v1, "--destination", "/usr/bin/f",
        "--version", "1.0.0", check=2).stderr
    assert not (host_root / "run/hoist").exists()


def test_a_checksum_mismatch_exits_5_naming_the_file_and_leaves_the_host_untouched(host_root, payloads, tmp_path):
    v1, v2 = payloads
    upgrade(host_root, *tree_args(v1, "1.0.0"), check=0)
    sums = sums_for_tree(v2, tmp_path / "SHA256SUMS")
    (v2 / "bin/app").write_text("tampered after signing\n")
    before = manifest_without(host_root, "run/hoist", "var/lib/hoist/app/state.json")
    result = upgrade(host_root, *tree_args(v2, "1.1.0", "--sha256sums", sums), check=5)
    assert "checksum mismatch for 'bin/app'" in result.stderr
    assert manifest_without(host_root, "run/hoist", "var/lib/hoist/app/state.json") == before
    last = state_of(host_root, "app")["last_result"]
    assert last["outcome"] == "failed" and "checksum mismatch for 'bin/app'" in last["message"]


def test_an_unlisted_payload_file_fails_verification_on_a_fresh_host(host_root, payloads, tmp_path):
    _, v2 = payloads
    sums = write_sha256sums(tmp_path / "SHA256SUMS", {"bin/app": v2 / "bin/app"})
    before = tree_manifest(host_root)
    result = upgrade(host_root, *tree_args(v2, "1.1.0", "--sha256sums", sums), check=5)
    assert "SHA256SUMS" in result.stderr
    # A refused first install leaves nothing but the lock file (in /run, a tmpfs on a real host).
    assert manifest_without(host_root, "run/hoist") == before


def test_a_verified_payload_installs(host_root, payloads, tmp_path):
    _, v2 = payloads
    sums = sums_for_tree(v2, tmp_path / "SHA256SUMS")
    result = upgrade(host_root, *tree_args(v2, "1.1.0", "--sha256sums", sums), check=0)
    assert f"app: verified {v2} against {sums}" in result.stderr


def test_sums_inside_the_payload_are_no_payload_file_however_they_are_named(host_root, payloads, tmp_path):
    """SHA256SUMS and its signature shipped inside the payload do not list themselves; they are told apart from
    payload files by what they are, also when the option names them through a symlink of another name."""
    _, v2 = payloads
    sums_for_tree(v2, tmp_path / "sums.txt")
    (tmp_path / "sums.txt").rename(v2 / "SHA256SUMS")
    (tmp_path / "release-sums").symlink_to(v2 / "SHA256SUMS")
    result = upgrade(host_root, *tree_args(v2, "1.1.0", "--sha256sums", tmp_path / "release-sums"), check=0)
    assert f"app: verified {v2} against {tmp_path / 'release-sums'}" in result.stderr
    installed = read_tree(host_root / "opt/app/1.1.0")
    assert installed["SHA256SUMS"] == (v2 / "SHA256SUMS").read_bytes()
    # A file of the sums' name that is not the sums file is a payload file, and unlisted it is refused.
    (v2 / "sub").mkdir()
    (v2 / "sub/SHA256SUMS").write_text("not the sums\n")
    result = upgrade(host_root, *tree_args(v2, "1.2.0", "--sha256sums", tmp_path / "release-sums"), check=5)
    assert "'sub/SHA256SUMS'" in result.stderr
    assert state_of(host_root, "app")["current"] == "1.1.0"


def test_dry_run_prints_the_changes_and_changes_nothing(host_root, payloads):
    v1, v2 = payloads
    upgrade(host_root, *tree_args(v1, "1.0.0"), check=0)
    before = tree_manifest(host_root)
    (host_root / "run/hoist/hoist.lock").unlink()
    (host_root / "run/hoist").rmdir()
    before_no_lock = tree_manifest(host_root)
    result = upgrade(host_root, *tree_args(v2, "1.1.0", "--dry-run"), check=0)
    assert tree_manifest(host_root) == before_no_lock
    assert before != before_no_lock
    out = result.stdout
    assert "app (tree at /opt/app): app: 1.0.0 -> 1.1.0 (upgrade)" in out
    assert "dry run: nothing was changed" in out
    # The numbers are the real run's: the same upgrade, made for real, logs what it staged.
    preview = {kind: (int(files), size) for kind, files, size in
               re.findall(r"^  (add|change|remove): +(\d+) files  (.+)$", out, re.MULTILINE)}
    unchanged = int(re.search(r"^  unchanged: +(\d+) files$", out, re.MULTILINE).group(1))
    real = upgrade(host_root, *tree_args(v2, "1.1.0"), check=0).stderr
    staged = re.search(r"staged 1\.1\.0 in [\d.]+ s: (\d+) added \((.+?)\), (\d+) changed \((.+?)\), "
                       r"(\d+) removed \((.+?)\), (\d+) unchanged", real)
    assert staged, real
    added, added_size, changed, changed_size, removed, removed_size, kept = staged.groups()
    assert preview == {"add": (int(added), added_size), "change": (int(changed), changed_size),
                       "remove": (int(removed), removed_size)}, (out, real)
    assert unchanged == int(kept)
    assert preview["add"][0] + preview["change"][0] + preview["remove"][0] > 0


def test_keep_removes_the_oldest_versions_never_current_or_previous(host_root, tmp_path):
    for i in range(1, 6):
        tree = make_tree(tmp_path / f"p{i}", {"v": f"version {i}\n"}, i)
        upgrade(host_root, *tree_args(tree, f"1.{i}.0", "--keep", "3"), check=0)
    app = host_root / "opt/app"
    assert sorted(p.name for p in app.iterdir()) == ["1.3.0", "1.4.0", "1.5.0", "current", "previous"]
    assert [v["version"] for v in state_of(host_root, "app")["versions"]] == ["1.3.0", "1.4.0", "1.5.0"]
    tree = make_tree(tmp_path / "p6", {"v": "version 6\n"}, 6)
    result = upgrade(host_root, *tree_args(tree, "1.6.0", "--keep", "1"), check=0)
    assert "app: removed version 1.3.0 (--keep 1)" in result.stderr
    assert sorted(p.name for p in app.iterdir()) == ["1.5.0", "1.6.0", "current", "previous"]


def test_a_held_lock_exits_4_naming_the_lock_file(host_root, payloads):
    v1, _ = payloads
    lock = host_root / "run/hoist/hoist.lock"
    lock.parent.mkdir(parents=True)
    holder = subprocess.Popen(["flock", str(lock), "-c", "sleep 30"])
    try:
        deadline = time.time() + 5
        while time.time() < deadline:
            with open(lock, "a") as f:
                try:
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    fcntl.flock(f, fcntl.LOCK_UN)
                    time.sleep(0.05)
                except BlockingIOError:
                    break
        result = run_hoist("upgrade", "--host-root", host_root, "--lock-timeout", "0.5", *tree_args(v1, "1.0.0"),
                           check=4)
        assert f"failed to lock '{lock}': still held" in result.stderr
        assert not (host_root / "opt").exists()
    finally:
        holder.kill()
        holder.wait()


def test_host_paths_go_through_the_hosts_own_symlinks(host_root, payloads):
    v1, _ = payloads
    # /var/run -> /run on the host: the lock must land in the host's /run, and a
    # destination under a host symlink resolves inside the root.
    (host_root / "data/opt").mkdir(parents=True)
    (host_root / "opt").symlink_to("/data/opt")
    upgrade(host_root, "--lock-file", "/var/run/hoist/hoist.lock", *tree_args(v1, "1.0.0"), check=0)
    assert (host_root / "run/hoist/hoist.lock").is_file()
    assert os.readlink(host_root / "data/opt/app/current") == "1.0.0"


def test_status_shows_the_upgrade(host_root, payloads):
    v1, v2 = payloads
    upgrade(host_root, *tree_args(v1, "1.0.0"), check=0)
    upgrade(host_root, *tree_args(v2, "1.1.0"), check=0)
    data = json.loads(run_hoist("status", "--json", "--host-root", host_root, check=0).stdout)
    assert [(c["component"], c["current"], c["previous"]) for c in data["components"]] == [("app", "1.1.0", "1.0.0")]


@pytest.mark.parametrize("first, then", [("/opt/app/", "/opt/app"), ("//opt//app", "/opt/app/"),
                                         ("/opt/app", "/opt//app//")])
def test_one_destination_spelled_two_ways_is_one_destination(host_root, payloads, first, then):
    v1, v2 = payloads
    upgrade(host_root, "--component", "app", "--kind", "tree", "--source", v1, "--destination", first,
            "--version", "1.0.0", check=0)
    upgrade(host_root, "--component", "app", "--kind", "tree", "--source", v2, "--destination", then,
            "--version", "2.0.0", check=0)
    assert os.readlink(host_root / "opt/app/current") == "2.0.0"
