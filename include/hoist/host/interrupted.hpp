#pragma once

#include <string>
#include <string_view>

#include "hoist/util/error.hpp"

namespace hoist {

/// The run was asked to stop (SIGTERM, SIGINT; sys/stop_signals.hpp) and stopped
/// at a safe point: a Failure (exit 1) whose message says where. Thrown, never
/// exit()ed, so that unwinding undoes the switches made so far, puts remounts
/// back and releases the lock on its way to main.
class Interrupted : public Failure {
 public:
  explicit Interrupted(const std::string& message) : Failure(message) {}
};

/// A safe point: throws Interrupted ("stopped by SIGTERM before <step>") when
/// a stop signal has arrived, else does nothing. Cheap: one atomic load.
void throw_if_interrupted(std::string_view step);

}  // namespace hoist
