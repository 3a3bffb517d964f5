#include "hoist/model/component.hpp"

#include <algorithm>
#include <array>
#include <optional>
#include <vector>

#include "hoist/model/state.hpp"
#include "hoist/util/error.hpp"
#include "hoist/util/text.hpp"

namespace hoist {

namespace {

std::string prefixed(std::string_view where, const std::string& message) {
  return where.empty() ? message : std::string(where) + ": " + message;
}

// SUC's munging of the Plan's version (job.go): every '+' becomes '-'.
std::string munged(std::string text) {
  std::replace(text.begin(), text.end(), '+', '-');
  return text;
}

// The directories systemd-sysext (252) looks for extensions in, and only directly in: an image anywhere else is
// linked, "refreshed" and never merged.
constexpr std::array<std::string_view, 5> k_sysext_directories = {
    "/etc/extensions", "/run/extensions", "/var/lib/extensions", "/usr/lib/extensions", "/usr/local/lib/extensions"};

void check_sysext_directory(const ComponentSpec& spec, std::string_view where) {
  const std::filesystem::path normal = std::filesystem::path(spec.destination).lexically_normal();
  const std::string parent = (normal.has_filename() ? normal : normal.parent_path()).parent_path().string();
  if (std::find(k_sysext_directories.begin(), k_sysext_directories.end(), parent) != k_sysext_directories.end()) {
    return;
  }
  std::string directories;
  for (const auto directory : k_sysext_directories) {
    directories += (directories.empty() ? "" : ", ") + std::string(directory);
  }
  throw UsageError(prefixed(where, "destination '" + escaped(spec.destination) + "' of component '" + spec.name +
                                       "' is not directly in a directory systemd-sysext reads (" + directories +
                                       "): it would never be merged"));
}

}  // namespace

ComponentKind parse_component_kind(std::string_view name) {
  if (name == "tree") {
    return ComponentKind::tree;
  }
  if (name == "file") {
    return ComponentKind::file;
  }
  if (name == "sync") {
    return ComponentKind::sync;
  }
  if (name == "sysext") {
    return ComponentKind::sysext;
  }
  throw UsageError("invalid kind '" + std::string(name) + "': expected tree, file, sysext or sync");
}

std::string_view to_string(ComponentKind kind) {
  switch (kind) {
    case ComponentKind::tree: return "tree";
    case ComponentKind::file: return "file";
    case ComponentKind::sync: return "sync";
    case ComponentKind::sysext: return "sysext";
  }
  return "?";
}

InstalledVersionFrom parse_installed_version_from(std::string_view text) {
  const std::string shown = "'" + escaped(text) + "'";
  if (has_control_character(text)) {
    throw UsageError("invalid installed-version source " + shown + ": it contains control characters");
  }
  InstalledVersionFrom from;
  from.text = std::string(text);
  if (text == "node") {
    from.node = true;
    return from;
  }
  constexpr std::string_view k_exec = "exec:";
  if (!text.starts_with(k_exec)) {
    throw UsageError("invalid installed-version source " + shown +
                     ": expected exec:ARGS (the destination's file run with ARGS, e.g. exec:--version) or node (the "
                     "kubeletVersion of the Node this Job runs on)");
  }
  std::string_view args = text.substr(k_exec.size());
  while (!args.empty()) {
    const size_t space = args.find(' ');
    if (space != 0) {
      from.exec_args.emplace_back(args.substr(0, space));
    }
    args = space == std::string_view::npos ? std::string_view() : args.substr(space + 1);
  }
  if (from.exec_args.empty()) {
    // Run without arguments, k3s would start a server: the arguments that make it print its version are needed.
    throw UsageError("invalid installed-version source " + shown +
                     ": exec: needs the arguments that make the program print its version (e.g. exec:--version)");
  }
  return from;
}

std::optional<Version> first_version_in(std::string_view output, VersionScheme scheme) {
  size_t at = 0;
  while (at < output.size()) {
    const size_t start = output.find_first_not_of(" \t\r\n", at);
    if (start == std::string_view::npos) {
      break;
    }
    const size_t end = std::min(output.find_first_of(" \t\r\n", start), output.size());
    try {
      return Version::parse(scheme, output.substr(start, end - start));
    } catch (const UsageError&) {
      at = end;
    }
  }
  return std::nullopt;
}

void apply_trust_policy(ComponentSpec& spec, const TrustPolicy& policy, std::string_view where) {
  if (!policy.public_key.empty()) {
    spec.public_key = policy.public_key;
  }
  if (!spec.signature.empty() && spec.public_key.empty()) {
    throw UsageError(prefixed(where, "a signature needs a public key to check it with (--public-key)"));
  }
  if (!policy.demands_signature()) {
    return;
  }
  const std::string asked = policy.public_key.empty() ? "--require-signature" : "--public-key";
  const std::string component = "component '" + spec.name + "'";
  if (spec.sha256sums.empty() || spec.signature.empty()) {
    throw Error(ExitCode::verification,
                prefixed(where, component + " has no signed SHA256SUMS, and " + asked +
                                    " requires one: a payload cannot turn off the signature check"));
  }
}

void validate_component_name(std::string_view name) {
  auto valid_char = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
  };
  const bool ok = !name.empty() && name.size() <= 63 && valid_char(name.front()) && name.front() != '.' &&
                  name.front() != '_' && name.front() != '-' && std::all_of(name.begin(), name.end(), valid_char);
  if (!ok) {
    throw UsageError("invalid component name '" + std::string(name) +
                     "': expected [a-z0-9][a-z0-9._-]*, at most 63 characters");
  }
}

std::string normal_destination(const std::string& destination) {
  std::string normal = std::filesystem::path(destination).lexically_normal().string();
  while (normal.size() > 1 && normal.back() == '/') {
    normal.pop_back();
  }
  return normal;
}

void validate_spec(const ComponentSpec& spec, std::string_view where) {
  try {
    validate_component_name(spec.name);
  } catch (const UsageError& e) {
    throw UsageError(prefixed(where, e.what()));
  }
  if (spec.source.empty()) {
    throw UsageError(prefixed(where, "no source for component '" + spec.name + "'"));
  }
  const std::string& dest = spec.destination;
  // Checked first: a NUL would cut the path short at the first system call, and a newline or an escape would
  // forge the log lines that quote it.
  if (has_control_character(dest)) {
    throw UsageError(prefixed(where, "destination " + in_quotes(dest) + " of component '" + spec.name +
                                         "' must not contain control characters"));
  }
  if (dest.empty() || dest.front() != '/') {
    throw UsageError(
        prefixed(where, "destination '" + dest + "' of component '" + spec.name + "' must be an absolute host path"));
  }
  for (const auto& part : std::filesystem::path(dest)) {
    if (part == "." || part == "..") {
      throw UsageError(prefixed(
          where, "destination '" + dest + "' of component '" + spec.name + "' must not have '.' or '..' components"));
    }
  }
  if (std::filesystem::path(dest).relative_path().empty()) {
    throw UsageError(prefixed(where, "destination of component '" + spec.name + "' must not be '/'"));
  }
  if (spec.kind == ComponentKind::sysext) {
    check_sysext_directory(spec, where);
  }
  if (spec.keep < 1) {
    throw UsageError(prefixed(where, "keep must be at least 1 for component '" + spec.name + "'"));
  }
  // A signature without a key is checked in apply_trust_policy(): the operator's --public-key may supply it.
  if (!spec.public_key.empty() && spec.signature.empty()) {
    throw UsageError(prefixed(where, "a public key needs a signature to check (--signature)"));
  }
  if (!spec.signature.empty() && spec.sha256sums.empty()) {
    throw UsageError(prefixed(where, "a signature is checked over SHA256SUMS: give --sha256sums too"));
  }
  if (!spec.sha256sums_entry.empty() && spec.sha256sums.empty()) {
    throw UsageError(prefixed(
        where, "sha256sums entry '" + spec.sha256sums_entry + "' names a line of SHA256SUMS: give --sha256sums too"));
  }
  if (spec.sha256sums_entry.find_first_of(std::string_view("\n\r\0", 3)) != std::string::npos) {
    throw UsageError(prefixed(where, "sha256sums entry of component '" + spec.name +
                                         "' must be one line of SHA256SUMS: it holds a line break or a NUL"));
  }
  if (!spec.payload_version.empty()) {
    Version::parse(spec.version_scheme, spec.payload_version);
  }
}

std::string sums_entry_name(const ComponentSpec& spec, const std::filesystem::path& payload) {
  return spec.sha256sums_entry.empty() ? payload.filename().string() : spec.sha256sums_entry;
}

void validate_version_name(std::string_view version) {
  if (version == "current" || version == "previous" || version == "state.json" || version == k_pre_hoist_version ||
      version.starts_with('.')) {
    throw UsageError("version '" + std::string(version) + "' cannot be used: hoist uses that name on the host");
  }
}

Version agree_on_version(VersionScheme scheme, const VersionSources& sources, std::string_view component) {
  struct Source {
    const char* what;
    std::optional<Version> version;
  };
  std::vector<Source> given;
  auto add = [&](const char* what, const std::string& text) {
    if (text.empty()) {
      return;
    }
    try {
      given.push_back({what, Version::parse(scheme, text)});
    } catch (const UsageError& e) {
      throw UsageError(std::string(e.what()) + " (" + what + ")");
    }
  };
  add("the payload's manifest", sources.payload);
  add("--version", sources.flag);
  add("SYSTEM_UPGRADE_PLAN_LATEST_VERSION", sources.env);
  if (given.empty()) {
    throw UsageError("no version for component '" + std::string(component) +
                     "': give --version, or run from a SUC Plan (SYSTEM_UPGRADE_PLAN_LATEST_VERSION)");
  }
  const bool env_given = !sources.env.empty();
  for (size_t i = 0; i < given.size(); ++i) {
    for (size_t j = i + 1; j < given.size(); ++j) {
      const Version& a = *given[i].version;
      const Version& b = *given[j].version;
      const bool b_is_env = env_given && j + 1 == given.size();
      const bool agree =
          a == b || (b_is_env && munged(a.canonical()) == b.text()) || (b_is_env && munged(a.text()) == b.text());
      if (!agree) {
        throw UsageError("versions disagree for component '" + std::string(component) + "': '" + a.text() + "' from " +
                         given[i].what + " but '" + b.text() + "' from " + given[j].what);
      }
    }
  }
  const Version& chosen = *given.front().version;
  Version result = Version::parse(scheme, chosen.canonical());
  validate_version_name(result.text());
  return result;
}

VersionSources version_sources(const ComponentSpec& spec, const std::string& flag, const std::string& env) {
  if (spec.version_owner == VersionOwner::component) {
    return VersionSources{.flag = "", .env = "", .payload = spec.payload_version};
  }
  return VersionSources{.flag = flag, .env = env, .payload = spec.payload_version};
}

}  // namespace hoist
