#!/bin/sh
# SPDX-License-Identifier: MIT
# lotus — instructions per LOTUS_SCOPE under Callgrind (deterministic: no timing noise), for the
# NVTX path (tools/docs/NVTX.md): built without NVTX, with NVTX compiled in but off, and with
# LOTUS_NVTX=1 and no NVTX tool attached; the loop and the count: scope_instructions.sh.
#   sh bench/core/nvtx_instructions.sh [NVTX_INCLUDE_DIR] [OTHER_LOTUS_INCLUDE_DIR]
# NVTX_INCLUDE_DIR: where nvtx3/ is (default /usr/local/cuda/include). OTHER_LOTUS_INCLUDE_DIR:
# another checkout's include/ (say, before a change), counted as "other" without NVTX.
# Under Valgrind lotus uses clock_gettime (no TSC): the count includes the vDSO clock reads.
set -eu
here=$(cd "$(dirname "$0")/../.." && pwd)
nvtx=${1:-/usr/local/cuda/include}
other=${2:-}
[ -f "$nvtx/nvtx3/nvToolsExt.h" ] || { echo "nvtx_instructions: no $nvtx/nvtx3/nvToolsExt.h" >&2; exit 2; }
. "$here/bench/core/scope_instructions.sh"  # $work, loop.cpp, build, count
build plain -I"$here/include"
build nvtx -DLOTUS_WITH_NVTX -I"$here/include" -I"$nvtx"
echo "instructions per scope (Callgrind, clock_gettime clock):"
[ -n "$other" ] && build other -I"$other" && echo "  other checkout, no NVTX:        $(count other "")"
echo "  no NVTX compiled in:            $(count plain "")"
echo "  NVTX compiled in, off:          $(count nvtx "")"
echo "  LOTUS_NVTX on, no tool attached: $(count nvtx on)"
