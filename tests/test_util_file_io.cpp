#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <fstream>
#include <string>

#include "hoist/util/fd.hpp"
#include "hoist/util/file_io.hpp"
#include "scoped_temp_dir.hpp"

using hoist::read_fd;
using hoist::read_file_at;
using hoist::test::ScopedTempDir;

TEST_CASE("read_file_at reads a regular file whole", "[file_io]") {
  ScopedTempDir dir;
  std::ofstream(dir / "f") << "hello\n";
  auto text = read_file_at(AT_FDCWD, (dir / "f").string(), "f");
  REQUIRE(text.has_value());
  CHECK(*text == "hello\n");
}

TEST_CASE("read_file_at refuses a FIFO at once instead of blocking in open or read", "[file_io]") {
  ScopedTempDir dir;
  const std::string fifo = (dir / "fifo").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const auto text = read_file_at(AT_FDCWD, fifo, fifo);  // no writer: a blocking open would never return
  REQUIRE_FALSE(text.has_value());
  CHECK(text.error().message == "failed to read '" + fifo + "': it is a FIFO, not a regular file");
  CHECK(text.error().errnum == EINVAL);
}

TEST_CASE("read_file_at names a directory and a device for what they are", "[file_io]") {
  ScopedTempDir dir;
  const auto directory = read_file_at(AT_FDCWD, dir.path().string(), "d");
  REQUIRE_FALSE(directory.has_value());
  CHECK(directory.error().message == "failed to read 'd': it is a directory, not a regular file");
  const auto device = read_file_at(AT_FDCWD, "/dev/zero", "/dev/zero");  // would never end
  REQUIRE_FALSE(device.has_value());
  CHECK(device.error().message == "failed to read '/dev/zero': it is a character device, not a regular file");
}

TEST_CASE("read_fd refuses a socket before reading", "[file_io]") {
  int pair[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) == 0);
  const hoist::Fd a(pair[0]);
  const hoist::Fd b(pair[1]);
  const auto text = read_fd(a.get(), "sock");
  REQUIRE_FALSE(text.has_value());
  CHECK(text.error().message == "failed to read 'sock': it is a socket, not a regular file");
}
