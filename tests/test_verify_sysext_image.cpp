#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "hoist/transfer/payload.hpp"
#include "hoist/util/error.hpp"
#include "hoist/verify/sysext_image.hpp"
#include "scoped_temp_dir.hpp"

using hoist::Payload;
using hoist::SysextImageType;
using hoist::test::ScopedTempDir;
using hoist::test::write_text;

namespace {

std::string exit_and_message(const std::function<void()>& run) {
  try {
    run();
    return "ok";
  } catch (const hoist::Error& e) {
    return std::to_string(static_cast<int>(e.code())) + ": " + e.what();
  }
}

}  // namespace

TEST_CASE("a sysext payload is a directory, or a squashfs or erofs image by its magic", "[sysext]") {
  ScopedTempDir dir;
  std::filesystem::create_directories(dir / "tree");
  CHECK(hoist::detect_sysext_image(Payload::open(dir / "tree")) == SysextImageType::directory);

  write_text(dir / "sq.raw", std::string("hsqs") + std::string(4092, '\0'));
  CHECK(hoist::detect_sysext_image(Payload::open(dir / "sq.raw")) == SysextImageType::squashfs);

  std::string erofs(4096, '\0');
  erofs.replace(1024, 4, "\xe2\xe1\xf5\xe0");
  write_text(dir / "ero.raw", erofs);
  CHECK(hoist::detect_sysext_image(Payload::open(dir / "ero.raw")) == SysextImageType::erofs);

  write_text(dir / "text.raw", "not an image\n");
  CHECK(exit_and_message([&] { hoist::detect_sysext_image(Payload::open(dir / "text.raw")); }) ==
        "2: sysext payload '" + (dir / "text.raw").string() + "' is neither a directory nor a squashfs or erofs image");
}

TEST_CASE("the extension's name comes from its link, .raw for images and not for directories", "[sysext]") {
  CHECK(hoist::sysext_image_name("/etc/extensions/node-tools.raw", SysextImageType::squashfs) == "node-tools");
  CHECK(hoist::sysext_image_name("/etc/extensions/node-tools.raw", SysextImageType::erofs) == "node-tools");
  CHECK(hoist::sysext_image_name("/etc/extensions/node-tools", SysextImageType::directory) == "node-tools");
  CHECK(exit_and_message([] { hoist::sysext_image_name("/etc/extensions/node-tools", SysextImageType::squashfs); }) ==
        "2: destination '/etc/extensions/node-tools' must end in .raw for a squashfs image: systemd-sysext merges "
        "image files named <name>.raw");
  CHECK(exit_and_message([] { hoist::sysext_image_name("/etc/extensions/t.raw", SysextImageType::directory); }) ==
        "2: destination '/etc/extensions/t.raw' ends in .raw, but the sysext payload is a directory: systemd-sysext "
        "ignores a directory named *.raw; name the link without .raw");
  CHECK(exit_and_message([] { hoist::sysext_image_name("/etc/extensions/.raw", SysextImageType::erofs); }) ==
        "2: destination '/etc/extensions/.raw' does not give a valid extension name");
}

TEST_CASE("a directory's extension-release is read inside it, symlinks resolved in the image", "[sysext]") {
  ScopedTempDir dir;
  const auto image = dir / "tools";
  write_text(image / "usr/lib/extension-release.d/real", "ID=debian\nVERSION_ID=12\n");
  std::filesystem::create_symlink("/usr/lib/extension-release.d/real",
                                  image / "usr/lib/extension-release.d/extension-release.tools");
  const auto release = hoist::read_extension_release(Payload::open(image), SysextImageType::directory, "tools");
  CHECK(hoist::release_value(release, "ID") == "debian");
  CHECK(hoist::release_value(release, "VERSION_ID") == "12");

  // The release file must be the one named after the extension.
  CHECK(exit_and_message([&] {
          hoist::read_extension_release(Payload::open(image), SysextImageType::directory, "other");
        }) == "5: sysext image '" + image.string() +
                  "' has no 'usr/lib/extension-release.d/extension-release.other': systemd-sysext would refuse it as "
                  "extension 'other'");

  write_text(image / "usr/lib/os-release", "ID=evil\n");
  CHECK(exit_and_message([&] {
          hoist::read_extension_release(Payload::open(image), SysextImageType::directory, "tools");
        }) == "5: sysext image '" + image.string() + "' contains 'usr/lib/os-release', which systemd-sysext refuses");
}

TEST_CASE("verifying a sysext directory compares it with the host's os-release", "[sysext]") {
  ScopedTempDir dir;
  write_text(dir / "host/etc/os-release", "ID=debian\nVERSION_ID=12\n");
  auto root = hoist::HostRoot::open(dir / "host");
  REQUIRE(root.has_value());
  write_text(dir / "tools/usr/lib/extension-release.d/extension-release.tools", "ID=debian\nVERSION_ID=12\n");
  CHECK_NOTHROW(hoist::verify_sysext_payload(*root, Payload::open(dir / "tools"), "/etc/extensions/tools"));

  write_text(dir / "tools/usr/lib/extension-release.d/extension-release.tools", "ID=debian\nVERSION_ID=11\n");
  CHECK(exit_and_message([&] {
          hoist::verify_sysext_payload(*root, Payload::open(dir / "tools"), "/etc/extensions/tools");
        }) == "5: extension 'tools' does not match the host (" + (dir / "tools").string() +
                  ":usr/lib/extension-release.d/extension-release.tools): VERSION_ID is '11', the host's VERSION_ID "
                  "is '12'");
}
