#include <sys/resource.h>

#include <catch2/catch.hpp>
#include <exception>
#include <filesystem>
#include <span>
#include <string>

#include "hoist/model/component.hpp"
#include "hoist/sys/sha256.hpp"
#include "hoist/transfer/payload.hpp"
#include "hoist/util/error.hpp"
#include "hoist/verify/payload_verification.hpp"
#include "scoped_temp_dir.hpp"

namespace {

namespace fs = std::filesystem;

/// 30 directories (some nested) of 20 files each, and SHA256SUMS of every file beside the tree.
struct SummedTree {
  hoist::test::ScopedTempDir dir;
  fs::path tree = dir.path() / "payload";
  fs::path sums = dir.path() / "SHA256SUMS";

  SummedTree() {
    std::string lines;
    for (int d = 0; d < 30; ++d) {
      const std::string sub = (d % 3 == 0 ? "" : "d" + std::to_string(d / 3) + "/") + "e" + std::to_string(d);
      fs::create_directories(tree / sub);
      for (int f = 0; f < 20; ++f) {
        const std::string name = sub + "/f" + std::to_string(f);
        const std::string content = "file " + name + "\n";
        hoist::test::write_text(tree / name, content);
        hoist::Sha256 sha;
        sha.update(std::as_bytes(std::span(content.data(), content.size())));
        lines += sha.final_hex() + "  " + name + "\n";
      }
    }
    fs::create_symlink("e0/f0", tree / "link");
    hoist::test::write_text(sums, lines);
  }

  [[nodiscard]] hoist::ComponentSpec spec() const {
    hoist::ComponentSpec spec;
    spec.name = "app";
    spec.source = tree;
    spec.sha256sums = sums;
    return spec;
  }
};

}  // namespace

namespace hoist {

TEST_CASE("verify_payload walks a directory payload on several threads and finds what one thread finds",
          "[verify][threads]") {
  SummedTree payload;
  const ComponentSpec spec = payload.spec();

  for (const unsigned threads : {1U, 4U}) {
    INFO("threads: " << threads);
    CHECK(verify_payload(spec, Payload::open(payload.tree), nullptr, nullptr, threads).has_value());
  }

  // Refused on one thread and on four alike, naming what is wrong.
  const auto refused = [&](const std::string& message) {
    for (const unsigned threads : {1U, 4U}) {
      INFO("threads: " << threads);
      CHECK_THROWS_WITH(verify_payload(spec, Payload::open(payload.tree), nullptr, nullptr, threads),
                        Catch::Contains(message));
    }
  };
  SECTION("a file whose bytes differ from the sums, deep in the tree") {
    hoist::test::write_text(payload.tree / "d4/e13/f7", "file d4/e13/f8\n");
    refused("d4/e13/f7");
  }
  SECTION("a listed file that is missing") {
    fs::remove(payload.tree / "d9/e29/f19");
    refused("'d9/e29/f19' is listed in SHA256SUMS but not in the payload");
  }
  SECTION("a file the sums do not list") {
    hoist::test::write_text(payload.tree / "d2/e7/extra", "extra\n");
    refused("d2/e7/extra");
  }
}

TEST_CASE("verify_payload walks a directory of more subdirectories than the process may hold open",
          "[verify][threads]") {
  hoist::test::ScopedTempDir dir;
  const fs::path tree = dir.path() / "payload";
  std::string lines;
  for (int d = 0; d < 600; ++d) {
    const std::string name = "d" + std::to_string(d) + "/f";
    fs::create_directories(tree / ("d" + std::to_string(d)));
    hoist::test::write_text(tree / name, name);
    Sha256 sha;
    sha.update(std::as_bytes(std::span(name.data(), name.size())));
    lines += sha.final_hex() + "  " + name + "\n";
  }
  hoist::test::write_text(dir.path() / "SHA256SUMS", lines);
  ComponentSpec spec;
  spec.name = "app";
  spec.sha256sums = dir.path() / "SHA256SUMS";
  const Payload payload = Payload::open(tree);

  // 600 subdirectories under a limit of 256 descriptors: a walk that opened each subdirectory as it queued it
  // failed with "Too many open files".
  struct rlimit before {};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &before) == 0);
  struct rlimit tight = before;
  tight.rlim_cur = 256;
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &tight) == 0);
  bool verified = false;
  std::string failure;
  try {
    verified = verify_payload(spec, payload, nullptr, nullptr, 4).has_value();
  } catch (const std::exception& e) {
    failure = e.what();
  }
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &before) == 0);
  INFO(failure);
  CHECK(verified);
}

}  // namespace hoist
