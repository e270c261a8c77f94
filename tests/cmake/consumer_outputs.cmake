# SPDX-License-Identifier: MIT
# cmake -DDIRS=<build dir>;... -DEXPECT=0|1 -P consumer_outputs.cmake: a consumer build tree holds
# liblotus_compiled.a exactly when one of its targets links lotus::lotus_compiled (EXPECT=1); a
# consumer of lotus::lotus or lotus::header_only builds nothing it does not use (EXPECT=0).
foreach(_dir ${DIRS})
  if(NOT IS_DIRECTORY "${_dir}")
    message(FATAL_ERROR "no consumer build tree ${_dir} (its test did not run)")
  endif()
  file(GLOB_RECURSE _found "${_dir}/*lotus_compiled.a")
  list(LENGTH _found _n)
  if(EXPECT AND _n EQUAL 0)
    message(FATAL_ERROR "${_dir}: links lotus::lotus_compiled but has no liblotus_compiled.a")
  elseif(NOT EXPECT AND NOT _n EQUAL 0)
    message(FATAL_ERROR "${_dir}: does not link lotus::lotus_compiled but built ${_found}")
  endif()
  message(STATUS "${_dir}: ${_n} liblotus_compiled.a (expected ${EXPECT})")
endforeach()
