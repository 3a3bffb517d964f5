#pragma once

namespace hoist::cli {

/// The whole program: parses the command line, sets up logging and the
/// context, runs one command, and maps every error to its exit code (ARCHITECTURE.md, "Error tiers").
/// The one place where errors are logged.
int main(int argc, char** argv);

}  // namespace hoist::cli
