#include "hoist/model/manifest.hpp"

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "hoist/model/input_file.hpp"
#include "hoist/model/state.hpp"
#include "hoist/util/error.hpp"
#include "hoist/util/text.hpp"
#include "strict_json.hpp"

namespace hoist {

using nlohmann::json;

namespace {

// Manifests are small; a bigger file is a mistake, not a manifest.
constexpr size_t k_max_manifest_bytes = 1U << 20U;

// Typed, strict access to one JSON object at a key path.
class ObjectReader {
 public:
  ObjectReader(const json& object, std::string path, const std::string& file, InputQuoting quoting,
               std::set<std::string> known)
      : m_object(object), m_path(std::move(path)), m_file(file), m_quoting(quoting) {
    if (!m_object.is_object()) {
      fail(m_path, "expected an object");
    }
    for (const auto& [key, value] : m_object.items()) {
      if (!known.contains(key)) {
        // A key is text of the file as much as a value is.
        if (m_quoting == InputQuoting::none) {
          fail(m_path, "an unknown key " + value_not_shown(m_file));
        }
        fail(m_path + "." + escaped(key), "unknown key");
      }
    }
  }

  [[nodiscard]] InputQuoting quoting() const { return m_quoting; }

  [[nodiscard]] bool has(const char* key) const { return m_object.contains(key); }

  [[nodiscard]] std::string string(const char* key, bool required) const {
    const json* value = find(key, required);
    if (value == nullptr) {
      return {};
    }
    if (!value->is_string()) {
      fail(at(key), "expected a string");
    }
    auto text = value->get<std::string>();
    if (text.empty()) {
      fail(at(key), "must not be empty");
    }
    // JSON may spell a NUL (\u0000); a C string would end there, so "/etc\u0000/app" would name /etc.
    if (text.find('\0') != std::string::npos) {
      fail(at(key), "must not contain a NUL character");
    }
    return text;
  }

  [[nodiscard]] bool boolean(const char* key) const {
    const json* value = find(key, false);
    if (value == nullptr) {
      return false;
    }
    if (!value->is_boolean()) {
      fail(at(key), "expected true or false");
    }
    return value->get<bool>();
  }

  [[nodiscard]] std::optional<unsigned> positive(const char* key) const {
    const json* value = find(key, false);
    if (value == nullptr) {
      return std::nullopt;
    }
    if (!value->is_number_unsigned() || value->get<uint64_t>() < 1 || value->get<uint64_t>() > 1000) {
      fail(at(key), "expected an integer from 1 to 1000");
    }
    return value->get<unsigned>();
  }

  /// An optional array of strings, each as string() takes one.
  [[nodiscard]] std::vector<std::string> strings(const char* key) const {
    const json* value = find(key, false);
    if (value == nullptr) {
      return {};
    }
    if (!value->is_array()) {
      fail(at(key), "expected an array of strings");
    }
    std::vector<std::string> texts;
    for (size_t i = 0; i < value->size(); ++i) {
      const std::string where = at(key) + "[" + std::to_string(i) + "]";
      const json& item = (*value)[i];
      if (!item.is_string() || item.get<std::string>().empty()) {
        fail(where, "expected a string that is not empty");
      }
      if (has_control_character(item.get<std::string>())) {
        fail(where, "must not contain a control character");
      }
      texts.push_back(item.get<std::string>());
    }
    return texts;
  }
  [[nodiscard]] const json& array(const char* key) const {
    const json* value = find(key, true);
    if (!value->is_array()) {
      fail(at(key), "expected an array");
    }
    return *value;
  }

  [[nodiscard]] std::string at(const char* key) const { return m_path + "." + key; }

  [[noreturn]] void fail(const std::string& path, const std::string& why) const {
    throw UsageError("invalid manifest '" + m_file + "': " + path + ": " + why);
  }

  /// fail() with what a parser of the value at `path` said, which quotes the value: only where it may.
  [[noreturn]] void refuse_value(const std::string& path, const UsageError& e) const {
    fail(path, m_quoting == InputQuoting::none ? "not a valid value " + value_not_shown(m_file) : e.what());
  }

 private:
  [[nodiscard]] const json* find(const char* key, bool required) const {
    const auto it = m_object.find(key);
    if (it == m_object.end()) {
      if (required) {
        fail(at(key), "missing");
      }
      return nullptr;
    }
    return &*it;
  }

  const json& m_object;
  std::string m_path;
  const std::string& m_file;
  InputQuoting m_quoting;
};

// Runs `parse` on a value and reports its UsageError at `path`.
template <typename F>
auto parse_at(const ObjectReader& reader, const std::string& path, F&& parse) {
  try {
    return parse();
  } catch (const UsageError& e) {
    reader.refuse_value(path, e);
  }
}

std::filesystem::path container_path(const std::filesystem::path& base, const std::string& text) {
  if (text.empty()) {
    return {};
  }
  const std::filesystem::path path(text);
  return path.is_absolute() ? path : base / path;
}

}  // namespace

Manifest parse_manifest(std::string_view text, const std::filesystem::path& path, InputQuoting quoting) {
  const std::string file = path.string();
  auto parsed = parse_strict_json(text);
  if (!parsed) {
    throw UsageError("invalid manifest '" + file + "': " + parsed.error().message);
  }
  const json document = std::move(*parsed);

  const ObjectReader top(document, "$", file, quoting,
                         {"schema", "version", "version_scheme", "components", "health_checks"});
  const auto schema = document.find("schema");
  if (schema == document.end()) {
    top.fail("$.schema", "missing");
  }
  if (!schema->is_number_integer() || schema->get<int64_t>() != k_manifest_schema) {
    top.fail("$.schema", "expected " + std::to_string(k_manifest_schema));
  }

  Manifest manifest;
  manifest.quoting = quoting;
  if (top.has("version_scheme")) {
    const std::string name = top.string("version_scheme", true);
    manifest.version_scheme = parse_at(top, "$.version_scheme", [&] { return parse_version_scheme(name); });
  }
  manifest.version = top.string("version", false);
  manifest.health_checks = top.strings("health_checks");
  if (!manifest.version.empty()) {
    parse_at(top, "$.version",
             [&] { return Version::parse(manifest.version_scheme.value_or(VersionScheme::semver), manifest.version); });
  }

  const json& components = top.array("components");
  if (components.empty()) {
    top.fail("$.components", "expected at least one component");
  }
  const std::filesystem::path base = path.parent_path();
  std::map<std::string, std::string> first_seen;
  for (size_t i = 0; i < components.size(); ++i) {
    const std::string where = "$.components[" + std::to_string(i) + "]";
    const ObjectReader entry(components[i], where, file, quoting,
                             {"name", "kind", "source", "destination", "version", "version_scheme", "allow_downgrade",
                              "keep", "checksum", "sha256sums", "sha256sums_entry", "signature", "public_key",
                              "remount", "installed_version_from", "allow_minor_skip", "health_checks"});
    ComponentSpec spec;
    spec.name = entry.string("name", true);
    parse_at(entry, entry.at("name"), [&] {
      validate_component_name(spec.name);
      return 0;
    });
    if (const auto [it, inserted] = first_seen.emplace(spec.name, entry.at("name")); !inserted) {
      entry.fail(entry.at("name"), (quoting == InputQuoting::none ? "the component" : "component '" + spec.name + "'") +
                                       " is listed twice (first at " + it->second + ")");
    }
    const std::string kind = entry.string("kind", true);
    spec.kind = parse_at(entry, entry.at("kind"), [&] { return parse_component_kind(kind); });
    spec.source = container_path(base, entry.string("source", true));
    spec.destination = entry.string("destination", true);
    spec.version_scheme = manifest.version_scheme.value_or(VersionScheme::semver);
    if (entry.has("version_scheme")) {
      const std::string name = entry.string("version_scheme", true);
      spec.version_scheme = parse_at(entry, entry.at("version_scheme"), [&] { return parse_version_scheme(name); });
    }
    const std::string own = entry.string("version", false);
    spec.version_owner = own.empty() ? VersionOwner::release : VersionOwner::component;
    spec.payload_version = own.empty() ? manifest.version : own;
    if (!spec.payload_version.empty()) {
      parse_at(entry, own.empty() ? std::string("$.version") : entry.at("version"), [&] {
        validate_version_name(spec.payload_version);
        return Version::parse(spec.version_scheme, spec.payload_version);
      });
    }
    spec.allow_downgrade = entry.boolean("allow_downgrade") ? AllowDowngrade::yes : AllowDowngrade::no;
    spec.allow_minor_skip = entry.boolean("allow_minor_skip") ? AllowMinorSkip::yes : AllowMinorSkip::no;
    if (const std::string from = entry.string("installed_version_from", false); !from.empty()) {
      spec.installed_version_from =
          parse_at(entry, entry.at("installed_version_from"), [&] { return parse_installed_version_from(from); });
    }
    spec.health_checks = entry.strings("health_checks");
    spec.keep = entry.positive("keep").value_or(k_default_keep);
    spec.compare = entry.boolean("checksum") ? Compare::checksum : Compare::content;
    spec.remount = entry.boolean("remount") ? Remount::yes : Remount::no;  // a host step: --remount for one
    spec.sha256sums = container_path(base, entry.string("sha256sums", false));
    spec.sha256sums_entry = entry.string("sha256sums_entry", false);
    spec.signature = container_path(base, entry.string("signature", false));
    spec.public_key = container_path(base, entry.string("public_key", false));
    parse_at(entry, where, [&] {
      validate_spec(spec);
      return 0;
    });
    manifest.components.push_back(std::move(spec));
  }
  return manifest;
}

Manifest load_manifest(const std::filesystem::path& path) {
  return parse_manifest(read_input_file(path, k_max_manifest_bytes, "--manifest"), path, quoting_for(path));
}

}  // namespace hoist
