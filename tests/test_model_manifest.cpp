#include <catch2/catch.hpp>
#include <string>

#include "hoist/model/manifest.hpp"
#include "hoist/util/error.hpp"
#include "scoped_temp_dir.hpp"

using hoist::ComponentKind;
using hoist::Manifest;
using hoist::parse_manifest;
using hoist::UsageError;

namespace {

const std::filesystem::path k_path = "/payload/hoist.json";

std::string error_of(const std::string& text) {
  try {
    parse_manifest(text, k_path);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

// A valid one-component manifest with `extra` spliced into the component.
std::string with_component(const std::string& extra) {
  return R"({"schema": 1, "version": "1.2.3", "components": [{"name": "app", "kind": "tree", "source": "app",
             "destination": "/opt/app")" +
         extra + "}]}";
}

}  // namespace

TEST_CASE("a full manifest parses with defaults and paths relative to its directory", "[manifest]") {
  const Manifest m = parse_manifest(R"({
    "schema": 1, "version": "v1.30.1+k3s1", "version_scheme": "k3s",
    "components": [
      {"name": "k3s", "kind": "file", "source": "bin/k3s", "destination": "/usr/local/bin/k3s",
       "sha256sums": "SHA256SUMS", "sha256sums_entry": "k3s-arm64", "signature": "SHA256SUMS.sig",
       "public_key": "/keys/release.pem", "keep": 2, "allow_downgrade": true, "checksum": true},
      {"name": "config", "kind": "sync", "source": "/etc-payload", "destination": "/etc/rancher/k3s",
       "version": "7", "version_scheme": "systemd"}
    ]})",
                                    k_path);
  CHECK(m.version == "v1.30.1+k3s1");
  REQUIRE(m.components.size() == 2);
  const auto& k3s = m.components[0];
  CHECK(k3s.name == "k3s");
  CHECK(k3s.kind == ComponentKind::file);
  CHECK(k3s.source == "/payload/bin/k3s");
  CHECK(k3s.sha256sums == "/payload/SHA256SUMS");
  CHECK(k3s.sha256sums_entry == "k3s-arm64");  // a name in the sums, not a path: never made relative
  CHECK(m.components[1].sha256sums_entry.empty());
  CHECK(k3s.signature == "/payload/SHA256SUMS.sig");
  CHECK(k3s.public_key == "/keys/release.pem");
  CHECK(k3s.keep == 2);
  CHECK(k3s.allow_downgrade == hoist::AllowDowngrade::yes);
  CHECK(k3s.compare == hoist::Compare::checksum);
  CHECK(k3s.version_scheme == hoist::VersionScheme::k3s);
  CHECK(k3s.payload_version == "v1.30.1+k3s1");
  CHECK(k3s.version_owner == hoist::VersionOwner::release);
  const auto& config = m.components[1];
  CHECK(config.source == "/etc-payload");
  CHECK(config.keep == hoist::k_default_keep);
  CHECK(config.allow_downgrade == hoist::AllowDowngrade::no);
  CHECK(config.version_scheme == hoist::VersionScheme::systemd);
  CHECK(config.payload_version == "7");
  CHECK(config.version_owner == hoist::VersionOwner::component);
}

TEST_CASE("a manifest without a version leaves it to --version and the SUC env", "[manifest]") {
  const Manifest m = parse_manifest(
      R"({"schema": 1, "components": [{"name": "app", "kind": "tree", "source": "a", "destination": "/opt/a"}]})",
      k_path);
  CHECK(m.version.empty());
  CHECK(m.components[0].payload_version.empty());
}

TEST_CASE("every manifest error names the file and the key path", "[manifest]") {
  const std::string prefix = "invalid manifest '/payload/hoist.json': ";
  CHECK(error_of("{") ==
        prefix +
            "parse error at line 1, column 2: syntax error while parsing object key - unexpected end of input; "
            "expected string literal");
  // A manifest path given a token by mistake: the position and the kind of error, never the bytes read.
  CHECK(error_of("hunter2-token") == prefix +
                                         "parse error at line 1, column 1: syntax error while parsing value - "
                                         "invalid literal");
  CHECK(error_of(R"({"a": 1, "a": 2})") == prefix + "$.a: duplicate key");
  CHECK(error_of("[]") == prefix + "$: expected an object");
  // A number past double's range is bad input too, not an internal error (found by fuzz/manifest.cpp).
  CHECK(error_of(R"({"schema": 1e400, "components": []})") == prefix + "a number is out of range");
  CHECK(error_of(R"({"components": []})") == prefix + "$.schema: missing");
  CHECK(error_of(R"({"schema": 2, "components": []})") == prefix + "$.schema: expected 1");
  CHECK(error_of(R"({"schema": "1", "components": []})") == prefix + "$.schema: expected 1");
  CHECK(error_of(R"({"schema": 1})") == prefix + "$.components: missing");
  CHECK(error_of(R"({"schema": 1, "components": {}})") == prefix + "$.components: expected an array");
  CHECK(error_of(R"({"schema": 1, "components": []})") == prefix + "$.components: expected at least one component");
  CHECK(error_of(R"({"schema": 1, "components": [], "extra": 1})") == prefix + "$.extra: unknown key");
  CHECK(error_of(R"({"schema": 1, "schema": 1, "components": []})") == prefix + "$.schema: duplicate key");
  CHECK(error_of(with_component(R"(, "name": "b")")) == prefix + "$.components[0].name: duplicate key");
  CHECK(error_of(with_component(R"(, "kinds": "tree")")) == prefix + "$.components[0].kinds: unknown key");
  CHECK(error_of(with_component(R"(, "keep": 0)")) ==
        prefix + "$.components[0].keep: expected an integer from 1 to 1000");
  CHECK(error_of(with_component(R"(, "keep": "3")")) ==
        prefix + "$.components[0].keep: expected an integer from 1 to 1000");
  CHECK(error_of(with_component(R"(, "allow_downgrade": "yes")")) ==
        prefix + "$.components[0].allow_downgrade: expected true or false");
  CHECK(error_of(with_component(R"(, "sha256sums": 5)")) == prefix + "$.components[0].sha256sums: expected a string");
  CHECK(error_of(with_component(R"(, "sha256sums": "")")) == prefix + "$.components[0].sha256sums: must not be empty");
  CHECK(error_of(with_component(R"(, "sha256sums_entry": "k3s")")) ==
        prefix + "$.components[0]: sha256sums entry 'k3s' names a line of SHA256SUMS: give --sha256sums too");
  CHECK(error_of(with_component(R"(, "sha256sums": "S", "sha256sums_entry": "a\nb")")) ==
        prefix +
            "$.components[0]: sha256sums entry of component 'app' must be one line of SHA256SUMS: it holds a "
            "line break or a NUL");
  // A signature without a key is no manifest error: the operator's --public-key may be the key.
  CHECK(error_of(with_component(R"(, "signature": "s.sig")")) ==
        prefix + "$.components[0]: a signature is checked over SHA256SUMS: give --sha256sums too");
  CHECK(error_of(R"({"schema": 1, "components": [{"name": "app"}]})") == prefix + "$.components[0].kind: missing");
  CHECK(error_of(R"({"schema": 1, "components": [{"name": "App", "kind": "tree"}]})") ==
        prefix +
            "$.components[0].name: invalid component name 'App': expected [a-z0-9][a-z0-9._-]*, at most 63 characters");
  CHECK(
      error_of(
          R"({"schema": 1, "components": [{"name": "a", "kind": "squashfs", "source": "s", "destination": "/d"}]})") ==
      prefix + "$.components[0].kind: invalid kind 'squashfs': expected tree, file, sysext or sync");
  CHECK(
      error_of(R"({"schema": 1, "components": [{"name": "a", "kind": "tree", "source": "s", "destination": "d"}]})") ==
      prefix + "$.components[0]: destination 'd' of component 'a' must be an absolute host path");
  CHECK(
      error_of(
          R"({"schema": 1, "components": [{"name": "a", "kind": "tree", "source": "s", "destination": "/x/../d"}]})") ==
      prefix + "$.components[0]: destination '/x/../d' of component 'a' must not have '.' or '..' components");
  CHECK(error_of(R"({"schema": 1, "version_scheme": "calver", "components": []})")
            .starts_with(prefix + "$.version_scheme: "));
  CHECK(error_of(R"({"schema": 1, "version": "v1.2", "components": []})").starts_with(prefix + "$.version: "));
  CHECK(error_of(with_component(R"(, "version": "current", "version_scheme": "systemd")")) ==
        prefix + "$.components[0].version: version 'current' cannot be used: hoist uses that name on the host");
}

TEST_CASE("a component name listed twice is refused, naming both places", "[manifest]") {
  const std::string text = R"({"schema": 1, "components": [
      {"name": "a", "kind": "tree", "source": "s", "destination": "/d1"},
      {"name": "b", "kind": "tree", "source": "s", "destination": "/d2"},
      {"name": "a", "kind": "file", "source": "s", "destination": "/d3"}]})";
  CHECK(error_of(text) ==
        "invalid manifest '/payload/hoist.json': $.components[2].name: component 'a' is listed "
        "twice (first at $.components[0].name)");
}

TEST_CASE("a duplicate key deep in an array is named with its index", "[manifest]") {
  const std::string text = R"({"schema": 1, "components": [
      {"name": "a", "kind": "tree", "source": "s", "destination": "/d1"},
      {"name": "b", "kind": "tree", "kind": "file", "source": "s", "destination": "/d2"}]})";
  CHECK(error_of(text) == "invalid manifest '/payload/hoist.json': $.components[1].kind: duplicate key");
}

TEST_CASE("an unreadable manifest is a usage error naming it", "[manifest]") {
  hoist::test::ScopedTempDir dir;
  try {
    hoist::load_manifest(dir / "missing.json");
    FAIL("no error");
  } catch (const UsageError& e) {
    CHECK(std::string(e.what()) ==
          "failed to open '" + (dir / "missing.json").string() + "': No such file or directory (--manifest)");
  }
}
