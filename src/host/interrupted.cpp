#include "hoist/host/interrupted.hpp"

#include "hoist/sys/stop_signals.hpp"

namespace hoist {

void throw_if_interrupted(std::string_view step) {
  if (stop_signals::received() == 0) {
    return;
  }
  throw Interrupted("stopped by " + std::string(stop_signals::received_name()) + " before " + std::string(step));
}

}  // namespace hoist
