#!/usr/bin/env bash
# lotus — compile cost of #include <lotus/lotus.hpp>: CPU time of one TU vs the system headers it uses
# SPDX-License-Identifier: MIT
#
# usage: bench/runtime/compile_cost.sh [COMPILER] [INCLUDE_DIR]     (defaults: g++, this repo's include/)
#   env: RUNS (default 5), CXXFLAGS_EXTRA (added to every compile), IR=1 (also count the
#        instructions the compiler executes for each, once, under valgrind's callgrind: unlike CPU
#        time, that count does not depend on the machine's load), IR=perf (the same count from
#        `perf stat -e instructions:u`: user-space instructions, seconds instead of minutes)
# Compiles, with COMPILER -std=c++17 -O2 -c, RUNS times each (interleaved), and reports the median
# user+sys CPU time of:
#   (a) lotus.cpp:  #include <lotus/lotus.hpp> and one function with one LOTUS_SCOPE, as a plain
#                   #include gives it (lotus::header_only: the runtime inline in the file)
#   (b) sys_a.cpp:  exactly the system headers that lotus's headers include directly in (a), in the
#                   same order (taken from COMPILER -H, not hard-coded), and the same function
#   (c) lotus.cpp with -DLOTUS_COMPILED_LIB: the same file in a target that links lotus::lotus
#                   (the default) or lotus::lotus_compiled: the hot path only
#   (d) sys_c.cpp:  the system headers that lotus's headers include directly in (c)
#   (r) runtime.cpp: the runtime source lotus::lotus adds once to each target that links it
#                   (tools/cmake/lotus_runtime.cpp; lotus::lotus_compiled compiles it once in all)
# then (a)−(b), (c)−(d) and (r) in seconds, and the object sizes.
set -euo pipefail
export LC_ALL=C

[[ "${1:-}" == -h || "${1:-}" == --help ]] && { sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
[[ $# -le 2 ]] || { echo "usage: $0 [COMPILER] [INCLUDE_DIR]" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
cxx=${1:-g++}
inc=${2:-$here/../../include}
runs=${RUNS:-5}
command -v "$cxx" >/dev/null || { echo "$0: compiler '$cxx' not found" >&2; exit 1; }
[[ -f "$inc/lotus/lotus.hpp" ]] || { echo "$0: $inc/lotus/lotus.hpp not found" >&2; exit 1; }
[[ -f "$inc/lotus/src.hpp" ]] || { echo "$0: $inc/lotus/src.hpp not found (not the single header)" >&2; exit 1; }
[[ "$runs" =~ ^[1-9][0-9]?$ ]] || { echo "$0: RUNS must be 1..99" >&2; exit 2; }
ir=${IR:-0}
[[ "$ir" == 0 || "$ir" == 1 || "$ir" == perf ]] || { echo "$0: IR must be 0, 1 or perf" >&2; exit 2; }
if [[ "$ir" == 1 ]] && ! command -v valgrind >/dev/null; then
  echo "$0: IR=1 needs valgrind" >&2; exit 1
fi
if [[ "$ir" == perf ]] && ! perf stat -x, -e instructions:u true >/dev/null 2>&1; then
  echo "$0: IR=perf needs perf with the instructions:u event" >&2; exit 1
fi
inc=$(cd "$inc" && pwd -P)

"$here/../quiet.sh" --check
work=$(mktemp -d "${TMPDIR:-/tmp}/lotus-compile-cost-XXXXXX")
trap 'rm -rf "$work"; "$here/../quiet.sh" --end' EXIT
read -r -a extra <<< "${CXXFLAGS_EXTRA:-}"
flags=(-std=c++17 -O2 "${extra[@]}")

cat > "$work/lotus.cpp" <<'EOF'
#include <lotus/lotus.hpp>

void lotus_compile_cost_probe();
void lotus_compile_cost_probe() { LOTUS_SCOPE("Probe"); }
EOF
cp "$here/../../tools/cmake/lotus_runtime.cpp" "$work/runtime.cpp"

# The compiler's <...> search list, then every header each mode opens (-H: one line per opening,
# the dots give the depth). A non-lotus header whose includer is under INCLUDE_DIR/lotus is direct.
"$cxx" "${flags[@]}" -E -v -x c++ /dev/null -o /dev/null 2> "$work/search.txt"
"$cxx" "${flags[@]}" -I"$inc" -H -E "$work/lotus.cpp" -o /dev/null 2> "$work/a.H"
"$cxx" "${flags[@]}" -I"$inc" -DLOTUS_COMPILED_LIB -H -E "$work/lotus.cpp" -o /dev/null 2> "$work/c.H"
/usr/bin/python3 - "$inc" "$work" "$cxx" "${flags[@]}" <<'PY'
import os, subprocess, sys

inc, work, cxx, flags = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
lines = open(os.path.join(work, "search.txt")).read().splitlines()
start = lines.index("#include <...> search starts here:") + 1
dirs = [l.strip() for l in lines[start:lines.index("End of search list.")]]
lotus_root = os.path.join(inc, "lotus") + os.sep


def is_lotus(path):
    return os.path.realpath(path).startswith(lotus_root)


def spelling(path):
    """The shortest <name> that the search list resolves to this very file."""
    real = os.path.realpath(path)
    names = sorted((os.path.relpath(path, d) for d in dirs if path.startswith(d.rstrip("/") + "/")),
                   key=len)
    for name in names:
        for d in dirs:
            cand = os.path.join(d, name)
            if os.path.exists(cand):
                if os.path.realpath(cand) == real:
                    return name
                break
    sys.exit(f"compile_cost.sh: cannot spell an #include for {path}")


def opened(h_file, keep_lotus=False):
    """(direct system includes of lotus's headers in order, every non-lotus header opened)."""
    stack, direct, seen, every = [], [], set(), set()
    for line in open(h_file):
        if not line.startswith("."):
            if line.startswith("Multiple include guards"):
                break
            continue
        dots, _, path = line.rstrip("\n").partition(" ")
        depth = len(dots)
        del stack[depth - 1:]
        stack.append(path)
        if is_lotus(path):
            continue
        every.add(os.path.realpath(path))
        parent = stack[depth - 2] if depth >= 2 else None
        if parent is not None and is_lotus(parent) and path not in seen:
            seen.add(path)
            direct.append(spelling(path))
    return direct, every


for mode in ("a", "c"):
    direct, every = opened(os.path.join(work, f"{mode}.H"))
    src = os.path.join(work, f"sys_{mode}.cpp")
    with open(src, "w") as f:
        for name in direct:
            f.write(f"#include <{name}>\n")
        f.write("\nvoid lotus_compile_cost_probe();\nvoid lotus_compile_cost_probe() {}\n")
    # Check: the system-only file opens the same set of system headers.
    h = subprocess.run([cxx, *flags, "-H", "-E", src, "-o", "/dev/null"], capture_output=True,
                       text=True).stderr
    again = {os.path.realpath(l.partition(" ")[2]) for l in h.splitlines() if l.startswith(".")}
    same = "same set" if again == every else f"DIFFERENT: {len(every ^ again)} differ"
    print(f"({mode}) opens {len(every)} system headers, {len(direct)} included directly by lotus "
          f"({'b' if mode == 'a' else 'd'}: {same})")
    print("    " + " ".join(f"<{n}>" for n in direct))
PY

/usr/bin/python3 - "$work" "$runs" "$cxx" "$inc" "$ir" "${flags[@]}" <<'PY'
import glob, os, statistics, subprocess, sys

work, runs, cxx, inc = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
ir = sys.argv[5]
flags = sys.argv[6:]
configs = [("a", "lotus.cpp", []), ("b", "sys_a.cpp", []),
           ("c", "lotus.cpp", ["-DLOTUS_COMPILED_LIB"]), ("d", "sys_c.cpp", []),
           ("r", "runtime.cpp", ["-DLOTUS_COMPILED_LIB"])]
labels = {"a": "(a) lotus.hpp + 1 LOTUS_SCOPE, header-only",
          "b": "(b) (a)'s system headers only",
          "c": "(c) (a) in a lotus::lotus target",
          "d": "(d) (c)'s system headers only",
          "r": "(r) the runtime source, once per target"}


def compile_once(key, src, defs):
    obj = os.path.join(work, key + ".o")
    cmd = [cxx, *flags, "-I" + inc, *defs, "-c", os.path.join(work, src), "-o", obj]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = proc.stderr.read()
    _, status, ru = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"compile_cost.sh: {' '.join(cmd)} failed:\n{err.decode(errors='replace')}")
    return ru.ru_utime + ru.ru_stime, obj


times = {key: [] for key, _, _ in configs}
objs = {}
for _ in range(runs):  # interleaved, so a change in machine load hits every configuration alike
    for key, src, defs in configs:
        t, objs[key] = compile_once(key, src, defs)
        times[key].append(t)

med = {k: statistics.median(v) for k, v in times.items()}
print(f"{cxx} {' '.join(flags)} -c, user+sys CPU s, median of {runs} (min, max)")
for key, _, _ in configs:
    print(f"  {labels[key]:<46} {med[key]:7.3f}  ({min(times[key]):.3f}, {max(times[key]):.3f})")
print(f"  delta (a)-(b), header-only:        {med['a'] - med['b']:7.3f} s")
print(f"  delta (c)-(d), lotus::lotus file:  {med['c'] - med['d']:7.3f} s")
print(f"  (r), once per lotus::lotus target: {med['r']:7.3f} s")
print("object size, bytes: " + ", ".join(f"({k}) {os.path.getsize(objs[k])}" for k in ("a", "c", "r")))


def instructions(key, src, defs):
    """Instructions executed by the compiler driver and its children (cc1plus, as) for one compile."""
    if ir == "perf":
        cmd = ["perf", "stat", "-x,", "-e", "instructions:u", cxx, *flags, "-I" + inc, *defs, "-c",
               os.path.join(work, src), "-o", os.path.join(work, key + "-ir.o")]
        proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if proc.returncode != 0:
            sys.exit(f"compile_cost.sh: {' '.join(cmd)} failed")
        for line in proc.stderr.splitlines():
            if "instructions" in line and line.split(",")[0].isdigit():
                return int(line.split(",")[0])
        sys.exit(f"compile_cost.sh: no instruction count from perf: {proc.stderr}")
    out = os.path.join(work, f"cg-{key}")
    os.makedirs(out, exist_ok=True)
    cmd = ["valgrind", "--tool=callgrind", "--trace-children=yes",
           f"--callgrind-out-file={out}/cg.%p", cxx, *flags, "-I" + inc, *defs, "-c",
           os.path.join(work, src), "-o", os.path.join(work, key + "-ir.o")]
    if subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode != 0:
        sys.exit(f"compile_cost.sh: {' '.join(cmd)} failed")
    total = 0
    for name in glob.glob(os.path.join(out, "cg.*")):
        with open(name) as f:
            for line in f:
                if line.startswith(("summary:", "totals:")):
                    total += int(line.split()[1])
                    break
    return total


if ir != "0":
    counts = {key: instructions(key, src, defs) for key, src, defs in configs}
    rate = med["b"] / counts["b"]
    how = "perf stat, user space" if ir == "perf" else "callgrind"
    print(f"instructions executed by the compiler ({how}; independent of load), G:")
    for key, _, _ in configs:
        print(f"  {labels[key]:<46} {counts[key] / 1e9:7.3f}")
    for name, x, y in (("(a)-(b)", "a", "b"), ("(c)-(d)", "c", "d")):
        d = counts[x] - counts[y]
        print(f"  delta {name}: {d / 1e9:7.3f} G instructions = {d * rate:.3f} s at (b)'s median rate")
PY
