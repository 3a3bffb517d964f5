#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace hoist {

/// A structured field's value: text or a count.
using LogValue = std::variant<std::string, std::uint64_t>;
using LogField = std::pair<std::string, LogValue>;

/// Structured fields (`component`, `version`, `phase`, counts) for the log lines this thread writes while the
/// object lives: the JSON log format puts them beside `msg`; the text format shows the message alone, which
/// already says them. Scopes nest; an inner field replaces an outer one of the same name. Lines written by other
/// threads (the transfer's workers) carry none.
class LogFields {
 public:
  LogFields(std::initializer_list<LogField> fields);
  explicit LogFields(const std::vector<LogField>& fields);
  LogFields(const LogFields&) = delete;
  LogFields& operator=(const LogFields&) = delete;
  ~LogFields();

  /// The fields in force on this thread, outermost first (a name may repeat: the last one wins).
  static const std::vector<LogField>& current();

 private:
  std::size_t m_count;
};

}  // namespace hoist
