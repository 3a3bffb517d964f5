#pragma once

#include <memory>

#include "hoist/cli/command.hpp"

namespace hoist::cli {

/// `hoist status`: what is installed on the host.
std::unique_ptr<Command> make_status_command();
/// `hoist version`: hoist's version and the versions of the libraries it links.
std::unique_ptr<Command> make_version_command();

}  // namespace hoist::cli
