#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "hoist/sys/base64.hpp"
#include "hoist/kube/tls_context.hpp"
#include "hoist/kube/yaml_document.hpp"

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
