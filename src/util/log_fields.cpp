#include "hoist/util/log_fields.hpp"

namespace hoist {

namespace {

// One stack a thread: the logger formats on the thread that logs, so the fields of that thread are the line's.
thread_local std::vector<LogField> t_fields;

}  // namespace

LogFields::LogFields(std::initializer_list<LogField> fields) : m_count(fields.size()) {
  t_fields.insert(t_fields.end(), fields.begin(), fields.end());
}

LogFields::LogFields(const std::vector<LogField>& fields) : m_count(fields.size()) {
  t_fields.insert(t_fields.end(), fields.begin(), fields.end());
}

LogFields::~LogFields() {
  t_fields.resize(t_fields.size() - m_count);
}

const std::vector<LogField>& LogFields::current() {
  return t_fields;
}

}  // namespace hoist
