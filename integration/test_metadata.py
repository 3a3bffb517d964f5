"""Every kind of metadata, through the static binary: a tree upgrade, a sync and a tar.zst payload of one source
tree, each checked against that tree entry by entry (type; mode with setuid, setgid and sticky bits; numeric
owner; nanosecond mtime, symlinks' too; bytes; device numbers; every xattr: user, trusted, security.capability,
security.selinux, and the POSIX ACLs, access and default, which are the system.posix_acl_* xattrs; hard-link
groups), and with `rsync -n -i -aHAX --numeric-ids`, which must find nothing to do. The unit tests check the same
on the engine; these check what the binary a Plan runs does. They need root (chown, mknod, trusted.* and
security.* xattrs): elsewhere they skip, saying so."""

import io
import os
import shutil
import stat
import struct
import subprocess
import tarfile
from pathlib import Path

import pytest

from payloads import manifest_without, upgrade

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: chown, mknod, trusted.* and security.* xattrs")

# VFS_CAP_REVISION_2 with CAP_NET_BIND_SERVICE (10) permitted and effective.
CAPABILITY = struct.pack("<IIIII", 0x02000001, 1 << 10, 0, 0, 0)
SELINUX = b"system_u:object_r:bin_t:s0\0"


def need(tool):
    path = shutil.which(tool)
    if path is None:
        pytest.skip(f"{tool} is not installed")
    return path


def make_source(root):
    """A tree with every kind of entry and metadata that rsync -aHAX keeps."""
    root.mkdir()
    for d in ("bin", "etc", "shared", "sgid", "dev", "run", "hard"):
        (root / d).mkdir()
    tool = root / "bin/tool"
    tool.write_bytes(b"\x7fELF not really\n" * 100)
    os.chown(tool, 0, 0)
    os.chmod(tool, 0o4755)
    os.setxattr(tool, "security.capability", CAPABILITY)  # after the chown, which would drop it
    os.setxattr(tool, "security.selinux", SELINUX)
    os.link(tool, root / "hard/tool-alias")
    setgid = root / "bin/setgid"
    setgid.write_text("group tool\n")
    os.chown(setgid, 1234, 5678)
    os.chmod(setgid, 0o2751)
    conf = root / "etc/conf"
    conf.write_text("key = value\n")
    os.chown(conf, 0, 42)
    os.chmod(conf, 0o640)
    os.setxattr(conf, "user.note", b"hello")
    os.setxattr(conf, "trusted.hoist", b"\x00\x01binary\xff")
    os.setxattr(conf, "security.selinux", b"system_u:object_r:etc_t:s0\0")
    acl = root / "etc/acl"
    acl.write_text("with an access ACL\n")
    subprocess.run([need("setfacl"), "-m", "u:1000:rw,g:2000:r,m::rw", str(acl)], check=True)
    os.chmod(root / "shared", 0o1777)
    subprocess.run([need("setfacl"), "-d", "-m", "u:1000:rwx,g::rx,o::-", str(root / "shared")], check=True)
    os.chown(root / "sgid", 0, 5678)
    os.chmod(root / "sgid", 0o2775)
    os.setxattr(root / "sgid", "user.dir", b"a directory's xattr")
    (root / "sgid/empty").write_bytes(b"")
    os.chmod(root / "sgid/empty", 0)
    os.symlink("etc/conf", root / "link")
    os.chown(root / "link", 1234, 5678, follow_symlinks=False)
    os.symlink("/nonexistent/target", root / "dangling")
    os.mkfifo(root / "run/fifo", 0o620)
    os.mknod(root / "dev/null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
    os.mknod(root / "dev/loop", stat.S_IFBLK | 0o660, os.makedev(7, 0))
    os.chown(root / "dev/loop", 0, 6)
    # Nanosecond mtimes last, children before their directories (whose mtimes their entries change).
    entries = sorted(root.rglob("*"), key=lambda p: len(p.parts), reverse=True) + [root]
    for i, path in enumerate(entries):
        ns = 1_600_000_000_123_456_789 + i * 1_000_000_007
        os.utime(path, ns=(ns, ns), follow_symlinks=False)
    return root


def describe(root):
    """relpath -> everything rsync -aHAX keeps of the entry; plus the hard-link groups."""
    entries = {}
    inodes = {}
    for path in [root, *root.rglob("*")]:
        rel = str(path.relative_to(root))
        st = os.lstat(path)
        xattrs = {name: os.getxattr(path, name, follow_symlinks=False)
                  for name in os.listxattr(path, follow_symlinks=False)}
        entry = {"mode": oct(st.st_mode), "uid": st.st_uid, "gid": st.st_gid, "xattrs": xattrs}
        if rel != ".":
            entry["mtime_ns"] = st.st_mtime_ns  # the root's is the version directory's own (tree kind)
        if stat.S_ISREG(st.st_mode):
            entry["bytes"] = path.read_bytes()
            inodes.setdefault(st.st_ino, []).append(rel)
        elif stat.S_ISLNK(st.st_mode):
            entry["target"] = os.readlink(path)
        elif stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
            entry["rdev"] = (os.major(st.st_rdev), os.minor(st.st_rdev))
        entries[rel] = entry
    links = sorted(sorted(group) for group in inodes.values() if len(group) > 1)
    return entries, links


def rsync_differences(source, installed):
    """What `rsync -n -i -aHAX --numeric-ids` would still change: nothing when the install is exact."""
    result = subprocess.run([need("rsync"), "-n", "-i", "-aHAX", "--numeric-ids", "--delete", f"{source}/",
                             f"{installed}/"], capture_output=True, text=True, check=True)
    # The top directory's own line (".d..t......") is about the version directory's mtime: not compared.
    return [line for line in result.stdout.splitlines() if not line.endswith(" ./")]


@pytest.fixture
def source(tmp_path):
    source = make_source(tmp_path / "source")
    expected = describe(source)
    # Sanity: the source holds what the test means to check.
    entries, links = expected
    assert entries["bin/tool"]["xattrs"]["security.capability"] == CAPABILITY
    assert "system.posix_acl_access" in entries["etc/acl"]["xattrs"]
    assert "system.posix_acl_default" in entries["shared"]["xattrs"]
    assert links == [["bin/tool", "hard/tool-alias"]]
    return source


def check_exact(source, installed):
    expected_entries, expected_links = describe(source)
    entries, links = describe(installed)
    assert sorted(entries) == sorted(expected_entries)
    for rel, entry in expected_entries.items():
        assert entries[rel] == entry, rel
    assert links == expected_links
    assert rsync_differences(source, installed) == []


def test_a_tree_upgrade_keeps_every_kind_of_metadata(host_root, source):
    upgrade(host_root, "--component", "app", "--kind", "tree", "--source", source, "--destination", "/opt/app",
            "--version", "1.0.0", check=0)
    check_exact(source, host_root / "opt/app/1.0.0")


def test_a_staged_upgrade_hard_links_unchanged_files_with_their_metadata(host_root, source, tmp_path):
    upgrade(host_root, "--component", "app", "--kind", "tree", "--source", source, "--destination", "/opt/app",
            "--version", "1.0.0", check=0)
    upgrade(host_root, "--component", "app", "--kind", "tree", "--source", source, "--destination", "/opt/app",
            "--version", "2.0.0", check=0)
    app = host_root / "opt/app"
    check_exact(source, app / "2.0.0")
    # Unchanged regular files are the old version's inodes (link_dest), metadata and all.
    assert os.lstat(app / "2.0.0/etc/conf").st_ino == os.lstat(app / "1.0.0/etc/conf").st_ino


def test_a_sync_keeps_every_kind_of_metadata(host_root, source):
    (host_root / "etc/app").mkdir(parents=True)
    (host_root / "etc/app/stale").write_text("removed by the sync\n")
    upgrade(host_root, "--component", "conf", "--kind", "sync", "--source", source, "--destination", "/etc/app",
            "--version", "1.0.0", check=0)
    check_exact(source, host_root / "etc/app")


def test_a_tar_zst_payload_keeps_every_kind_of_metadata(host_root, source, tmp_path):
    archive = tmp_path / "payload.tar.zst"
    subprocess.run([need("tar"), "--zstd", "--format=posix", "--xattrs", "--xattrs-include=*", "--acls",
                    "--selinux", "--numeric-owner", "-cf", str(archive), "-C", str(source), "."], check=True)
    upgrade(host_root, "--component", "app", "--kind", "tree", "--source", archive, "--destination", "/opt/app",
            "--version", "1.0.0", check=0)
    check_exact(source, host_root / "opt/app/1.0.0")


def file_metadata(path):
    st = os.lstat(path)
    xattrs = {name: os.getxattr(path, name, follow_symlinks=False) for name in os.listxattr(path, follow_symlinks=False)}
    return {"mode": oct(st.st_mode), "uid": st.st_uid, "gid": st.st_gid, "mtime_ns": st.st_mtime_ns, "xattrs": xattrs,
            "bytes": path.read_bytes()}


def test_a_file_upgrade_keeps_the_file_s_capability_acl_and_label(host_root, source):
    # A binary with setuid, security.capability and a SELinux label, and a config file with an access ACL and
    # user/trusted xattrs: the kept copy that the host's link names is the payload's file, metadata and all.
    for name, relpath in (("tool", "bin/tool"), ("acl", "etc/acl"), ("conf", "etc/conf")):
        upgrade(host_root, "--component", name, "--kind", "file", "--source", source / relpath,
                "--destination", f"/usr/local/bin/{name}", "--version", "1.0.0", check=0)
        kept = host_root / f"var/lib/hoist/{name}/1.0.0/{name}"
        assert os.readlink(host_root / f"usr/local/bin/{name}") == f"/var/lib/hoist/{name}/1.0.0/{name}"
        assert file_metadata(kept) == file_metadata(source / relpath), name
    assert os.getxattr(host_root / "var/lib/hoist/tool/1.0.0/tool", "security.capability") == CAPABILITY


def pax_archive_with_acl(path, acl_text):
    """A pax tar of one file whose access ACL is `acl_text` (SCHILY.acl.access, as GNU tar and star write it)."""
    data = b"with an ACL\n"
    info = tarfile.TarInfo("acl")
    info.size, info.mode, info.mtime = len(data), 0o664, 1_700_000_000
    info.pax_headers = {"SCHILY.acl.access": acl_text}
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as archive:
        archive.addfile(info, io.BytesIO(data))
    return path


def test_an_acl_with_numeric_ids_from_an_archive_is_written_with_them(host_root, tmp_path):
    # star's form (bsdtar's too): the name, then the id, which is what is kept.
    archive = pax_archive_with_acl(tmp_path / "star.tar",
                                   "user::rw-,user:alice:rw-:1000,group::r--,group:staff:r--:2000,mask::rw-,other::r--")
    upgrade(host_root, "--component", "app", "--kind", "tree", "--source", archive, "--destination", "/opt/app",
            "--version", "1.0.0", check=0)
    acl = subprocess.run([need("getfacl"), "-n", "-c", str(host_root / "opt/app/1.0.0/acl")], capture_output=True,
                         text=True, check=True).stdout.split()
    assert acl == ["user::rw-", "user:1000:rw-", "group::r--", "group:2000:r--", "mask::rw-", "other::r--"]


def test_an_acl_that_names_a_user_without_an_id_is_refused_and_the_host_is_untouched(host_root, tmp_path):
    # GNU tar's --acls alone writes names only: hoist keeps ids (as --numeric-ids) and resolves no names.
    archive = pax_archive_with_acl(tmp_path / "gnu.tar",
                                   "user::rw-\nuser:alice:rw-\ngroup::r--\nmask::rw-\nother::r--\n")
    before = manifest_without(host_root, "run/hoist")
    result = upgrade(host_root, "--component", "app", "--kind", "tree", "--source", archive, "--destination",
                     "/opt/app", "--version", "1.0.0", check=5)
    assert (f"refusing archive entry 'acl' in '{archive}': its access ACL names user 'alice' without a numeric id"
            in result.stderr), result.stderr
    assert manifest_without(host_root, "run/hoist") == before
