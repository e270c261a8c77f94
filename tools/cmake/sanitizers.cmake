# SPDX-License-Identifier: MIT
# lotus_target_sanitizers(<target>): apply LOTUS_SANITIZE to one of lotus's own targets.
set(LOTUS_SANITIZE_DEBUG_INFO "-g" CACHE STRING
    "Debug info of sanitized targets, for their reports' lines: -g, or -g1 (line tables: a faster build)")
function(lotus_target_sanitizers target)
  if(LOTUS_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=${LOTUS_SANITIZE} -fno-sanitize-recover=all
                                             -fno-omit-frame-pointer ${LOTUS_SANITIZE_DEBUG_INFO})
    target_link_options(${target} PRIVATE -fsanitize=${LOTUS_SANITIZE})
  endif()
endfunction()
