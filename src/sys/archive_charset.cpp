#include "archive_charset.hpp"

#include <langinfo.h>

namespace {

thread_local bool t_names_as_utf8 = false;

}  // namespace

// The link's --wrap=nl_langinfo sends every call of nl_langinfo here, and __real_nl_langinfo to the C library's.
extern "C" char* __real_nl_langinfo(nl_item item);

extern "C" char* __wrap_nl_langinfo(nl_item item) {
  if (item == CODESET && t_names_as_utf8) {
    static char utf8[] = "UTF-8";
    return utf8;
  }
  return __real_nl_langinfo(item);
}

namespace hoist {

ArchiveNamesAsUtf8::ArchiveNamesAsUtf8() : m_outer(t_names_as_utf8) {
  t_names_as_utf8 = true;
}

ArchiveNamesAsUtf8::~ArchiveNamesAsUtf8() {
  t_names_as_utf8 = m_outer;
}

}  // namespace hoist
