# Writes OUTPUT, the header sys/library_versions.cpp includes: the git commit hoist is built from (from SOURCE_DIR's
# .git, else REVISION) and the build date. Run at every build (a custom target), it rewrites the header only when its content changed, so a build
# on the same day from the same commit recompiles nothing. The date honours SOURCE_DATE_EPOCH (string(TIMESTAMP)
# reads it), for reproducible builds.
set(commit "unknown")
# Told by the build (HOIST_REVISION) when the sources are not a git checkout: a full hash, maybe with -dirty.
if(REVISION MATCHES "^([0-9a-f]+)(-dirty)?$")
  string(SUBSTRING "${CMAKE_MATCH_1}" 0 12 head)
  set(commit "${head}${CMAKE_MATCH_2}")
endif()
find_program(GIT git)
if(GIT AND EXISTS "${SOURCE_DIR}/.git")
  execute_process(COMMAND "${GIT}" -C "${SOURCE_DIR}" rev-parse --short=12 HEAD
                  OUTPUT_VARIABLE head OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE failed)
  if(NOT failed AND head)
    set(commit "${head}")
    # Tracked files that differ from the commit: the binary is not that commit's.
    execute_process(COMMAND "${GIT}" -C "${SOURCE_DIR}" diff --quiet HEAD -- RESULT_VARIABLE dirty
                    OUTPUT_QUIET ERROR_QUIET)
    if(dirty)
      string(APPEND commit "-dirty")
    endif()
  endif()
endif()
string(TIMESTAMP date "%Y-%m-%d" UTC)
file(CONFIGURE OUTPUT "${OUTPUT}" CONTENT "#pragma once
#define HOIST_GIT_COMMIT \"${commit}\"
#define HOIST_BUILD_DATE \"${date}\"
" @ONLY)
