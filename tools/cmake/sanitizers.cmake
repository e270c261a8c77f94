# SPDX-License-Identifier: MIT
# lotus_target_sanitizers(<target>): apply LOTUS_SANITIZE to one of lotus's own targets.
function(lotus_target_sanitizers target)
  if(LOTUS_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=${LOTUS_SANITIZE} -fno-sanitize-recover=all
                                             -fno-omit-frame-pointer -g)
    target_link_options(${target} PRIVATE -fsanitize=${LOTUS_SANITIZE})
  endif()
endfunction()
