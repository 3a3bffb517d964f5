#include "hoist/model/version_gate.hpp"

namespace hoist {

Gate decide_gate(std::string_view component, const std::optional<Version>& installed, Integrity integrity,
                 const Version& target, AllowDowngrade allow_downgrade) {
  const std::string name(component);
  if (!installed) {
    return {GateDecision::install, name + ": nothing installed -> " + target.text() + " (first install)"};
  }
  const std::string from = installed->text() + " -> " + target.text();
  const auto order = target <=> *installed;
  if (order == 0) {
    if (integrity == Integrity::intact) {
      return {GateDecision::unchanged, name + ": already at " + target.text() + ", nothing to do"};
    }
    return {GateDecision::repair, name + ": " + target.text() + " is installed but not intact, installing it again"};
  }
  if (order > 0) {
    return {GateDecision::install, name + ": " + from + " (upgrade)"};
  }
  if (allow_downgrade == AllowDowngrade::yes) {
    return {GateDecision::downgrade, name + ": " + from + " (downgrade, allowed by --allow-downgrade)"};
  }
  return {GateDecision::refused, name + ": refusing to downgrade from " + installed->text() + " to " + target.text() +
                                     " (--allow-downgrade allows it)"};
}

}  // namespace hoist
