#pragma once

#include "hoist/model/context.hpp"
#include "hoist/sys/lock.hpp"

namespace hoist {

/// Takes the run's lock (`--lock-file`, waiting up to `--lock-timeout`) and logs
/// it: who holds it when it must wait, and "lock taken". A timeout throws
/// Error(ExitCode::lock_timeout) naming the lock file; any other error Failure.
Lock take_run_lock(const Context& context);

}  // namespace hoist
