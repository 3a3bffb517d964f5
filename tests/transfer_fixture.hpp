#pragma once

// Helpers of the transfer engine's tests (stage_tree, sync_tree): real trees
// with every kind of entry and metadata, made with the real tools as root.

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "hoist/transfer/payload.hpp"
#include "hoist/transfer/transfer.hpp"
#include "hoist/util/fd.hpp"

namespace hoist::test {

/// Runs a shell command and requires it to succeed.
inline void run(const std::string& command) {
  INFO(command);
  REQUIRE(std::system(command.c_str()) == 0);
}

/// Runs a shell command and returns its standard output.
inline std::string output_of(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) {
    out.append(buffer, n);
  }
  REQUIRE(::pclose(pipe) == 0);
  return out;
}

/// What `rsync -aHAX --delete` would still change to make `to` like `from`
/// (one itemized line per difference): empty when the trees are equal in
/// content, types, modes, owners, mtimes, xattrs, ACLs and hard links.
inline std::string rsync_differences(const std::filesystem::path& from, const std::filesystem::path& to) {
  return output_of("rsync -n -i -aHAX --delete '" + from.string() + "/' '" + to.string() + "/'");
}

inline Fd open_dir(const std::filesystem::path& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  REQUIRE(fd.valid());
  return fd;
}

inline struct stat lstat_of(const std::filesystem::path& path) {
  struct stat st {};
  INFO(path);
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st;
}

/// The value of one xattr of `path` (not following a symlink), "" when absent.
inline std::string xattr_of(const std::filesystem::path& path, const std::string& name) {
  char value[4096];
  const ssize_t n = ::lgetxattr(path.c_str(), name.c_str(), value, sizeof value);
  return n < 0 ? std::string() : std::string(value, static_cast<size_t>(n));
}

inline bool same_inode(const std::filesystem::path& a, const std::filesystem::path& b) {
  const struct stat sa = lstat_of(a);
  const struct stat sb = lstat_of(b);
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/// 100 files of 10 KiB of random bytes with fixed mtimes, in 10 directories d0..d9, files f0..f9.
inline void make_hundred_files(const std::filesystem::path& dir) {
  run("set -e; for d in 0 1 2 3 4 5 6 7 8 9; do mkdir -p '" + dir.string() +
      "'/d$d; for f in 0 1 2 3 4 5 6 7 8 9; do head -c 10240 /dev/urandom > '" + dir.string() +
      "'/d$d/f$f; done; done; find '" + dir.string() + "' -exec touch -d '2022-02-02 02:02:02.2' {} +");
}

/// Changes the byte at `offset` of `path` in place (its complement: writing a fixed byte would leave random content
/// unchanged once in 256 runs), keeping the size; the mtime is the caller's to restore.
inline void flip_byte(const std::filesystem::path& path, std::streamoff offset) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  char byte = 0;
  if (!file.seekg(offset).get(byte) || !file.seekp(offset).put(static_cast<char>(~byte)).flush()) {
    throw std::runtime_error("cannot change a byte of " + path.string());
  }
}

/// Makes, under `dir`, a tree with one of everything rsync -aHAX keeps:
/// setuid/setgid files owned by other ids, a file capability, user/trusted/
/// security xattrs, access and default ACLs, symlinks (relative, absolute,
/// dangling; with their own owner and mtime), hard links within and across
/// directories, a fifo, a socket, character and block devices, nanosecond
/// mtimes, a sticky directory, a name with a newline, a 5 MiB file.
/// Regular files: 13 inodes, 15 names.
inline void make_rich_tree(const std::filesystem::path& dir) {
  const std::string d = "'" + dir.string() + "'";
  run("set -e; mkdir -p " + d + " && cd " + d + R"SH( &&
    mkdir -p bin etc/conf.d empty private sticky 'with space' links/deeper &&
    printf 'hello\n' > etc/hello.conf && printf 'k=v\n' > etc/conf.d/a.conf &&
    printf '#!/bin/sh\necho su\n' > bin/su && chown 1234:5678 bin/su && chmod 4755 bin/su &&
    printf 'sg' > bin/sg && chown 0:42 bin/sg && chmod 2755 bin/sg &&
    printf 'ping' > bin/ping && chmod 0755 bin/ping && setcap cap_net_raw+ep bin/ping &&
    printf 'x' > etc/xattrs && setfattr -n user.color -v blue etc/xattrs &&
    setfattr -n trusted.overlay -v y etc/xattrs && setfattr -n security.selinux -v system_u:object_r:etc_t:s0 etc/xattrs &&
    setfattr -n user.dir -v yes etc &&
    printf 'acl' > etc/acl && setfacl -m u:1001:rwx,g:1002:r etc/acl &&
    setfacl -d -m g:1003:rx etc/conf.d && setfacl -m u:1004:rx etc/conf.d &&
    ln -s ../etc/hello.conf bin/hello-link && ln -s /etc/passwd bin/absolute-link && ln -s nowhere bin/dangling &&
    chown -h 1234:1234 bin/dangling && touch -h -d '2001-02-03 04:05:06.123456789' bin/dangling &&
    setfattr -h -n trusted.link -v l bin/hello-link &&
    printf 'same inode' > links/a && ln links/a links/b && ln links/a links/deeper/c &&
    mkfifo private/fifo && mknod private/null c 1 3 && mknod private/loop b 7 0 &&
    python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind("private/socket")' &&
    chown 1234:5678 private && chmod 0700 private && chmod 1777 sticky &&
    printf 'spaced' > 'with space/a file' && printf 'newline' > "$(printf 'with space/new\nline')" &&
    head -c 5242880 /dev/urandom > big.bin &&
    touch -d '2020-01-02 03:04:05.123456789' etc/hello.conf &&
    find . -not -type l -not -name hello.conf -exec touch -d '2021-06-07 08:09:10.987654321' {} + &&
    touch -d '2019-05-05 05:05:05.5' . )SH");
}

/// Sum of st_size over the distinct regular-file inodes under `dir`.
inline uint64_t regular_bytes(const std::filesystem::path& dir) {
  return std::stoull(
      output_of("find '" + dir.string() + "' -type f -printf '%i %s\\n' | sort -u | awk '{s+=$2} END {print s+0}'"));
}

/// The number of entries under `dir` (not counting `dir` itself).
inline uint64_t entry_count(const std::filesystem::path& dir) {
  return std::stoull(output_of("find '" + dir.string() + "' -mindepth 1 -printf x | wc -c"));
}

/// stage_tree() of the payload at `source` into `staging` (made if missing),
/// hard-linking unchanged files from `link_dest` when one is given.
inline TransferStats stage_payload(const std::filesystem::path& source, const std::filesystem::path& staging,
                                   const std::filesystem::path& link_dest = {}, const TransferOptions& options = {}) {
  std::filesystem::create_directories(staging);
  const Fd staging_fd = open_dir(staging);
  Fd link_fd;
  if (!link_dest.empty()) {
    link_fd = open_dir(link_dest);
  }
  return stage_tree(Payload::open(source), staging_fd.get(), link_fd.get(), options);
}

/// A size-limited tmpfs at `path` for the life of the object. Required, not
/// optional: the tests run as root, as hoist does, and a test that cannot
/// mount it fails rather than passing without having run.
class ScopedTmpfs {
 public:
  ScopedTmpfs(std::filesystem::path path, const std::string& size) : m_path(std::move(path)) {
    std::filesystem::create_directories(m_path);
    run("mount -t tmpfs -o size=" + size + " tmpfs '" + m_path.string() + "'");
  }
  ScopedTmpfs(const ScopedTmpfs&) = delete;
  ScopedTmpfs& operator=(const ScopedTmpfs&) = delete;
  ~ScopedTmpfs() {
    // A destructor cannot report a failed umount. Kept in a variable: a cast to void does not silence
    // _FORTIFY_SOURCE's warn_unused_result in GCC.
    [[maybe_unused]] const int status = std::system(("umount '" + m_path.string() + "'").c_str());
  }

 private:
  std::filesystem::path m_path;
};

}  // namespace hoist::test
