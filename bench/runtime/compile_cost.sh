#!/usr/bin/env bash
# lotus — compile cost: a 6-file program with and without lotus, g++ -O2 CPU time
# SPDX-License-Identifier: MIT
#
# usage: bench/runtime/compile_cost.sh [COMPILER] [INCLUDE_DIR]     (defaults: g++, this repo's include/)
#   env: RUNS (default 5), CXXFLAGS_EXTRA (added to every compile), PREFIX=<an installed lotus>
#        (also the same program as a CMake project that takes lotus through find_package(lotus)),
#        IR=perf (also the instructions the compiler executes, from `perf stat -e instructions:u`:
#        unlike CPU time, that count does not depend on the machine's load), IR=callgrind (the
#        same count from valgrind's callgrind, every process of the compile: where the machine
#        has no hardware counters, as a VM often has not; about a minute a compile)
# The program: six files, each a function that sorts a vector of strings and records one
# LOTUS_SCOPE (unit1.cpp also has main and defines LOTUS_IMPLEMENTATION: the runtime is compiled
# there, once), and the same six files without lotus (no include, no scope). Each compile
# (COMPILER -std=c++17 -O2 -c) and each link runs RUNS times, interleaved; the medians of user+sys
# CPU time give:
#   a recording file (unit2..6) over the same file without lotus (the hot path only);
#   the implementation file (unit1) over the same file without lotus (the whole runtime);
#   the whole build (six compiles and the link) over the same build without lotus.
# With PREFIX: the files are compiled with the commands CMake gives a find_package(lotus) consumer
# that links lotus::lotus (no file defines LOTUS_IMPLEMENTATION), a recording file's cost over the
# same file without lotus, and the number of runtime compiles in that consumer's build (0).
set -euo pipefail
export LC_ALL=C

[[ "${1:-}" == -h || "${1:-}" == --help ]] && { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
[[ $# -le 2 ]] || { echo "usage: $0 [COMPILER] [INCLUDE_DIR]" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
cxx=${1:-g++}
inc=${2:-$here/../../include}
runs=${RUNS:-5}
command -v "$cxx" >/dev/null || { echo "$0: compiler '$cxx' not found" >&2; exit 1; }
[[ -f "$inc/lotus/lotus.hpp" ]] || { echo "$0: $inc/lotus/lotus.hpp not found" >&2; exit 1; }
[[ "$runs" =~ ^[1-9][0-9]?$ ]] || { echo "$0: RUNS must be 1..99" >&2; exit 2; }
ir=${IR:-0}
[[ "$ir" == 0 || "$ir" == perf || "$ir" == callgrind ]] || { echo "$0: IR must be 0, perf or callgrind" >&2; exit 2; }
if [[ "$ir" == callgrind ]] && ! command -v valgrind >/dev/null; then
  echo "$0: IR=callgrind needs valgrind" >&2; exit 1
fi
if [[ "$ir" == perf ]] && ! perf stat -x, -e instructions:u true >/dev/null 2>&1; then
  echo "$0: IR=perf needs perf with the instructions:u event" >&2; exit 1
fi
prefix=${PREFIX:-}
if [[ -n "$prefix" && ! -f "$prefix/include/lotus/lotus.hpp" ]]; then
  echo "$0: PREFIX=$prefix holds no installed lotus (include/lotus/lotus.hpp)" >&2; exit 1
fi
inc=$(cd "$inc" && pwd -P)

"$here/../quiet.sh" --check
work=$(mktemp -d "${TMPDIR:-/tmp}/lotus-compile-cost-XXXXXX")
trap 'rm -rf "$work"; "$here/../quiet.sh" --end' EXIT

/usr/bin/python3 - "$work" "$runs" "$cxx" "$inc" "$ir" "$prefix" "${CXXFLAGS_EXTRA:-}" <<'PY'
import json, os, shlex, statistics, subprocess, sys

work, runs, cxx, inc, ir, prefix, extra = sys.argv[1:8]
runs = int(runs)
flags = ["-std=c++17", "-O2", *shlex.split(extra)]
units = [f"unit{i}" for i in range(1, 7)]


def source(unit, lotus):
    impl = unit == "unit1"
    lines = []
    if lotus and impl:
        lines.append("#define LOTUS_IMPLEMENTATION  // the program's one implementation file")
    lines += ["#include <algorithm>", "#include <cstddef>", "#include <string>", "#include <vector>"]
    if lotus:
        lines.append("#include <lotus/lotus.hpp>")
    lines.append("")
    for u in units if impl else [unit]:
        lines.append(f"std::size_t {u}(std::vector<std::string>& v);")
    lines.append(f"std::size_t {unit}(std::vector<std::string>& v) {{")
    if lotus:
        lines.append(f'  LOTUS_SCOPE("{unit.capitalize()}");')
    lines += ["  std::sort(v.begin(), v.end());", "  return v.size();", "}"]
    if impl:
        lines += ["", "int main() {", '  std::vector<std::string> v{"b", "a"};', "  std::size_t n = 0;"]
        lines += [f"  n += {u}(v);" for u in units]
        lines += ["  return n == 12 ? 0 : 1;", "}"]
    return "\n".join(lines) + "\n"


for variant, lotus in (("lotus", True), ("base", False)):
    os.makedirs(os.path.join(work, variant))
    for u in units:
        with open(os.path.join(work, variant, u + ".cpp"), "w") as f:
            f.write(source(u, lotus))


def run(cmd, cwd=None):
    """user+sys CPU seconds of cmd and every process it waited for."""
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = proc.stdout.read()
    _, status, ru = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"compile_cost.sh: {' '.join(cmd)} failed:\n{out.decode(errors='replace')}")
    return ru.ru_utime + ru.ru_stime


def compile_cmd(variant, unit):
    d = os.path.join(work, variant)
    return [cxx, *flags, "-I" + inc, "-c", os.path.join(d, unit + ".cpp"), "-o",
            os.path.join(d, unit + ".o")]


def link_cmd(variant):
    d = os.path.join(work, variant)
    return [cxx, *[os.path.join(d, u + ".o") for u in units], "-o", os.path.join(d, "prog"),
            "-pthread", "-ldl"]


steps = [(v, u) for u in units for v in ("lotus", "base")]
times = {s: [] for s in steps}
links = {"lotus": [], "base": []}
for _ in range(runs):  # interleaved, so a change in machine load hits both programs alike
    for s in steps:
        times[s].append(run(compile_cmd(*s)))
    for v in links:
        links[v].append(run(link_cmd(v)))
for v in ("lotus", "base"):  # both programs run (exit 0: every function was called)
    run([os.path.join(work, v, "prog")])
med = {s: statistics.median(t) for s, t in times.items()}
lmed = {v: statistics.median(t) for v, t in links.items()}

print(f"{cxx} {' '.join(flags)} -c, user+sys CPU s, median of {runs} (min, max)")
for s in steps:
    print(f"  {s[1]} {s[0]:<5} {med[s]:7.3f}  ({min(times[s]):.3f}, {max(times[s]):.3f})")
for v in links:
    print(f"  link  {v:<5} {lmed[v]:7.3f}  ({min(links[v]):.3f}, {max(links[v]):.3f})")
rec = [med[("lotus", u)] - med[("base", u)] for u in units[1:]]
total = {v: sum(med[(v, u)] for u in units) + lmed[v] for v in ("lotus", "base")}
print(f"  a recording file (unit2..6) over the same file without lotus: median {statistics.median(rec):+.3f} s"
      f" (each: {', '.join(f'{d:+.3f}' for d in rec)})")
print(f"  the implementation file (unit1) over the same file without lotus: "
      f"{med[('lotus', 'unit1')] - med[('base', 'unit1')]:+.3f} s")
print(f"  the whole build, 6 compiles + link: {total['lotus']:.3f} s vs {total['base']:.3f} s without "
      f"lotus: {total['lotus'] - total['base']:+.3f} s")

if ir in ("perf", "callgrind"):
    def instructions(cmd):
        if ir == "callgrind":
            # Every process of the compile (the driver, cc1plus, as), summed from callgrind's
            # totals: an exact count, whatever the machine's load.
            out = os.path.join(work, "callgrind")
            os.makedirs(out, exist_ok=True)
            p = subprocess.run(["valgrind", "--tool=callgrind", "--trace-children=yes",
                                f"--callgrind-out-file={out}/cg.%p", *cmd],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            total = 0
            for name in os.listdir(out):
                with open(os.path.join(out, name)) as f:
                    for line in f:
                        if line.startswith(("summary:", "totals:")):
                            total += int(line.split()[1])
                            break
                os.unlink(os.path.join(out, name))
            if p.returncode != 0 or total == 0:
                sys.exit(f"compile_cost.sh: no instruction count from callgrind: {p.stderr[-2000:]}")
            return total
        p = subprocess.run(["perf", "stat", "-x,", "-e", "instructions:u", *cmd],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for line in p.stderr.splitlines():
            if "instructions" in line and line.split(",")[0].isdigit():
                return int(line.split(",")[0])
        sys.exit(f"compile_cost.sh: no instruction count from perf: {p.stderr}")
    n = {s: instructions(compile_cmd(*s)) for s in (("lotus", "unit1"), ("base", "unit1"),
                                                      ("lotus", "unit2"), ("base", "unit2"))}
    print(f"instructions executed by the compiler ({'perf stat, user space' if ir == 'perf' else 'callgrind'}"
          f"; independent of load), G:")
    print(f"  recording file unit2: {(n[('lotus', 'unit2')] - n[('base', 'unit2')]) / 1e9:+.3f} G"
          f" over {n[('base', 'unit2')] / 1e9:.3f} G")
    print(f"  implementation file unit1: {(n[('lotus', 'unit1')] - n[('base', 'unit1')]) / 1e9:+.3f} G"
          f" over {n[('base', 'unit1')] / 1e9:.3f} G")

if prefix:
    # The same program as a CMake project that takes lotus through find_package: no file defines
    # LOTUS_IMPLEMENTATION, lotus::lotus brings the runtime compiled.
    proj = os.path.join(work, "cmake")
    os.makedirs(proj)
    for u in units:
        with open(os.path.join(proj, u + ".cpp"), "w") as f:
            f.write(source(u, True).replace(
                "#define LOTUS_IMPLEMENTATION  // the program's one implementation file\n", ""))
    with open(os.path.join(proj, "CMakeLists.txt"), "w") as f:
        f.write("cmake_minimum_required(VERSION 3.21)\nproject(six LANGUAGES CXX)\n"
                "find_package(lotus CONFIG REQUIRED)\n"
                f"add_executable(prog {' '.join(u + '.cpp' for u in units)})\n"
                "target_link_libraries(prog PRIVATE lotus::lotus)\n")
    build = os.path.join(work, "cmake-build")
    subprocess.run(["cmake", "-S", proj, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                    f"-DCMAKE_CXX_COMPILER={cxx}", f"-DCMAKE_CXX_FLAGS_RELEASE=-O2 {extra}",
                    f"-DCMAKE_PREFIX_PATH={prefix}", "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON"],
                   check=True, stdout=subprocess.DEVNULL)
    entries = json.load(open(os.path.join(build, "compile_commands.json")))
    runtime = [e["file"] for e in entries if "lotus" in os.path.basename(e["file"])]
    cmds = {os.path.splitext(os.path.basename(e["file"]))[0]: e for e in entries}
    deltas = []
    for u in units[1:]:
        e = cmds[u]
        args = shlex.split(e["command"])
        base_args = [a for a in args if not a.startswith("-isystem") and a != os.path.join(prefix, "include")]
        base_args = [os.path.join(work, "base", u + ".cpp") if a == e["file"] else a for a in base_args]
        t_l, t_b = [], []
        for _ in range(runs):
            t_l.append(run(args, cwd=e["directory"]))
            t_b.append(run(base_args, cwd=e["directory"]))
        deltas.append(statistics.median(t_l) - statistics.median(t_b))
    t_build = run(["cmake", "--build", build, "-j", "1"])
    print(f"find_package(lotus) consumer (PREFIX={prefix}), CMake's compile commands:")
    print(f"  a recording file over the same file without lotus: median {statistics.median(deltas):+.3f} s"
          f" (each: {', '.join(f'{d:+.3f}' for d in deltas)})")
    print(f"  runtime compiles in the consumer's build: {len(runtime)}; its whole build: {t_build:.3f} s CPU")
PY
