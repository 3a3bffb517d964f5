#pragma once

#include <string>

#include "hoist/util/expected.hpp"

namespace hoist {

/// Overwrites a string's bytes with zeros in a way the compiler cannot drop
/// (OPENSSL_cleanse), for buffers that held a credential.
void secure_erase(std::string& text) noexcept;

/// Makes this process non-dumpable (prctl PR_SET_DUMPABLE 0): no core file and
/// no ptrace by other unprivileged processes, so a bearer token in memory does
/// not end up on disk when the process crashes.
Expected<void> forbid_core_dumps();

}  // namespace hoist
