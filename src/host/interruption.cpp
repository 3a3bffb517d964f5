#include "hoist/host/interruption.hpp"

#include "hoist/sys/termination.hpp"

namespace hoist {

void throw_if_interrupted(std::string_view step) {
  if (termination::received() == 0) {
    return;
  }
  throw Interrupted("stopped by " + std::string(termination::received_name()) + " before " + std::string(step));
}

}  // namespace hoist
