#include "hoist/sys/sha256.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <span>
#include <string>

#include "hoist/util/fd.hpp"
#include "scoped_temp_dir.hpp"

namespace {

void write_file(const std::filesystem::path& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary);
  out << content;
  REQUIRE(out.good());
}

constexpr const char* k_sha256_empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
constexpr const char* k_sha256_abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
// FIPS 180-2's "one million 'a'" vector.
constexpr const char* k_sha256_million_a = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";
constexpr const char* k_sha256_aaa = "9834876dcfb05cb167a5c24953eba58c4ac89b1adf57f28f2f9d09af107ee8f0";
// 1 MiB of 'a', as coreutils' sha256sum computes it: four reads of the 256 KiB buffer.
constexpr const char* k_sha256_mib_a = "9bc1b2a288b26af7257a36277ae3816a7d4f16e89c1e7e77d0a5c48bad62b360";

}  // namespace

namespace hoist {

TEST_CASE("SHA-256 of the empty input is the known vector", "[sys][sha256]") {
  Sha256 sha;
  CHECK(sha.final_hex() == k_sha256_empty);
}

TEST_CASE("SHA-256 of 'abc' is the known vector", "[sys][sha256]") {
  Sha256 sha;
  sha.update(std::string_view("abc"));
  CHECK(sha.final_hex() == k_sha256_abc);
}

TEST_CASE("SHA-256 of one million 'a' fed in uneven pieces is the FIPS vector", "[sys][sha256]") {
  const std::string a(1000000, 'a');
  Sha256 sha;
  std::size_t offset = 0;
  std::size_t piece = 1;
  while (offset < a.size()) {
    const std::size_t n = std::min(piece, a.size() - offset);
    sha.update(std::string_view(a).substr(offset, n));
    offset += n;
    piece = piece * 3 + 1;
  }
  CHECK(sha.final_hex() == k_sha256_million_a);
}

TEST_CASE("SHA-256 of a span of bytes equals that of the same text", "[sys][sha256]") {
  const std::string text = "abc";
  Sha256 sha;
  sha.update(std::as_bytes(std::span(text.data(), text.size())));
  CHECK(sha.final_hex() == k_sha256_abc);
}

TEST_CASE("final_hex starts the digest over, so one object hashes several inputs", "[sys][sha256]") {
  Sha256 sha;
  sha.update(std::string_view("abc"));
  CHECK(sha.final_hex() == k_sha256_abc);
  CHECK(sha.final_hex() == k_sha256_empty);
  sha.update(std::string_view("abc"));
  CHECK(sha.final_hex() == k_sha256_abc);
}

TEST_CASE("a moved-to Sha256 carries on with the digest of the moved-from one", "[sys][sha256]") {
  Sha256 first;
  first.update(std::string_view("ab"));
  Sha256 second = std::move(first);
  second.update(std::string_view("c"));
  CHECK(second.final_hex() == k_sha256_abc);
}

TEST_CASE("sha256_file hashes a file larger than the read buffer", "[sys][sha256]") {
  hoist::test::ScopedTempDir dir;
  write_file(dir.path() / "big", std::string(1U << 20U, 'a'));
  const Fd dirfd(::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  REQUIRE(dirfd);

  Expected<std::string> hex = sha256_file(dirfd.get(), "big");
  REQUIRE(hex.has_value());
  CHECK(*hex == k_sha256_mib_a);
}

TEST_CASE("sha256_file hashes an empty file and a file in a subdirectory", "[sys][sha256]") {
  hoist::test::ScopedTempDir dir;
  std::filesystem::create_directory(dir.path() / "bin");
  write_file(dir.path() / "bin" / "abc", "abc");
  write_file(dir.path() / "empty", "");
  const Fd dirfd(::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  REQUIRE(dirfd);

  CHECK(sha256_file(dirfd.get(), "bin/abc").value() == k_sha256_abc);
  CHECK(sha256_file(dirfd.get(), "empty").value() == k_sha256_empty);
  CHECK(sha256_file(AT_FDCWD, (dir.path() / "bin" / "abc").string()).value() == k_sha256_abc);
}

TEST_CASE("sha256_file names the path when the file does not exist", "[sys][sha256]") {
  hoist::test::ScopedTempDir dir;
  const Fd dirfd(::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  REQUIRE(dirfd);

  const Expected<std::string> hex = sha256_file(dirfd.get(), "bin/k3s");
  REQUIRE_FALSE(hex.has_value());
  CHECK(hex.error().message == "failed to open 'bin/k3s': No such file or directory");
  CHECK(hex.error().errnum == ENOENT);
}

TEST_CASE("sha256_file refuses a directory as not a regular file", "[sys][sha256]") {
  hoist::test::ScopedTempDir dir;
  std::filesystem::create_directory(dir.path() / "bin");
  const Fd dirfd(::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  REQUIRE(dirfd);

  const Expected<std::string> hex = sha256_file(dirfd.get(), "bin");
  REQUIRE_FALSE(hex.has_value());
  CHECK(hex.error().message == "failed to hash 'bin': not a regular file");
}

TEST_CASE("sha256_file does not follow a symbolic link", "[sys][sha256]") {
  hoist::test::ScopedTempDir dir;
  write_file(dir.path() / "target", "abc");
  std::filesystem::create_symlink("target", dir.path() / "link");
  const Fd dirfd(::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  REQUIRE(dirfd);

  const Expected<std::string> hex = sha256_file(dirfd.get(), "link");
  REQUIRE_FALSE(hex.has_value());
  CHECK(hex.error().message == "failed to open 'link': Too many levels of symbolic links");
}

TEST_CASE("sha256_file refuses a FIFO without blocking on it", "[sys][sha256]") {
  hoist::test::ScopedTempDir dir;
  REQUIRE(::mkfifo((dir.path() / "fifo").c_str(), 0600) == 0);

  const Expected<std::string> hex = sha256_file(AT_FDCWD, (dir.path() / "fifo").string());
  REQUIRE_FALSE(hex.has_value());
  CHECK(hex.error().message == "failed to hash '" + (dir.path() / "fifo").string() + "': not a regular file");
}

TEST_CASE("sha256_of_file_at gives the bytes sha256_file gives as hex, and names the display in errors",
          "[sys][sha256]") {
  hoist::test::ScopedTempDir dir;
  std::filesystem::create_directory(dir.path() / "bin");
  write_file(dir.path() / "bin" / "abc", "abc");
  write_file(dir.path() / "big", std::string(1U << 20U, 'a'));
  std::filesystem::create_symlink("abc", dir.path() / "bin" / "link");
  const Fd bin(::open((dir.path() / "bin").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  REQUIRE(bin);

  CHECK(hoist::to_hex(hoist::sha256_of_file_at(bin.get(), "abc", "/payload/bin/abc").value()) == k_sha256_abc);
  const auto link = hoist::sha256_of_file_at(bin.get(), "link", "/payload/bin/link");
  REQUIRE_FALSE(link.has_value());
  CHECK(link.error().message == "failed to open '/payload/bin/link': Too many levels of symbolic links");
  const auto missing = hoist::sha256_of_file_at(bin.get(), "k3s");
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.error().message == "failed to open 'k3s': No such file or directory");
  // The thread's buffer and context carry nothing from one file to the next, nor from a failure.
  CHECK(hoist::to_hex(hoist::sha256_of_file_at(AT_FDCWD, (dir.path() / "big").string()).value()) == k_sha256_mib_a);
  CHECK(hoist::to_hex(hoist::sha256_of_file_at(bin.get(), "abc").value()) == k_sha256_abc);
}

TEST_CASE("sha256_fd hashes from the current offset to the end", "[sys][sha256]") {
  hoist::test::ScopedTempDir dir;
  write_file(dir.path() / "f", "xyzabc");
  const Fd fd(::open((dir.path() / "f").c_str(), O_RDONLY | O_CLOEXEC));
  REQUIRE(fd);
  REQUIRE(::lseek(fd.get(), 3, SEEK_SET) == 3);

  CHECK(sha256_fd(fd.get(), "f").value() == k_sha256_abc);
}

TEST_CASE("a read error from sha256_fd names the path it was given", "[sys][sha256]") {
  hoist::test::ScopedTempDir dir;
  // read(2) on a directory fails with EISDIR: a real read error without fault injection.
  const Fd fd(::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  REQUIRE(fd);

  const Expected<std::string> named = sha256_fd(fd.get(), "payload/bin");
  REQUIRE_FALSE(named.has_value());
  CHECK(named.error().message == "failed to read 'payload/bin': Is a directory");
  CHECK(named.error().errnum == EISDIR);

  const Expected<std::string> unnamed = sha256_fd(fd.get());
  REQUIRE_FALSE(unnamed.has_value());
  CHECK(unnamed.error().message == "failed to read fd " + std::to_string(fd.get()) + ": Is a directory");
}

TEST_CASE("sha256_of_file with a size hashes that many bytes, and reads no further to find the end", "[sys][sha256]") {
  hoist::test::ScopedTempDir dir;
  write_file(dir.path() / "abc", "abc");
  write_file(dir.path() / "big", std::string(1U << 20U, 'a'));
  const Fd abc(::open((dir.path() / "abc").c_str(), O_RDONLY | O_CLOEXEC));
  const Fd big(::open((dir.path() / "big").c_str(), O_RDONLY | O_CLOEXEC));
  REQUIRE(abc);
  REQUIRE(big);

  CHECK(to_hex(sha256_of_file(abc.get(), 3, "abc").value()) == k_sha256_abc);
  CHECK(to_hex(sha256_of_file(abc.get(), 0, "abc").value()) == k_sha256_empty);
  // The file ends first: what it holds.
  CHECK(to_hex(sha256_of_file(abc.get(), 100, "abc").value()) == k_sha256_abc);
  CHECK(to_hex(sha256_of_file(big.get(), 3, "big").value()) == k_sha256_aaa);
  CHECK(to_hex(sha256_of_file(big.get(), 1U << 20U, "big").value()) == k_sha256_mib_a);
  CHECK(to_hex(sha256_of_file(big.get(), "big").value()) == k_sha256_mib_a);
  CHECK(::lseek(big.get(), 0, SEEK_CUR) == 0);

  // One read for a file that fits the buffer, where reading to the end takes two (the second finds nothing).
  const auto reads = []() {
    std::ifstream io("/proc/thread-self/io");
    std::string key;
    uint64_t value = 0;
    while (io >> key >> value) {
      if (key == "syscr:") {
        return value;
      }
    }
    FAIL("no syscr in /proc/thread-self/io");
    return value;
  };
  // The counter includes the reads of the counter's own file after its value was taken.
  uint64_t before = reads();
  const uint64_t own = reads() - before;
  before = reads();
  CHECK(to_hex(sha256_of_file(abc.get(), 3, "abc").value()) == k_sha256_abc);
  CHECK(reads() - before - own == 1);
  before = reads();
  CHECK(to_hex(sha256_of_file(abc.get(), "abc").value()) == k_sha256_abc);
  CHECK(reads() - before - own == 2);
}

TEST_CASE("digest_from_hex reads 64 hex digits of either case and nothing else", "[sys][sha256]") {
  const std::optional<Sha256Digest> digest = digest_from_hex(k_sha256_abc);
  REQUIRE(digest.has_value());
  CHECK(to_hex(*digest) == k_sha256_abc);
  std::string upper(k_sha256_abc);
  std::transform(upper.begin(), upper.end(), upper.begin(), [](unsigned char c) { return std::toupper(c); });
  CHECK(digest_from_hex(upper) == digest);

  CHECK_FALSE(digest_from_hex(std::string(k_sha256_abc).substr(1)).has_value());
  CHECK_FALSE(digest_from_hex(std::string(k_sha256_abc) + "0").has_value());
  CHECK_FALSE(digest_from_hex(std::string(k_sha256_abc).replace(10, 1, "g")).has_value());
  CHECK_FALSE(digest_from_hex("").has_value());
}

}  // namespace hoist
