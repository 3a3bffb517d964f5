#include <set>
#include <string>
#include <utility>
#include <vector>

#include "hoist/run/upgrade_run.hpp"
#include "hoist/util/error.hpp"
#include "hoist/util/text.hpp"
#include "hoist/verify/sysext_image.hpp"

namespace hoist {

UpgradeItem resolve_item(ComponentSpec spec, const VersionSources& sources) {
  validate_spec(spec);
  Version target = agree_on_version(spec.version_scheme, sources, spec.name);
  Payload payload = Payload::open(spec.source);
  const PayloadType type = payload.type();
  if (spec.kind == ComponentKind::file && type == PayloadType::directory) {
    throw UsageError("the file kind needs a file as its source; '" + spec.source.string() + "' is a directory");
  }
  if (spec.kind == ComponentKind::tree && type == PayloadType::file && !payload.unsupported_compression().empty()) {
    // libarchive would run the decompressor found on PATH: hoist never runs a program for a payload.
    throw UsageError("the tree kind needs a directory or an archive as its source; " + in_quotes(spec.source.string()) +
                     " is compressed with " + payload.unsupported_compression() +
                     ", which hoist does not read (it runs no external decompressor)");
  }
  if (spec.kind == ComponentKind::tree && type == PayloadType::file) {
    // A compressed archive damaged before its first entry is not "a file": say what is wrong with it.
    if (const std::optional<std::string> problem = payload.compression_problem()) {
      throw Error(ExitCode::verification, "refusing archive " + in_quotes(spec.source.string()) + ": " + *problem);
    }
    throw UsageError("the tree kind needs a directory or an archive as its source; '" + spec.source.string() +
                     "' is neither");
  }
  if (spec.kind == ComponentKind::sync && type != PayloadType::directory) {
    throw UsageError("the sync kind needs a directory as its source; '" + spec.source.string() + "' is not one");
  }
  if (spec.kind == ComponentKind::sysext) {
    // A squashfs/erofs image or a directory, and a destination named to match.
    sysext_image_name(spec.destination, detect_sysext_image(payload));
  }
  std::vector<HealthCheck> checks;
  for (const std::string& text : spec.health_checks) {
    checks.push_back(parse_health_check(text));
  }
  return UpgradeItem{std::move(spec), std::move(target), std::move(payload), std::move(checks)};
}

namespace {

bool is_inside(const std::string& path, const std::string& dir) {
  return path.size() > dir.size() && path.starts_with(dir) && (dir == "/" || path[dir.size()] == '/');
}

// The destination as the host resolves it. A file or sysext destination is a link that hoist itself points at
// the installed version: its own target is not where the component lives, its parent directory's is.
std::string resolved_destination(const HostRoot& root, const ComponentSpec& spec) {
  const Follow follow =
      spec.kind == ComponentKind::file || spec.kind == ComponentKind::sysext ? Follow::no : Follow::yes;
  auto resolved = root.resolve(normal_destination(spec.destination), follow);
  if (!resolved) {
    throw UsageError("cannot use the destination " + in_quotes(spec.destination) + " of component '" + spec.name +
                     "': " + resolved.error().message);
  }
  if (*resolved == "/") {
    throw UsageError("destination " + in_quotes(spec.destination) + " of component '" + spec.name +
                     "' resolves to the host's root '/' through a host symlink");
  }
  return *resolved;
}

// How a destination is named in a refusal: as given, and where the host's symlinks take it when that differs.
std::string shown(const UpgradeItem& item, const std::string& resolved) {
  const std::string& given = item.spec.destination;
  return normal_destination(given) == resolved ? "'" + given + "'"
                                               : "'" + given + "' (on the host: '" + resolved + "')";
}

}  // namespace

// Components of one run must not share or nest destinations: a sync of /usr/local/bin
// would delete the link that a file component put at /usr/local/bin/k3s. Compared as
// the host resolves them: with /srv/b -> /opt/a, /srv/b/x is inside /opt/a.
void check_distinct(const std::vector<UpgradeItem>& items, const HostRoot& root) {
  std::set<std::string> names;
  std::vector<std::pair<std::string, const UpgradeItem*>> destinations;
  for (const auto& item : items) {
    if (!names.insert(item.spec.name).second) {
      throw UsageError("component '" + item.spec.name + "' is given twice");
    }
    const std::string resolved = resolved_destination(root, item.spec);
    for (const auto& [other, other_item] : destinations) {
      if (other == resolved) {
        const std::string normal = normal_destination(item.spec.destination);
        throw UsageError("components '" + other_item->spec.name + "' and '" + item.spec.name +
                         "' have the same destination " +
                         (normal == normal_destination(other_item->spec.destination)
                              ? shown(item, resolved)
                              : shown(*other_item, other) + " and " + shown(item, resolved)));
      }
      const bool inner_is_new = is_inside(resolved, other);
      if (inner_is_new || is_inside(other, resolved)) {
        const UpgradeItem& inner = inner_is_new ? item : *other_item;
        const UpgradeItem& outer = inner_is_new ? *other_item : item;
        throw UsageError("components '" + inner.spec.name + "' and '" + outer.spec.name +
                         "' overlap: " + shown(inner, inner_is_new ? resolved : other) + " is inside " +
                         shown(outer, inner_is_new ? other : resolved));
      }
    }
    destinations.emplace_back(resolved, &item);
  }
}

}  // namespace hoist
