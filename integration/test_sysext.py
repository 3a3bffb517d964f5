"""The sysext kind: systemd-sysext images (squashfs and erofs made with
Debian's squashfs-tools and erofs-utils, and plain directories) kept under the
state directory, /etc/extensions/<name>.raw switched to them atomically, their
extension-release checked against the host's os-release the way
systemd-sysext checks it, and systemd-sysext refreshed over D-Bus
(ReloadOrRestartUnit on the test's systemd double)."""

import os
import shutil
import subprocess

import pytest

from dbus_harness import system_bus  # noqa: F401 (a fixture)
from conftest import run_hoist, tree_manifest
from payloads import state_of, upgrade

STATE = "var/lib/hoist/tools"
LINK = "etc/extensions/tools.raw"


def extension_tree(root, release, name="tools", tool="tool v1\n"):
    (root / "usr/lib/extension-release.d").mkdir(parents=True, exist_ok=True)
    (root / f"usr/lib/extension-release.d/extension-release.{name}").write_text(release)
    (root / "usr/bin").mkdir(parents=True, exist_ok=True)
    (root / "usr/bin/tool").write_text(tool)
    return root


def squashfs(tmp_path, name, release, tool="tool v1\n"):
    if not shutil.which("mksquashfs"):
        pytest.skip("needs mksquashfs (squashfs-tools)")
    tree = extension_tree(tmp_path / f"{name}.tree", release, tool=tool)
    image = tmp_path / f"{name}.raw"
    subprocess.run(["mksquashfs", str(tree), str(image), "-quiet", "-noappend", "-all-root"], check=True,
                   capture_output=True)
    return image


def erofs(tmp_path, name, release):
    if not shutil.which("mkfs.erofs"):
        pytest.skip("needs mkfs.erofs (erofs-utils)")
    tree = extension_tree(tmp_path / f"{name}.tree", release)
    image = tmp_path / f"{name}.raw"
    subprocess.run(["mkfs.erofs", str(image), str(tree)], check=True, capture_output=True)
    return image


def needs_loop():
    if os.geteuid() != 0 or not os.path.exists("/dev/loop-control"):
        pytest.skip("reading an image needs root and /dev/loop-control")


def sysext_args(source, version, destination="/etc/extensions/tools.raw", *extra):
    return ["--component", "tools", "--kind", "sysext", "--source", source, "--destination", destination,
            "--version", version, "--version-scheme", "systemd", *extra]


MATCH = "ID=debian\nVERSION_ID=12\n"


@pytest.mark.parametrize("make", [squashfs, erofs])
def test_an_image_is_kept_under_the_state_dir_linked_and_sysext_refreshed(host_root, tmp_path, system_bus, make):
    needs_loop()
    systemd = system_bus.start("systemd_manager")
    image = make(tmp_path, "v1", MATCH)
    result = upgrade(host_root, *sysext_args(image, "1.0"), check=0)
    assert os.readlink(host_root / LINK) == "/var/lib/hoist/tools/tools-1.0.raw"
    assert (host_root / STATE / "tools-1.0.raw").read_bytes() == image.read_bytes()
    assert "tools: the extension-release of" in result.stderr
    assert systemd.called("ReloadOrRestartUnit") == ['ReloadOrRestartUnit "systemd-sysext.service" "replace"']
    assert "systemd-sysext.service: restarted (done)" in result.stderr
    state = state_of(host_root, "tools")
    assert state["kind"] == "sysext" and state["current"] == "1.0"
    # Same version again: nothing to do, no refresh.
    upgrade(host_root, *sysext_args(image, "1.0"), check=0)
    assert len(systemd.called("ReloadOrRestartUnit")) == 1


def test_an_image_is_read_where_dev_has_no_node_for_the_free_loop_device(host_root, tmp_path, system_bus):
    # A container's /dev is filled when it starts; the kernel adds a loop device when every one is taken (as on
    # hosts whose snaps hold them), and hoist's pod then has no node for it. Here /dev is a tmpfs holding only
    # loop-control and null, in a private mount namespace: no /dev/loopN exists at all.
    needs_loop()
    system_bus.start("systemd_manager")
    image = squashfs(tmp_path, "v1", MATCH)
    listing = tmp_path / "dev-after"
    script = ("mount -t tmpfs -o mode=0755 hoist-test-dev /dev && mknod -m 0600 /dev/loop-control c 10 237 && "
              'mknod -m 0666 /dev/null c 1 3 && "$@"; status=$?; ls -A /dev > "$0"; exit $status')
    run_hoist("upgrade", "--host-root", host_root, "--lock-timeout", "5", *sysext_args(image, "1.0"), check=0,
              wrapper=["unshare", "--mount", "--propagation", "private", "sh", "-c", script, listing])
    assert os.readlink(host_root / LINK) == "/var/lib/hoist/tools/tools-1.0.raw"
    assert (host_root / STATE / "tools-1.0.raw").read_bytes() == image.read_bytes()
    assert listing.read_text().split() == ["loop-control", "null"]  # the node hoist made is gone


def test_the_kept_image_has_the_payload_s_owner_mode_mtime_and_xattrs(host_root, tmp_path, system_bus):
    needs_loop()
    system_bus.start("systemd_manager")
    image = squashfs(tmp_path, "v1", MATCH)
    os.chown(image, 0, 0)
    os.chmod(image, 0o444)
    os.setxattr(image, "user.origin", b"release-pipeline")
    os.setxattr(image, "trusted.hoist", b"\x00\x01")
    os.utime(image, ns=(1_600_000_000_123_456_789, 1_600_000_000_123_456_789))
    upgrade(host_root, *sysext_args(image, "1.0"), check=0)
    kept = host_root / STATE / "tools-1.0.raw"
    st, source = os.lstat(kept), os.lstat(image)
    assert (oct(st.st_mode), st.st_uid, st.st_mtime_ns) == (oct(source.st_mode), source.st_uid, source.st_mtime_ns)
    assert {n: os.getxattr(kept, n) for n in os.listxattr(kept)} == \
        {n: os.getxattr(image, n) for n in os.listxattr(image)}


@pytest.mark.parametrize("destination", ["/opt/whatever/tools.raw", "/etc/extensions/sub/tools.raw",
                                         "/etc/extension/tools.raw", "/usr/share/extensions/tools.raw"])
def test_a_destination_systemd_sysext_never_reads_is_refused(host_root, tmp_path, system_bus, destination):
    # Installed, linked and "refreshed", such an image was never merged: the run said success for nothing.
    needs_loop()
    system_bus.start("systemd_manager")
    image = squashfs(tmp_path, "v1", MATCH)
    before = tree_manifest(host_root)
    result = upgrade(host_root, *sysext_args(image, "1.0", destination), check=2)
    assert f"destination '{destination}' of component 'tools' is not directly in a directory systemd-sysext " \
           "reads (/etc/extensions, /run/extensions, /var/lib/extensions, /usr/lib/extensions, " \
           "/usr/local/lib/extensions): it would never be merged" in result.stderr
    assert tree_manifest(host_root) == before


def test_upgrade_then_rollback_re_points_the_link_and_refreshes_each_time(host_root, tmp_path, system_bus):
    needs_loop()
    systemd = system_bus.start("systemd_manager")
    v1 = squashfs(tmp_path, "v1", MATCH)
    v2 = squashfs(tmp_path, "v2", MATCH, tool="tool v2\n")
    upgrade(host_root, *sysext_args(v1, "1.0"), check=0)
    upgrade(host_root, *sysext_args(v2, "1.1"), check=0)
    assert os.readlink(host_root / LINK) == "/var/lib/hoist/tools/tools-1.1.raw"
    assert sorted(os.listdir(host_root / STATE)) == ["state.json", "tools-1.0.raw", "tools-1.1.raw"]
    run_hoist("--host-root", host_root, "rollback", "--component", "tools", check=0)
    assert os.readlink(host_root / LINK) == "/var/lib/hoist/tools/tools-1.0.raw"
    assert len(systemd.called("ReloadOrRestartUnit")) == 3
    assert state_of(host_root, "tools")["current"] == "1.0"


def test_a_directory_extension_is_linked_without_raw(host_root, tmp_path, system_bus):
    systemd = system_bus.start("systemd_manager")
    tree = extension_tree(tmp_path / "tree", MATCH)
    upgrade(host_root, *sysext_args(tree, "1.0", "/etc/extensions/tools"), check=0)
    assert os.readlink(host_root / "etc/extensions/tools") == "/var/lib/hoist/tools/tools-1.0"
    assert (host_root / STATE / "tools-1.0/usr/bin/tool").read_text() == "tool v1\n"
    assert systemd.called("ReloadOrRestartUnit")


@pytest.mark.parametrize("release, field", [
    ("ID=fedora\nVERSION_ID=12\n", "ID is 'fedora', the host's ID is 'debian'"),
    ("ID=debian\nVERSION_ID=11\n", "VERSION_ID is '11', the host's VERSION_ID is '12'"),
    ("ID=debian\nVERSION_ID=12\nARCHITECTURE=s390x\n", "ARCHITECTURE is 's390x', the host's architecture is"),
    # A value from the image is quoted escaped: no terminal escape reaches the log.
    ("ID=fe\x1b[31mdora\nVERSION_ID=12\n", "ID is 'fe\\x1b[31mdora', the host's ID is 'debian'"),
])
def test_a_mismatched_extension_release_exits_5_naming_the_field(host_root, tmp_path, release, field):
    needs_loop()
    image = squashfs(tmp_path, "bad", release)
    result = upgrade(host_root, *sysext_args(image, "1.0"), check=5)
    assert f"extension 'tools' does not match the host ({image}:usr/lib/extension-release.d/" \
           f"extension-release.tools): {field}" in result.stderr
    assert not (host_root / LINK).exists() and not os.path.lexists(host_root / LINK)
    assert not (host_root / STATE).exists()


def test_an_image_without_its_release_file_exits_5(host_root, tmp_path):
    needs_loop()
    if not shutil.which("mksquashfs"):
        pytest.skip("needs mksquashfs")
    tree = tmp_path / "tree"
    (tree / "usr/bin").mkdir(parents=True)
    (tree / "usr/bin/tool").write_text("x\n")
    image = tmp_path / "norelease.raw"
    subprocess.run(["mksquashfs", str(tree), str(image), "-quiet", "-noappend"], check=True, capture_output=True)
    result = upgrade(host_root, *sysext_args(image, "1.0"), check=5)
    assert f"sysext image '{image}' has no 'usr/lib/extension-release.d/extension-release.tools'" in result.stderr


def test_the_destination_must_fit_the_payload(host_root, tmp_path):
    tree = extension_tree(tmp_path / "tree", MATCH)
    result = upgrade(host_root, *sysext_args(tree, "1.0"), check=2)
    assert "ends in .raw, but the sysext payload is a directory" in result.stderr
    (tmp_path / "plain.raw").write_text("not an image\n")
    result = upgrade(host_root, *sysext_args(tmp_path / "plain.raw", "1.0"), check=2)
    assert "is neither a directory nor a squashfs or erofs image" in result.stderr


def test_a_failed_refresh_fails_the_run_after_the_switch(host_root, tmp_path, system_bus):
    system_bus.start("systemd_manager", results={"systemd-sysext.service": "failed"})
    tree = extension_tree(tmp_path / "tree", MATCH)
    result = upgrade(host_root, *sysext_args(tree, "1.0", "/etc/extensions/tools"), check=1)
    assert "failed to restart systemd-sysext.service: the job's result is 'failed'" in result.stderr
    assert state_of(host_root, "tools")["last_result"]["outcome"] == "failed"


def test_a_renamed_release_file_allowed_by_its_xattr_is_checked_and_named(host_root, tmp_path):
    # systemd-sysext takes extension-release.<other> when the image was renamed and the file's
    # user.extension-release.strict is false; a mismatch names the file that was read.
    tree = tmp_path / "tree"
    release = tree / "usr/lib/extension-release.d/extension-release.other"
    release.parent.mkdir(parents=True)
    release.write_text("ID=fedora\nVERSION_ID=12\n")
    os.setxattr(release, "user.extension-release.strict", b"0")
    before = tree_manifest(host_root)
    result = upgrade(host_root, *sysext_args(tree, "1.0", "/etc/extensions/tools", "--dry-run"), check=5)
    assert f"extension 'tools' does not match the host ({tree}:usr/lib/extension-release.d/" \
           "extension-release.other): ID is 'fedora', the host's ID is 'debian'" in result.stderr
    assert tree_manifest(host_root) == before
