#pragma once

#include <memory>

#include "command.hpp"

namespace hoist::cli {

/// `hoist prepare PLAN`: waits until another Plan is complete, for the `prepare`
/// step of a Plan that must run after it (an agent Plan after the server Plan).
std::unique_ptr<Command> make_prepare_command();

}  // namespace hoist::cli
