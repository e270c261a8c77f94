# SPDX-License-Identifier: MIT
# cmake -DDIRS=<consumer build dirs> -DEXPECT=<n> -P consumer_outputs.cmake: each consumer compiled
# the runtime (tools/cmake/lotus_runtime.cpp) exactly EXPECT times: 0 through find_package (the
# package ships it compiled), 1 through add_subdirectory or FetchContent (lotus::lotus built once,
# whatever number of targets link it).
foreach(_dir ${DIRS})
  file(GLOB_RECURSE _found "${_dir}/*lotus_runtime.cpp.o")
  list(LENGTH _found _n)
  if(NOT _n EQUAL EXPECT)
    message(FATAL_ERROR "${_dir}: compiled the runtime ${_n} times (expected ${EXPECT}): ${_found}")
  endif()
  message(STATUS "${_dir}: ${_n} runtime compiles (expected ${EXPECT})")
endforeach()
