#!/usr/bin/env bash
# lotus — compile cost of #include <lotus/lotus.hpp>: CPU time of one TU vs the system headers it uses
# SPDX-License-Identifier: MIT
#
# usage: bench/runtime/compile_cost.sh [COMPILER] [INCLUDE_DIR]     (defaults: g++, this repo's include/)
#   env: RUNS (default 5), CXXFLAGS_EXTRA (added to every compile), IR=1 (also count the
#        instructions the compiler executes for each, once, under valgrind's callgrind: unlike CPU
#        time, that count does not depend on the machine's load)
# Compiles, with COMPILER -std=c++17 -O2 -c, RUNS times each (interleaved) and reports the median
# user+sys CPU time of:
#   (a) lotus.cpp:    #include <lotus/lotus.hpp> and one function with one LOTUS_SCOPE
#   (b) system.cpp:   exactly the standard/system headers that files under INCLUDE_DIR/lotus include
#                     directly, in the same order (taken from COMPILER -H on (a), not hard-coded)
#   (c) compiled.cpp: (a) with -DLOTUS_COMPILED_LIB, the compiled mode in which only the hot path is
#                     in every TU (skipped, with a message, while INCLUDE_DIR/lotus/src.hpp is absent)
# then the deltas (a)−(b) and (c)−(b) in seconds and the object sizes of (a) and (c).
set -euo pipefail
export LC_ALL=C

[[ "${1:-}" == -h || "${1:-}" == --help ]] && { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
[[ $# -le 2 ]] || { echo "usage: $0 [COMPILER] [INCLUDE_DIR]" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
cxx=${1:-g++}
inc=${2:-$here/../../include}
runs=${RUNS:-5}
command -v "$cxx" >/dev/null || { echo "$0: compiler '$cxx' not found" >&2; exit 1; }
[[ -f "$inc/lotus/lotus.hpp" ]] || { echo "$0: $inc/lotus/lotus.hpp not found" >&2; exit 1; }
[[ "$runs" =~ ^[1-9][0-9]?$ ]] || { echo "$0: RUNS must be 1..99" >&2; exit 2; }
ir=${IR:-0}
[[ "$ir" == 0 || "$ir" == 1 ]] || { echo "$0: IR must be 0 or 1" >&2; exit 2; }
if [[ "$ir" == 1 ]] && ! command -v valgrind >/dev/null; then
  echo "$0: IR=1 needs valgrind" >&2; exit 1
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

# The compiler's <...> search list, then every header (a) opens (-H: one line per opening, the dots
# give the depth). A non-lotus header whose includer is under INCLUDE_DIR/lotus is a direct one.
"$cxx" "${flags[@]}" -E -v -x c++ /dev/null -o /dev/null 2> "$work/search.txt"
"$cxx" "${flags[@]}" -I"$inc" -H -E "$work/lotus.cpp" -o /dev/null 2> "$work/lotus.H"
/usr/bin/python3 - "$inc" "$work" <<'PY'
import os, sys

inc, work = sys.argv[1], sys.argv[2]
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


stack, direct, seen, opened = [], [], set(), set()
for line in open(os.path.join(work, "lotus.H")):
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
    opened.add(os.path.realpath(path))
    parent = stack[depth - 2] if depth >= 2 else None
    if parent is not None and is_lotus(parent) and path not in seen:
        seen.add(path)
        direct.append(spelling(path))

with open(os.path.join(work, "system.cpp"), "w") as f:
    for name in direct:
        f.write(f"#include <{name}>\n")
    f.write("\nvoid lotus_compile_cost_probe();\nvoid lotus_compile_cost_probe() {}\n")
with open(os.path.join(work, "opened_a.txt"), "w") as f:
    f.write("\n".join(sorted(opened)) + "\n")
print(f"system headers that files under {lotus_root} include directly: {len(direct)} "
      "(a header some earlier header already brought in is not opened again and not listed)")
print("  " + " ".join(f"<{n}>" for n in direct))
PY

# Check (b) against (a): the same set of system headers must be opened.
"$cxx" "${flags[@]}" -H -E "$work/system.cpp" -o /dev/null 2> "$work/system.H"
/usr/bin/python3 - "$work" <<'PY'
import os, sys
work = sys.argv[1]
a = set(open(os.path.join(work, "opened_a.txt")).read().split())
b = set()
for line in open(os.path.join(work, "system.H")):
    if line.startswith("."):
        b.add(os.path.realpath(line.rstrip("\n").partition(" ")[2]))
same = "same set" if a == b else f"DIFFERENT: only in (a) {len(a - b)}, only in (b) {len(b - a)}"
print(f"system headers opened: (a) {len(a)}, (b) {len(b)} ({same})")
PY

compiled=1
if [[ ! -f "$inc/lotus/src.hpp" ]]; then
  echo "compiled mode (c): not available yet ($inc/lotus/src.hpp is missing); skipped"
  compiled=0
elif ! "$cxx" "${flags[@]}" -I"$inc" -DLOTUS_COMPILED_LIB -c "$work/lotus.cpp" -o "$work/compiled.o" \
    2> "$work/compiled.err"; then
  echo "compiled mode (c): lotus.cpp does not compile with -DLOTUS_COMPILED_LIB; skipped:"
  head -5 "$work/compiled.err"
  compiled=0
fi

/usr/bin/python3 - "$work" "$runs" "$compiled" "$cxx" "$inc" "$ir" "${flags[@]}" <<'PY'
import glob, os, statistics, subprocess, sys

work, runs, compiled, cxx, inc = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4], sys.argv[5]
ir = sys.argv[6] == "1"
flags = sys.argv[7:]
configs = [("a", "lotus.cpp", []), ("b", "system.cpp", [])]
if compiled:
    configs.append(("c", "lotus.cpp", ["-DLOTUS_COMPILED_LIB"]))
labels = {"a": "(a) #include <lotus/lotus.hpp> + 1 LOTUS_SCOPE",
          "b": "(b) the same system headers only",
          "c": "(c) (a) with -DLOTUS_COMPILED_LIB"}


def compile_once(key, src, defs):
    obj = os.path.join(work, key + ".o")
    cmd = [cxx, *flags, "-I" + inc, *defs, "-c", os.path.join(work, src), "-o", obj]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = proc.stderr.read()
    _, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"compile_cost.sh: {' '.join(cmd)} failed:\n{err.decode(errors='replace')}")
    return ru.ru_utime + ru.ru_stime, obj


times = {key: [] for key, _, _ in configs}
objs = {}
for _ in range(runs):  # interleaved, so a change in machine load hits every configuration alike
    for key, src, defs in configs:
        t, objs[key] = compile_once(key, src, defs)
        times[key].append(t)


def text_size(obj):
    out = subprocess.run(["size", obj], capture_output=True, text=True)
    try:
        return int(out.stdout.splitlines()[1].split()[3])  # berkeley "dec": text+data+bss
    except (IndexError, ValueError):
        return -1


med = {k: statistics.median(v) for k, v in times.items()}
print(f"{cxx} {' '.join(flags)} -c, user+sys CPU s, median of {runs} (min, max)")
for key, _, _ in configs:
    print(f"  {labels[key]:<48} {med[key]:7.3f}  ({min(times[key]):.3f}, {max(times[key]):.3f})")
print(f"  delta (a)-(b): {med['a'] - med['b']:7.3f} s")
if compiled:
    print(f"  delta (c)-(b): {med['c'] - med['b']:7.3f} s")
else:
    print("  delta (c)-(b): n/a (compiled mode not available)")
print("object size, bytes (file; text+data+bss):")
for key in ("a", "c") if compiled else ("a",):
    print(f"  ({key}) {os.path.getsize(objs[key]):>9} {text_size(objs[key]):>9}")


def instructions(key, src, defs):
    """Instructions executed by the compiler driver and its children (cc1plus, as) for one compile."""
    out = os.path.join(work, f"cg-{key}")
    os.makedirs(out, exist_ok=True)
    cmd = ["valgrind", "--tool=callgrind", "--trace-children=yes",
           f"--callgrind-out-file={out}/cg.%p", cxx, *flags, "-I" + inc, *defs, "-c",
           os.path.join(work, src), "-o", os.path.join(work, key + "-ir.o")]
    run = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if run.returncode != 0:
        sys.exit(f"compile_cost.sh: {' '.join(cmd)} failed")
    total = 0
    for name in glob.glob(os.path.join(out, "cg.*")):
        with open(name) as f:
            for line in f:
                if line.startswith(("summary:", "totals:")):
                    total += int(line.split()[1])
                    break
    return total


if ir:
    counts = {key: instructions(key, src, defs) for key, src, defs in configs}
    print("instructions executed by the compiler (callgrind; independent of load), G:")
    for key, _, _ in configs:
        print(f"  {labels[key]:<48} {counts[key] / 1e9:7.3f}")
    print(f"  delta (a)-(b): {(counts['a'] - counts['b']) / 1e9:7.3f} G instructions"
          f" = {(counts['a'] - counts['b']) / counts['b'] * med['b']:.3f} s at (b)'s median rate")
    if compiled:
        print(f"  delta (c)-(b): {(counts['c'] - counts['b']) / 1e9:7.3f} G instructions"
              f" = {(counts['c'] - counts['b']) / counts['b'] * med['b']:.3f} s at (b)'s median rate")
PY
