# SPDX-License-Identifier: MIT
# cmake -DPROGRAM=<consumer built without an implementation file> -P no_runtime.cmake: the program
# links, runs untraced (consumer --untraced checks its counts) and writes exactly one line to
# stderr, the one that says what to add.
set(_expected "lotus: no lotus runtime is linked to this program, so its records are dropped: in exactly one .cpp file, #define LOTUS_IMPLEMENTATION before #include <lotus/lotus.hpp> (or link CMake's lotus::lotus)\n")
execute_process(COMMAND "${PROGRAM}" --untraced RESULT_VARIABLE _rc OUTPUT_VARIABLE _out
                ERROR_VARIABLE _err)
message(STATUS "stdout: ${_out}")
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "${PROGRAM} --untraced exited ${_rc}; stderr: ${_err}")
endif()
if(NOT _err STREQUAL _expected)
  message(FATAL_ERROR "stderr is not the one line expected:\n[${_err}]\nexpected:\n[${_expected}]")
endif()
message(STATUS "stderr: ${_err}")
