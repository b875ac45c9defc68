# Script mode (cmake -P), run at every build: writes OUT from IN with the git
# revision of SOURCE_DIR ("unknown" outside a git checkout, "-dirty" with
# uncommitted changes). configure_file rewrites OUT only when it changes, so an
# unchanged revision rebuilds nothing.
execute_process(COMMAND git -C "${SOURCE_DIR}" rev-parse --short=9 HEAD
                OUTPUT_VARIABLE KGATE_GIT_REVISION OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE rc ERROR_QUIET)
if(NOT rc EQUAL 0 OR KGATE_GIT_REVISION STREQUAL "")
  set(KGATE_GIT_REVISION unknown)
else()
  execute_process(COMMAND git -C "${SOURCE_DIR}" diff --quiet HEAD -- RESULT_VARIABLE dirty ERROR_QUIET)
  if(NOT dirty EQUAL 0)
    string(APPEND KGATE_GIT_REVISION "-dirty")
  endif()
endif()
configure_file("${IN}" "${OUT}" @ONLY)
