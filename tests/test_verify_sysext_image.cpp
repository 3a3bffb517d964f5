#include <sys/xattr.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
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
  CHECK(hoist::release_value(release.fields, "ID") == "debian");
  CHECK(hoist::release_value(release.fields, "VERSION_ID") == "12");
  CHECK(release.path == "usr/lib/extension-release.d/extension-release.tools");

  // The release file must be the one named after the extension.
  CHECK(exit_and_message([&] {
          hoist::read_extension_release(Payload::open(image), SysextImageType::directory, "other");
        }) == "5: sysext image '" + image.string() +
                  "' has no 'usr/lib/extension-release.d/extension-release.other', nor another extension-release "
                  "file marked user.extension-release.strict=false: systemd-sysext would refuse it as extension "
                  "'other'");

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

TEST_CASE("a release file under another name counts only when its xattr allows it, as in systemd-sysext", "[sysext]") {
  ScopedTempDir dir;
  const auto image = dir / "tools";
  const auto release_dir = image / "usr/lib/extension-release.d";
  write_text(release_dir / "extension-release.other", "ID=debian\nVERSION_ID=12\n");
  const auto strict = [&](const std::string& file, const char* value) {
    REQUIRE(::setxattr((release_dir / file).c_str(), "user.extension-release.strict", value, std::strlen(value), 0) ==
            0);
  };
  // "ok" and the ID read, or the exit code and message.
  const auto read = [&] {
    std::string id;
    std::string result = exit_and_message([&] {
      const auto release = hoist::read_extension_release(Payload::open(image), SysextImageType::directory, "tools");
      id = std::string(hoist::release_value(release.fields, "ID")) + " from " +
           release.path.substr(release.path.rfind('/') + 1);
    });
    return result == "ok" ? result + " " + id : result;
  };
  const std::string missing = "5: sysext image '" + image.string() +
                              "' has no 'usr/lib/extension-release.d/extension-release.tools', nor another "
                              "extension-release file marked user.extension-release.strict=false: systemd-sysext "
                              "would refuse it as extension 'tools'";
  CHECK(read() == missing);  // no xattr
  for (const char* value : {"1", "yes", "true", "maybe", ""}) {
    CAPTURE(value);
    strict("extension-release.other", value);
    CHECK(read() == missing);
  }
  for (const char* value : {"0", "no", "N", "FALSE", "f", "Off"}) {
    CAPTURE(value);
    strict("extension-release.other", value);
    CHECK(read() == "ok debian from extension-release.other");
  }
  // A second one is ambiguous; one that is no regular file, or whose name is no valid image name, does not count.
  write_text(release_dir / "extension-release.third", "ID=fedora\n");
  strict("extension-release.third", "0");
  // The order of the two names is the directory's.
  const std::string both = read();
  CHECK(both.starts_with("5: sysext image '" + image.string() + "' has both '"));
  CHECK(both.find("'usr/lib/extension-release.d/extension-release.other'") != std::string::npos);
  CHECK(both.find("'usr/lib/extension-release.d/extension-release.third'") != std::string::npos);
  CHECK(both.ends_with("' marked user.extension-release.strict=false: systemd-sysext refuses the ambiguity"));
  std::filesystem::remove(release_dir / "extension-release.third");
  std::filesystem::create_directory(release_dir / "extension-release.dir");
  write_text(release_dir / "extension-release..hidden", "ID=fedora\n");
  strict("extension-release..hidden", "0");
  CHECK(read() == "ok debian from extension-release.other");
  // The file of the extension's own name wins, whatever the others say.
  write_text(release_dir / "extension-release.tools", "ID=arch\n");
  CHECK(read() == "ok arch from extension-release.tools");
}
