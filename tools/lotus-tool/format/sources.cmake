# SPDX-License-Identifier: MIT
# format/: the Lotus format, standard library only: records and lines, trace file and sidecar
# names, the sidecars' identity lines, the batch-kind table (over the runtime's own record sites,
# lotus/detail/record_name.hpp) and the definition of an epoch. lotus-tool links it as the library
# lotus_tool_format; the Python module compiles the same files (tools/python/CMakeLists.txt), so
# that lotus.frame and lotus.loaders read a trace by lotus-tool's rules.
set(LOTUS_FORMAT_SOURCES
  "${CMAKE_CURRENT_LIST_DIR}/record.cpp" "${CMAKE_CURRENT_LIST_DIR}/line_reader.cpp"
  "${CMAKE_CURRENT_LIST_DIR}/epochs.cpp" "${CMAKE_CURRENT_LIST_DIR}/trace_files.cpp")
