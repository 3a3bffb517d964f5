"""SELinux labels of the file kind's kept copies. The k3s installer labels /usr/local/bin/k3s
container_runtime_exec_t; hoist's copies live under /var/lib/hoist, whose label a confined runtime may not
execute, so each copy takes the label of the file the first switch replaced (recorded in the state), unless
the payload carries its own. No SELinux kernel is needed: the filesystem stores security.selinux as it is
written (root only, on a filesystem that keeps security xattrs: ext4, not tmpfs)."""

import os

import pytest

from payloads import state_of, upgrade

K3S_LABEL = b"system_u:object_r:container_runtime_exec_t:s0\0"
BIN_LABEL = b"system_u:object_r:bin_t:s0\0"


def label(path):
    try:
        return os.getxattr(path, "security.selinux", follow_symlinks=False)
    except OSError:
        return None


@pytest.fixture
def labelled_host(host_root):
    k3s = host_root / "usr/local/bin/k3s"
    k3s.parent.mkdir(parents=True)
    k3s.write_bytes(b"k3s from get.k3s.io\n")
    k3s.chmod(0o755)
    try:
        os.setxattr(k3s, "security.selinux", K3S_LABEL)
    except OSError as e:
        pytest.skip(f"cannot set security.selinux here (needs root and a filesystem that keeps it): {e}")
    return host_root


def binary(tmp_path, version, own_label=None):
    path = tmp_path / f"payload-{version}/k3s"
    path.parent.mkdir()
    path.write_bytes(b"\x7fELF k3s " + version.encode() + b"\n")
    path.chmod(0o755)
    if own_label:
        os.setxattr(path, "security.selinux", own_label)
    return path


def file_args(source, version):
    return ["--component", "k3s", "--kind", "file", "--source", source, "--destination", "/usr/local/bin/k3s",
            "--version-scheme", "k3s", "--version", version]


def test_the_kept_copies_take_the_label_of_the_file_the_first_switch_replaced(labelled_host, tmp_path):
    host = labelled_host
    result = upgrade(host, *file_args(binary(tmp_path, "v1.30.1+k3s1"), "v1.30.1+k3s1"), check=0)
    assert os.readlink(host / "usr/local/bin/k3s") == "/var/lib/hoist/k3s/v1.30.1+k3s1/k3s"
    assert label(host / "var/lib/hoist/k3s/v1.30.1+k3s1/k3s") == K3S_LABEL
    assert ("k3s: the copies under /var/lib/hoist/k3s take the SELinux label "
            "system_u:object_r:container_runtime_exec_t:s0 of ") in result.stderr
    assert label(host / "var/lib/hoist/k3s/pre-hoist/k3s") == K3S_LABEL
    assert state_of(host, "k3s")["selinux_label"] == "system_u:object_r:container_runtime_exec_t:s0"

    # The destination is hoist's link now: the label comes from the state.
    upgrade(host, *file_args(binary(tmp_path, "v1.30.2+k3s1"), "v1.30.2+k3s1"), check=0)
    assert label(host / "var/lib/hoist/k3s/v1.30.2+k3s1/k3s") == K3S_LABEL
    assert state_of(host, "k3s")["selinux_label"] == "system_u:object_r:container_runtime_exec_t:s0"


def test_a_payload_with_a_label_of_its_own_keeps_it(labelled_host, tmp_path):
    host = labelled_host
    upgrade(host, *file_args(binary(tmp_path, "v1.30.1+k3s1", BIN_LABEL), "v1.30.1+k3s1"), check=0)
    assert label(host / "var/lib/hoist/k3s/v1.30.1+k3s1/k3s") == BIN_LABEL
    # The replaced file's label is still recorded, for the payloads that carry none.
    assert state_of(host, "k3s")["selinux_label"] == "system_u:object_r:container_runtime_exec_t:s0"
    upgrade(host, *file_args(binary(tmp_path, "v1.30.2+k3s1"), "v1.30.2+k3s1"), check=0)
    assert label(host / "var/lib/hoist/k3s/v1.30.2+k3s1/k3s") == K3S_LABEL


def test_a_file_without_a_label_records_none(host_root, tmp_path):
    k3s = host_root / "usr/local/bin/k3s"
    k3s.parent.mkdir(parents=True)
    k3s.write_bytes(b"k3s from get.k3s.io\n")
    upgrade(host_root, *file_args(binary(tmp_path, "v1.30.1+k3s1"), "v1.30.1+k3s1"), check=0)
    assert label(host_root / "var/lib/hoist/k3s/v1.30.1+k3s1/k3s") is None
    assert "selinux_label" not in state_of(host_root, "k3s")
