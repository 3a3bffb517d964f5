#include "hoist/host/host_actions.hpp"

#include "hoist/util/error.hpp"

namespace hoist {

RebootPolicy parse_reboot_policy(std::string_view text) {
  if (text == "never") {
    return RebootPolicy::never;
  }
  if (text == "if-needed") {
    return RebootPolicy::if_needed;
  }
  if (text == "always") {
    return RebootPolicy::always;
  }
  if (text == "delegate") {
    return RebootPolicy::delegate;
  }
  throw UsageError("invalid reboot policy '" + std::string(text) + "': expected never, if-needed, always or delegate");
}

std::string_view to_string(RebootPolicy policy) {
  switch (policy) {
    case RebootPolicy::never: return "never";
    case RebootPolicy::if_needed: return "if-needed";
    case RebootPolicy::always: return "always";
    case RebootPolicy::delegate: return "delegate";
  }
  return "?";
}

std::string unit_name(std::string_view text) {
  const bool valid = !text.empty() && text.size() <= 255 && text.front() != '.' &&
                     text.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789:_.\\@-") ==
                         std::string_view::npos;
  if (!valid) {
    throw UsageError("invalid unit name '" + std::string(text) + "'");
  }
  // systemctl's mangling: a name without a type is a service.
  return text.find('.') == std::string_view::npos ? std::string(text) + ".service" : std::string(text);
}

}  // namespace hoist
