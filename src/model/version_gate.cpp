#include "hoist/model/version_gate.hpp"

#include <string>
#include <utility>

namespace hoist {

namespace {

// MAJOR and MINOR of a k3s version (its canonical text is `vMAJOR.MINOR.PATCH...`, checked by Version::parse).
std::pair<unsigned long, unsigned long> major_minor(const Version& version) {
  const std::string text = version.canonical();
  size_t end = 0;
  const unsigned long major = std::stoul(text.substr(1), &end);
  const unsigned long minor = std::stoul(text.substr(1 + end + 1));
  return {major, minor};
}

bool skips_a_minor(const Version& from, const Version& to) {
  const auto [from_major, from_minor] = major_minor(from);
  const auto [to_major, to_minor] = major_minor(to);
  return to_major != from_major || to_minor > from_minor + 1;
}

}  // namespace

Gate decide_gate(std::string_view component, const std::optional<Version>& installed, Integrity integrity,
                 const Version& target, AllowDowngrade allow_downgrade, AllowMinorSkip allow_minor_skip,
                 std::string_view installed_from) {
  const std::string name(component);
  if (!installed) {
    return {GateDecision::install, name + ": nothing installed -> " + target.text() + " (first install)"};
  }
  const std::string source = installed_from.empty() ? "" : " (" + std::string(installed_from) + ")";
  const std::string from = installed->text() + source + " -> " + target.text();
  const auto order = target <=> *installed;
  if (order == 0) {
    if (integrity == Integrity::intact) {
      return {GateDecision::unchanged, name + ": already at " + target.text() + source + ", nothing to do"};
    }
    return {GateDecision::repair, name + ": " + target.text() + " is installed but not intact, installing it again"};
  }
  if (order > 0) {
    if (target.scheme() == VersionScheme::k3s && allow_minor_skip == AllowMinorSkip::no &&
        skips_a_minor(*installed, target)) {
      return {GateDecision::refused, name + ": refusing to skip a minor version from " + installed->text() + source +
                                         " to " + target.text() +
                                         ": Kubernetes upgrades one minor version at a time (--allow-minor-skip "
                                         "allows it)"};
    }
    return {GateDecision::install, name + ": " + from + " (upgrade)"};
  }
  if (allow_downgrade == AllowDowngrade::yes) {
    return {GateDecision::downgrade, name + ": " + from + " (downgrade, allowed by --allow-downgrade)"};
  }
  return {GateDecision::refused, name + ": refusing to downgrade from " + installed->text() + source + " to " +
                                     target.text() + " (--allow-downgrade allows it)"};
}

}  // namespace hoist
