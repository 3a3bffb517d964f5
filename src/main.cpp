#include "hoist/cli/app.hpp"

int main(int argc, char** argv) {
  return hoist::cli::main(argc, argv);
}
