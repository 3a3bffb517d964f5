#pragma once

#include <string_view>

#include "hoist/sys/wake_flag.hpp"

namespace hoist::stop_signals {

/// SIGTERM and SIGINT as a request to stop, not a kill: SUC deletes a Job whose
/// Plan changed with SIGTERM, and the node's shutdown sends it to every process.
/// The handler only records the signal and raises one process-wide WakeFlag
/// (an eventfd write, async-signal-safe); the run then stops at its next safe
/// point by throwing, so that unwinding puts remounts back and releases the
/// lock, and blocking waits (the lock, the bus, the reboot) poll the
/// WakeFlag's descriptor and end at once. SA_RESTART keeps system calls from
/// failing with EINTR in between. A second signal of the same kind is not
/// caught (SA_RESETHAND): it ends the process the default way, for a person
/// who presses Ctrl-C twice; every write hoist makes survives that as it
/// survives SIGKILL.
///
/// Installs the handlers; later calls do nothing. Throws hoist::Failure when
/// the eventfd cannot be made.
void install();

/// Whether install() ran.
[[nodiscard]] bool installed() noexcept;

/// The WakeFlag the handlers raise; nullptr before install().
[[nodiscard]] const WakeFlag* wake_flag() noexcept;

/// The signal received (SIGTERM or SIGINT), 0 when none was.
[[nodiscard]] int received() noexcept;

/// "SIGTERM" or "SIGINT" for the signal received, "" when none was.
[[nodiscard]] std::string_view received_name() noexcept;

/// Forgets a received signal and lowers the WakeFlag (for tests), and
/// re-arms the handlers that SA_RESETHAND disarmed.
void reset_for_test();

}  // namespace hoist::stop_signals
