#pragma once

#include <memory>

#include "command.hpp"

namespace hoist::cli {

/// `hoist upgrade`: verify, stage and switch components to a new version; its progress display follows `log`.
std::unique_ptr<Command> make_upgrade_command(const LogOptions& log);
/// `hoist stage`: what `upgrade` decides, verifies and stages, without the switch (a Plan's prepare step).
std::unique_ptr<Command> make_stage_command(const LogOptions& log);
/// `hoist rollback`: switch a component back to its previous or a kept version.
std::unique_ptr<Command> make_rollback_command();
/// `hoist status`: what is installed on the host.
std::unique_ptr<Command> make_status_command();
/// `hoist version`: hoist's version and the versions of the libraries it links.
std::unique_ptr<Command> make_version_command();

}  // namespace hoist::cli
