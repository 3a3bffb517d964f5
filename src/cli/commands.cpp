#include "commands.hpp"
#include "prepare_command.hpp"

namespace hoist::cli {

std::vector<std::unique_ptr<Command>> make_commands(const LogOptions& log) {
  std::vector<std::unique_ptr<Command>> commands;
  commands.push_back(make_upgrade_command(log));
  commands.push_back(make_stage_command(log));
  commands.push_back(make_rollback_command());
  commands.push_back(make_prepare_command());
  commands.push_back(make_status_command());
  commands.push_back(make_version_command());
  return commands;
}

}  // namespace hoist::cli
