#pragma once

#include "hoist/install/installer.hpp"
#include "hoist/model/state.hpp"

namespace hoist {

/// Makes `state` say what the host's commit points say is current (reconcile_with_host() with
/// Installer::host_current()), and logs what a killed run left when they disagreed. Writes nothing: the
/// caller saves the state when this returns true (it changed).
bool agree_with_host(Installer& installer, ComponentState& state);

}  // namespace hoist
