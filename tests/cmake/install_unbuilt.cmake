# SPDX-License-Identifier: MIT
# cmake -DSOURCE=<lotus> -DWORK=<scratch> -DGENERATOR=<gen> -P install_unbuilt.cmake: any build tree
# installs, whatever else it built. Configures lotus as tools/scripts/demo.sh does, with the Python
# module too (tool, examples, injection libraries and module all defined), builds only the package
# (lotus::lotus, the runtime's one compile) and runs `cmake --install`: the install rules of the
# targets that were not built are OPTIONAL.
file(REMOVE_RECURSE "${WORK}")
execute_process(
  COMMAND "${CMAKE_COMMAND}" -S "${SOURCE}" -B "${WORK}/build" -G "${GENERATOR}"
          -DCMAKE_BUILD_TYPE=Release -DLOTUS_BUILD_TESTS=OFF -DLOTUS_BUILD_BENCH=OFF
          -DLOTUS_WITH_TORCH=OFF "-DLOTUS_EXAMPLE_DIRS=common;image_pipeline"
  RESULT_VARIABLE _rc OUTPUT_QUIET)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "configure failed (${_rc})")
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" --build "${WORK}/build" --target lotus
                RESULT_VARIABLE _rc OUTPUT_QUIET)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "building lotus::lotus failed (${_rc})")
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" --install "${WORK}/build" --prefix "${WORK}/prefix"
                RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "cmake --install of a tree that built nothing failed (${_rc})")
endif()
foreach(_f include/lotus/lotus.hpp share/cmake/lotus/lotusConfig.cmake lib/liblotus.a)
  if(NOT EXISTS "${WORK}/prefix/${_f}")
    message(FATAL_ERROR "the install has no ${_f}")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK}")
