// DataCopier: FICLONE, copy_file_range, sendfile and read/write give the same bytes; refused methods are remembered.

#include "hoist/sys/data_copier.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>

#include "scoped_temp_dir.hpp"
#include "transfer_fixture.hpp"

namespace {

using hoist::CopyMethod;
using hoist::test::ScopedTempDir;

struct Files {
  hoist::Fd in;
  hoist::Fd out;
  dev_t dev = 0;
};

Files open_pair(const std::filesystem::path& in, const std::filesystem::path& out, int out_access = O_WRONLY) {
  Files files;
  files.in.reset(::open(in.c_str(), O_RDONLY | O_CLOEXEC));
  files.out.reset(::open(out.c_str(), out_access | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  REQUIRE(files.in.valid());
  REQUIRE(files.out.valid());
  files.dev = hoist::test::lstat_of(in).st_dev;
  return files;
}

}  // namespace

TEST_CASE("every copy method copies the bytes exactly", "[file-copy]") {
  ScopedTempDir tmp;
  // Not a multiple of any buffer or chunk size.
  hoist::test::run("head -c 20971537 /dev/urandom > '" + (tmp / "in").string() + "'");
  const uint64_t size = std::filesystem::file_size(tmp / "in");
  for (const CopyMethod method :
       {CopyMethod::clone, CopyMethod::copy_range, CopyMethod::send_file, CopyMethod::read_write}) {
    INFO(static_cast<int>(method));
    hoist::DataCopier copier;
    copier.force_method(method);
    Files files = open_pair(tmp / "in", tmp / "out");
    uint64_t last_progress = 0;
    const uint64_t written = copier
                                 .copy(files.in.get(), files.dev, files.out.get(), files.dev, size, "in", "out",
                                       [&](uint64_t done) { last_progress = done; })
                                 .value();
    files.out.reset();
    CHECK(hoist::test::read_text(tmp / "out") == hoist::test::read_text(tmp / "in"));
    CHECK(last_progress == size);
    // A clone writes nothing; where the filesystem refuses it, the fallback writes everything.
    CHECK((written == size || (method == CopyMethod::clone && written == 0)));
  }
}

TEST_CASE("a hashed copy's digest is that of the bytes copied, by every method, small or hashed beside the copy",
          "[file-copy]") {
  ScopedTempDir tmp;
  // Below and past the size from which the copy is hashed on a thread beside it (32 MiB), neither a
  // multiple of a buffer or a chunk.
  for (const uint64_t size : {uint64_t{1048583}, uint64_t{41943053}}) {
    hoist::test::run("head -c " + std::to_string(size) + " /dev/urandom > '" + (tmp / "in").string() + "'");
    const hoist::Fd in(::open((tmp / "in").c_str(), O_RDONLY | O_CLOEXEC));
    const hoist::Sha256Digest expected = hoist::sha256_of_file(in.get(), "in").value();
    for (const CopyMethod method :
         {CopyMethod::clone, CopyMethod::copy_range, CopyMethod::send_file, CopyMethod::read_write}) {
      INFO(size << " bytes, method " << static_cast<int>(method));
      hoist::DataCopier copier;
      copier.force_method(method);
      Files files = open_pair(tmp / "in", tmp / "out", O_RDWR);
      uint64_t last_progress = 0;
      hoist::Sha256Digest digest{};
      const uint64_t written = copier
                                   .copy_hashed(files.in.get(), files.dev, files.out.get(), files.dev, size, digest,
                                                "in", "out", [&](uint64_t done) { last_progress = done; })
                                   .value();
      files.out.reset();
      CHECK(digest == expected);
      CHECK(hoist::test::read_text(tmp / "out") == hoist::test::read_text(tmp / "in"));
      CHECK(last_progress == size);
      CHECK((written == size || (method == CopyMethod::clone && written == 0)));
    }
  }
}

TEST_CASE("a big hashed copy that cannot read its copy back fails naming the copy", "[file-copy]") {
  ScopedTempDir tmp;
  hoist::test::run("head -c 41943053 /dev/zero > '" + (tmp / "in").string() + "'");
  hoist::DataCopier copier;
  Files files = open_pair(tmp / "in", tmp / "out", O_WRONLY);
  hoist::Sha256Digest digest{};
  auto copied =
      copier.copy_hashed(files.in.get(), files.dev, files.out.get(), files.dev, 41943053, digest, "in", "the copy");
  REQUIRE_FALSE(copied);
  CHECK(copied.error().message == "failed to read 'the copy': Bad file descriptor");
}

TEST_CASE("a method the filesystems refuse is not tried again for that pair", "[file-copy]") {
  ScopedTempDir tmp;
  hoist::test::write_text(tmp / "in", std::string(100000, 'x'));
  hoist::DataCopier copier;
  const dev_t dev = hoist::test::lstat_of(tmp / "in").st_dev;
  CHECK(copier.method_for(dev, dev) == CopyMethod::clone);
  Files files = open_pair(tmp / "in", tmp / "out");
  const uint64_t written = copier.copy(files.in.get(), dev, files.out.get(), dev, 100000, "in", "out").value();
  if (written == 0) {
    SUCCEED("this filesystem clones (btrfs, xfs): nothing to fall back from");
  } else {
    CHECK(copier.method_for(dev, dev) == CopyMethod::copy_range);
  }
  CHECK(hoist::test::read_text(tmp / "out") == std::string(100000, 'x'));
}

TEST_CASE("CopyExtent::part copies a prefix from the current offsets, never by cloning", "[file-copy]") {
  ScopedTempDir tmp;
  hoist::test::write_text(tmp / "in", "0123456789");
  hoist::DataCopier copier;
  Files files = open_pair(tmp / "in", tmp / "out");
  CHECK(copier.copy(files.in.get(), files.dev, files.out.get(), files.dev, 4, "in", "out", {}, hoist::CopyExtent::part)
            .value() == 4);
  CHECK(::write(files.out.get(), "--", 2) == 2);
  CHECK(hoist::test::read_text(tmp / "out") == "0123--");
}

TEST_CASE("same_content compares whole files", "[file-copy]") {
  ScopedTempDir tmp;
  const std::string big(600000, 'a');
  hoist::test::write_text(tmp / "a", big);
  hoist::test::write_text(tmp / "b", big);
  hoist::test::write_text(tmp / "c", big + "!");
  hoist::test::write_text(tmp / "d", std::string(599999, 'a') + "b");
  auto open = [&](const char* name) { return hoist::Fd(::open((tmp / name).c_str(), O_RDONLY | O_CLOEXEC)); };
  const hoist::Fd a = open("a");
  const hoist::Fd b = open("b");
  const hoist::Fd c = open("c");
  const hoist::Fd d = open("d");
  CHECK(hoist::same_content(a.get(), b.get(), "a", "b").value());
  CHECK_FALSE(hoist::same_content(a.get(), c.get(), "a", "c").value());
  CHECK_FALSE(hoist::same_content(c.get(), a.get(), "c", "a").value());
  CHECK_FALSE(hoist::same_content(a.get(), d.get(), "a", "d").value());
}
