#pragma once

#include <optional>

namespace hoist::cli {

/// The whole program: parses the command line, sets up logging and the
/// context, runs one command, and maps every error to its exit code (ARCHITECTURE.md, "Error tiers").
/// The one place where errors are logged.
int main(int argc, char** argv);

/// The first half of main(): the command line checked and parsed as main() does it, nothing run. std::nullopt
/// when main() would go on to run a command; else the exit code it returns (help or version printed: 0; a
/// refused command line, reported on stderr: 2). For the option-parsing fuzz target.
std::optional<int> parse_command_line(int argc, char** argv);

}  // namespace hoist::cli
