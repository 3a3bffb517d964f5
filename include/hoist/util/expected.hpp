#pragma once

#include <cerrno>
#include <string>
#include <utility>
#include <variant>

#include "hoist/util/error.hpp"

namespace hoist {

/// The error of the lower tier (util and sys): a message in the house shape
/// ("failed to <verb> '<path>': <reason>") and the errno it came from, 0 when
/// it did not come from a system call. Low layers return it; they never log it.
struct SysError {
  std::string message;
  int errnum = 0;
};

/// A value or a SysError: the return type of util and sys functions (C++20 has
/// no std::expected). `value()` on an error throws hoist::Failure with the
/// message, which is how the core turns a low-level error into an exit code
/// when it has nothing to add.
template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : m_v(std::in_place_index<0>, std::move(value)) {}         // NOLINT(google-explicit-constructor)
  Expected(SysError error) : m_v(std::in_place_index<1>, std::move(error)) {}  // NOLINT(google-explicit-constructor)

  [[nodiscard]] bool has_value() const noexcept { return m_v.index() == 0; }
  explicit operator bool() const noexcept { return has_value(); }

  T& value() & {
    throw_if_error();
    return std::get<0>(m_v);
  }
  // By value, not T&&: `for (auto& x : f().value())` must not dangle.
  T value() && {
    throw_if_error();
    return std::get<0>(std::move(m_v));
  }
  T& operator*() & { return std::get<0>(m_v); }
  T* operator->() { return &std::get<0>(m_v); }
  const T* operator->() const { return &std::get<0>(m_v); }
  [[nodiscard]] const SysError& error() const { return std::get<1>(m_v); }

 private:
  void throw_if_error() const {
    if (m_v.index() == 1) {
      throw Failure(std::get<1>(m_v).message);
    }
  }
  std::variant<T, SysError> m_v;
};

/// Expected<void>: success or a SysError.
template <>
class [[nodiscard]] Expected<void> {
 public:
  Expected() = default;
  Expected(SysError error) : m_error(std::move(error)), m_ok(false) {}  // NOLINT(google-explicit-constructor)

  [[nodiscard]] bool has_value() const noexcept { return m_ok; }
  explicit operator bool() const noexcept { return m_ok; }
  void value() const {
    if (!m_ok) {
      throw Failure(m_error.message);
    }
  }
  [[nodiscard]] const SysError& error() const { return m_error; }

 private:
  SysError m_error;
  bool m_ok = true;
};

/// A SysError for a failed system call: "failed to <what>: <strerror(errno)>".
/// Reads errno itself, so call it right after the failing call.
SysError sys_error(std::string_view what, int errnum = errno);

}  // namespace hoist
