#!/usr/bin/env python3
# lotus — the header-only runtime's -Og region (GCC) applies to the runtime and ends with it
# SPDX-License-Identifier: MIT
"""usage: cold_region.py CXX INCLUDE_DIR

Compiles one translation unit to assembly with CXX -std=c++17 -O2 and reads the code of three
functions: a runtime function (stats_line), a function of the user's defined after
#include <lotus/lotus.hpp>, and the user's function with a LOTUS_SCOPE. The region compiles the
runtime with frame pointers (GCC omits them at -O2), so:
  - the runtime function sets up %rbp (the region applied);
  - the user's functions do not (the region closed: the user's code keeps its own options);
  - with -DLOTUS_RUNTIME_FULL_OPT the runtime function does not either (the opt-out works).
"""

import os
import re
import subprocess
import sys
import tempfile

PROBE = r"""
#include <lotus/lotus.hpp>

int lotus_probe_after(const int* p, int n) {
  int s = 0;
  for (int i = 0; i < n; ++i) s += p[i] * 3;
  return s;
}

void lotus_probe_scope(int* out) {
  LOTUS_SCOPE("Probe");
  *out = lotus_probe_after(out, 4);
}

// stats_line is reached from the runtime's writer; take its address so that it is emitted.
void* lotus_probe_runtime() { return reinterpret_cast<void*>(&lotus::detail::stats_line); }
"""


def function_body(asm, symbol_prefix):
    """The assembly lines of the first function whose label starts with `symbol_prefix`."""
    lines = asm.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(symbol_prefix) and line.endswith(":"):
            body = []
            for l in lines[i + 1:]:
                if l.strip().startswith(".cfi_endproc"):
                    return body
                body.append(l)
    sys.exit(f"cold_region.py: no function {symbol_prefix}* in the assembly")


def sets_frame_pointer(body):
    return any(re.search(r"\bmovq\s+%rsp,\s*%rbp\b", l) for l in body)


def compile_asm(cxx, inc, extra):
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "probe.cpp")
        with open(src, "w") as f:
            f.write(PROBE)
        run = subprocess.run([cxx, "-std=c++17", "-O2", *extra, "-I", inc, "-S", src, "-o", "-"],
                             capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"cold_region.py: {cxx} failed:\n{run.stderr}")
        return run.stdout


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    cxx, inc = sys.argv[1], sys.argv[2]
    failures = []
    asm = compile_asm(cxx, inc, [])
    if not sets_frame_pointer(function_body(asm, "_ZN5lotus2v06detail10stats_line")):
        failures.append("the runtime (stats_line) is not compiled in the region (no frame pointer)")
    for name in ("_Z17lotus_probe_after", "_Z17lotus_probe_scope"):
        if sets_frame_pointer(function_body(asm, name)):
            failures.append(f"{name} (user code after the include) is compiled in the region")
    asm = compile_asm(cxx, inc, ["-DLOTUS_RUNTIME_FULL_OPT"])
    if sets_frame_pointer(function_body(asm, "_ZN5lotus2v06detail10stats_line")):
        failures.append("with LOTUS_RUNTIME_FULL_OPT the runtime is still compiled in the region")
    for f in failures:
        print("FAIL:", f)
    if not failures:
        print("ok: region applied to the runtime, closed before user code, LOTUS_RUNTIME_FULL_OPT honoured")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
