#include "hoist/model/context.hpp"

#include <stdexcept>

namespace hoist {

const HostRoot& Context::root() const {
  if (!host) {
    throw std::logic_error("this command runs without a host root");
  }
  return *host;
}

}  // namespace hoist
