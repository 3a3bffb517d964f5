#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "hoist/sys/base64.hpp"
#include "hoist/sys/tls_context.hpp"
#include "hoist/sys/yaml_document.hpp"

using nlohmann::json;

TEST_CASE("YAML maps to JSON with every scalar a string and plain null as null", "[yaml]") {
  auto doc = hoist::parse_yaml("a: 1\nb: [x, 'y', \"z\"]\nc:\nd: ~\ne: 'null'\nf: {g: no}\n# comment\n", "t");
  REQUIRE(doc.has_value());
  CHECK(*doc == json::parse(R"({"a": "1", "b": ["x", "y", "z"], "c": null, "d": null, "e": "null",
                                "f": {"g": "no"}})"));
}

TEST_CASE("a YAML error names the source, line and column", "[yaml]") {
  const auto doc = hoist::parse_yaml("a: 1\nb: [\n", "conf");
  REQUIRE_FALSE(doc.has_value());
  CHECK_THAT(doc.error().message, Catch::StartsWith("failed to parse 'conf' line 3 column 1: "));
}

TEST_CASE("JSON is YAML too", "[yaml]") {
  auto doc = hoist::parse_yaml(R"({"clusters": [{"name": "a"}]})", "t");
  REQUIRE(doc.has_value());
  CHECK((*doc)["clusters"][0]["name"] == "a");
}

TEST_CASE("YAML anchors, aliases and duplicate keys are refused with their line and column", "[yaml]") {
  const auto anchor = hoist::parse_yaml("a: 1\nb: &x [1, 2]\nc: *x\n", "conf");
  REQUIRE_FALSE(anchor.has_value());
  CHECK(anchor.error().message ==
        "failed to parse 'conf' line 2 column 4: an anchor (&name): kubeconfigs have none, refused");
  const auto alias = hoist::parse_yaml("a: 1\nc: [*x]\n", "conf");
  REQUIRE_FALSE(alias.has_value());
  CHECK(alias.error().message ==
        "failed to parse 'conf' line 2 column 5: an alias (*name): kubeconfigs have none, refused");
  const auto alias_key = hoist::parse_yaml("a: 1\n*x : 2\n", "conf");
  REQUIRE_FALSE(alias_key.has_value());
  CHECK(alias_key.error().message ==
        "failed to parse 'conf' line 2 column 1: an alias (*name): kubeconfigs have none, refused");
  const auto duplicate = hoist::parse_yaml("a: 1\nb:\n  c: 1\n  c: 2\n", "conf");
  REQUIRE_FALSE(duplicate.has_value());
  CHECK(duplicate.error().message == "failed to parse 'conf' line 4 column 3: duplicate key");
  const auto complex_key = hoist::parse_yaml("? [a]\n: 1\n", "conf");
  REQUIRE_FALSE(complex_key.has_value());
  CHECK(complex_key.error().message == "failed to parse 'conf' line 1 column 3: a mapping key is not a string");
}

TEST_CASE("an empty YAML text is null and only the first document is read", "[yaml]") {
  CHECK(hoist::parse_yaml("", "t").value().is_null());
  CHECK(hoist::parse_yaml("a: 1\n---\nb: 2\n", "t").value() == json::parse(R"({"a": "1"})"));
}

TEST_CASE("YAML 1.1 booleans are read as go-yaml v2 (kubectl) reads a plain scalar", "[yaml]") {
  for (const char* word : {"y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"}) {
    CHECK(hoist::yaml_true(word));
    CHECK_FALSE(hoist::yaml_false(word));
  }
  for (const char* word : {"n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"}) {
    CHECK(hoist::yaml_false(word));
    CHECK_FALSE(hoist::yaml_true(word));
  }
  for (const char* word : {"", "1", "0", "yES", "tRUE", "enabled", "t"}) {
    CHECK_FALSE(hoist::yaml_true(word));
    CHECK_FALSE(hoist::yaml_false(word));
  }
}

TEST_CASE("base64 decoding drops padding and whitespace and refuses garbage", "[base64]") {
  CHECK(hoist::base64_decode("aG9p\nc3Q=", "x").value() == "hoist");
  CHECK(hoist::base64_decode("aG9pc3Qh", "x").value() == "hoist!");
  CHECK(hoist::base64_decode("aA==", "x").value() == "h");
  const auto bad = hoist::base64_decode("a$==", "the CA data");
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.error().message == "failed to decode the CA data: not valid base64");
}

TEST_CASE("a TLS context refuses to be built without a CA", "[tls]") {
  const auto none = hoist::TlsContext::create({}, "'ca.crt'");
  REQUIRE_FALSE(none.has_value());
  CHECK(none.error().message ==
        "no CA certificate configured in 'ca.crt': hoist always verifies the API server's certificate");
  const auto garbage = hoist::TlsContext::create({"not a certificate", "", ""}, "'ca.crt'");
  REQUIRE_FALSE(garbage.has_value());
  CHECK(garbage.error().message == "failed to read a CA certificate from 'ca.crt': no PEM certificate found");
}
