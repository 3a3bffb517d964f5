#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include "hoist/util/exit_code.hpp"

namespace hoist {

/// The error of the upper tier (core and cli): an exception that carries the
/// exit code it must end the process with. It is thrown where the failure is
/// detected, with a message that says what was being done, to which path and
/// why, and it is logged once, in main.
class Error : public std::runtime_error {
 public:
  Error(ExitCode code, const std::string& message) : std::runtime_error(message), m_code(code) {}
  [[nodiscard]] ExitCode code() const noexcept { return m_code; }

 private:
  ExitCode m_code;
};

/// Bad usage or bad input (exit 2).
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& message) : Error(ExitCode::usage, message) {}
};

/// A failure that left the host on the old version (exit 1).
class Failure : public Error {
 public:
  explicit Failure(const std::string& message) : Error(ExitCode::failed, message) {}
};

/// `strerror` text for an errno value (thread-safe).
std::string errno_text(int errnum);

/// "failed to <what>: <strerror(errnum)>", the one shape of system errors.
std::string system_message(std::string_view what, int errnum);

}  // namespace hoist
