# SPDX-License-Identifier: MIT
# lotus::lotus_compiled, defined once for the build tree (CMakeLists.txt) and for the installed
# package (lotusConfig.cmake): the runtime compiled once from `source` (lotus_compiled.cpp) in a
# static library; every TU that links it sees only the hot path (LOTUS_COMPILED_LIB).
# EXCLUDE_FROM_ALL: a consumer builds it only when one of its targets links lotus::lotus_compiled
# (find_package, add_subdirectory and FetchContent consumers of lotus::lotus build nothing of it).
function(lotus_add_compiled_library source header_target)
  add_library(lotus_compiled STATIC EXCLUDE_FROM_ALL "${source}")
  add_library(lotus::lotus_compiled ALIAS lotus_compiled)
  target_link_libraries(lotus_compiled PUBLIC ${header_target})
  target_compile_definitions(lotus_compiled PUBLIC LOTUS_COMPILED_LIB)
  set_target_properties(lotus_compiled PROPERTIES POSITION_INDEPENDENT_CODE ON)
endfunction()
