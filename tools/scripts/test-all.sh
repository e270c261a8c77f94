#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The whole lotus test suite: install dependencies, then every build variant CI checks.
#   bash tools/scripts/test-all.sh                        the default variants of this Debian release
#   LOTUS_VARIANTS="gcc" bash tools/scripts/test-all.sh   only some variants
#   LOTUS_DRY_RUN=1 bash tools/scripts/test-all.sh        what each variant would run; nothing runs
# Which variants run by default and which tests run on which stack (Debian's torch, pip's, the
# wheel's Python 3.14) is tools/scripts/test-matrix.txt, the one table; this script says how.
# Build trees go to build-ci/<variant> (LOTUS_BUILD_ROOT). Each stage prints `::: VARIANT: what` as
# it starts and `::: VARIANT passed (N s)` as it ends; the run ends with each stage's time and the total.
# Variants:
#   lint        SPDX lines, tracked outputs, clang-format-14, single_include freshness
#   gcc         everything with the machine's g++ and -Werror (the tests' own programs at -O1)
#   clang       the tool, runtime/collector/CMake/NVTX/ITT tests, the fuzzers, at -O1
#   asan, tsan  core, config, tool under ASan+UBSan; core, config, collector under TSan
#   single      core and config against the generated header;  disabled: LOTUS_DISABLE
#   demo        tools/scripts/demo.sh on this machine, its outputs checked
#   fresh       the demo in a debootstrap Debian 12 root; fresh13: the demo, then `stack`, in a
#               Debian 13 root (root and the Debian archive needed; tools/scripts/fresh-demo.sh)
#   stack       the tool, Python and docs tests with -Werror on the machine's own compiler and torch
#   pip-newest, pip-middle   Python tests on venvs of pip's torch (tools/scripts/pip-stacks.txt;
#               about 2.9 GB of wheels each, kept in ~/.cache/lotus-wheels, the venvs in
#               ~/.cache/lotus-venvs until the pins change) against the gcc variant's build
#   wheel       tools/packaging/build-wheel.sh's wheels, checked by tools/packaging/check-wheel.sh in
#               debootstrap Debian 12 and testing roots without a compiler (Python 3.14's tests
#               against the installed wheel); the roots are prepared while the first variants build
#   conan       `conan create tools/conan` (Conan 2 from PyPI in a venv; no remote)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
codename="$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")" || codename=""
matrix="${LOTUS_TEST_MATRIX:-$root/tools/scripts/test-matrix.txt}"  # another: tests/docs' cases

matrix_rows() {  # matrix_rows SECTION: the section's rows of test-matrix.txt, without comments
  awk -v s="[$1]" '/^\[/ {on = ($1 == s); next} {sub(/#.*/, "")} on && NF' "$matrix"
}
# The default variants: the matrix's deb12 column on Debian 12 (CI's machine), else its deb13.
if [ "$codename" = bookworm ]; then release_col=2; else release_col=3; fi
default_variants=$(matrix_rows variants | awk -v c="$release_col" '$c == "yes" {printf "%s%s", sep, $1; sep = " "}')
variants="${LOTUS_VARIANTS:-$default_variants}"
# Only the packages the variants need: `stack` alone needs the stack group, anything else all.
deps_groups="stack"
for v in $variants; do [ "$v" = stack ] || deps_groups="all"; done

jobs="${LOTUS_JOBS:-$(nproc)}"
# ctest runs one test more than the cores: the tests mostly wait (on their subprocesses, sleeps,
# servers); gcc's ctest at -j2 on 2 cores used 667 s of CPU in 713 s (47 % of the cores). The
# tests that measure run alone (RUN_SERIAL) whatever -j says.
ctest_jobs="${LOTUS_CTEST_JOBS:-$((jobs + 1))}"
out="${LOTUS_BUILD_ROOT:-$root/build-ci}"
mkdir -p "$out"
passed=0
failed=0
failures=()
stage_times=()
# "failed total" per test log, appended by the stages (each runs in a subshell of its own).
counts="$out/.test-counts"
: >"$counts"

stage() {  # stage VARIANT WHAT COMMAND...
  local name="$1" what="$2"; shift 2
  local t0=$SECONDS result
  echo "::: $name: $what"
  # In the background, waited for: Ctrl-C or SIGTERM runs the trap at once, not when it ends.
  "$@" </dev/null &
  stage_pid=$!
  if wait "$stage_pid"; then
    passed=$((passed + 1))
    result=passed
  else
    failed=$((failed + 1))
    failures+=("$name")
    result=FAILED
  fi
  echo "::: $name $result ($((SECONDS - t0)) s)"
  stage_times+=("$(printf 'stage  %-11s %6d s  %s' "$name" "$((SECONDS - t0))" "$result")")
}

# ---- what runs where: tools/scripts/test-matrix.txt ----
python_col() {  # the [python] column of a variant or stack (none: the variant runs no such rows)
  case "$1" in gcc) echo 3 ;; stack) echo 4 ;; pip-middle) echo 5 ;; pip-newest) echo 6 ;; wheel) echo 7 ;; esac
}
in_run() { case " $variants " in *" $1 "*) return 0 ;; esac; return 1; }
matrix_check() {  # every cell one of its column's words; every variant known to this script
  local bad
  bad=$(matrix_rows variants | awk '($2 != "yes" && $2 != "no") || ($3 != "yes" && $3 != "no") || NF < 4 {print "[variants] " $0}'
        matrix_rows python | awk 'NF != 7 || $3 !~ /^(yes|no|not-with-newest|not-with-pips)$/ ||
                                  $4 !~ /^(yes|no)$/ || $5 !~ /^(yes|no)$/ || $6 !~ /^(yes|alone|no)$/ ||
                                  $7 !~ /^(yes|no)$/ {print "[python] " $0}'
        matrix_rows deselect | awk 'NF != 2 || $1 !~ /^(pip-middle|pip-newest|wheel)$/ {print "[deselect] " $0}')
  [ -z "$bad" ] || { printf 'test-all: %s: bad row: %s\n' "$matrix" "$bad" >&2; exit 2; }
}
matrix_check
variant_selection() {  # the [variants] table's selection of a variant ("" for all)
  matrix_rows variants | awk -v v="$1" '$1 == v {$1 = $2 = $3 = ""; sub(/^ +/, ""); if ($0 != "all" && $0 != "-") print; exit}'
}
python_excluded() {  # the ctest names of the Python tests a variant leaves out, in this run
  local col newest=0 pips=0
  col=$(python_col "$1")
  in_run pip-newest && newest=1
  in_run pip-newest && in_run pip-middle && pips=1
  matrix_rows python | awk -v c="$col" -v newest="$newest" -v pips="$pips" '$1 != "-" &&
    ($c == "no" || ($c == "not-with-newest" && newest) || ($c == "not-with-pips" && pips)) {print $1}'
}
ctest_selection() {  # ctest_selection VARIANT: its ctest arguments, the Python rows' exclusion added
  local sel names
  sel=$(variant_selection "$1")
  if [ -n "$(python_col "$1")" ]; then
    # As regular expressions: `.` literal, a row's `*` (python.loader_*) any name.
    names=$(python_excluded "$1" | awk '!seen[$0]++' | sed 's/\./\\./g; s/\*/.*/g' | paste -sd'|')
    [ -z "$names" ] || sel="${sel:+$sel }-E ^($names)\$"
  fi
  echo "$sel"
}
python_files() {  # python_files STACK VALUE: the files of the rows marked VALUE there, each once
  # (a row's glob, test_loader_*.py, is every such file of tests/python, in name order)
  local f
  matrix_rows python | awk -v c="$(python_col "$1")" -v v="$2" '$2 != "-" && $c == v {print $2}' |
    while read -r f; do
      case "$f" in
        *'*'*) (cd "$root/tests/python" && for g in $f; do [ -e "$g" ] && echo "$g"; done) ;;
        *) echo "$f" ;;
      esac
    done | awk '!seen[$0]++' | paste -sd' '
}
python_deselect() {  # python_deselect STACK: --deselect arguments of the [deselect] rows
  matrix_rows deselect | awk -v s="$1" '$1 == s {printf "%s--deselect %s", sep, $2; sep = " "}'
}

# What a variant builds when not everything (the tests-<area> targets: what `ctest -L <area>` runs).
declare -A targets=(
  [clang]="lotus-tool tests-core tests-config tests-collector tests-cmake tests-nvtx tests-itt tests-fuzz"
)
configure_build_test() {  # dir ctest-args -- cmake-args...
  local dir="$1" ctest_args="$2"; shift 2
  cmake -S "$root" -B "$out/$dir" -G Ninja "$@" >"$out/$dir.configure.log" 2>&1 \
    || { cat "$out/$dir.configure.log"; return 1; }
  # shellcheck disable=SC2086
  cmake --build "$out/$dir" -j "$jobs" ${targets[$dir]:+--target ${targets[$dir]}} || return 1
  local log="$out/$dir.ctest.log" rc=0
  # shellcheck disable=SC2086
  (cd "$out/$dir" && ctest --output-on-failure -j "$ctest_jobs" $ctest_args) 2>&1 | tee "$log" || rc=1
  count_ctest_log "$log" || rc=1
  return $rc
}

count_ctest_log() {  # adds a ctest log's "100% tests passed, 0 tests failed out of 42" to the totals
  local line
  line=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$1" 2>/dev/null | tail -1 || true)
  [ -n "$line" ] || return 1
  echo "$(sed -E 's/.* ([0-9]+) tests? failed out of.*/\1/' <<<"$line") $(sed -E 's/.*out of ([0-9]+).*/\1/' <<<"$line")" >>"$counts"
}

count_pytest_log() {  # adds pytest's closing "12 passed, 1 failed, 3 skipped in 9.1s" to the totals
  local line
  # With -q the line stands alone; without it, it is framed by "=" ("== 12 passed ... in 9.1s ==").
  line=$(grep -E '^(=+ )?[0-9]+ (passed|failed|skipped|errors?|deselected|xfailed|xpassed|warnings?)(,.*)? in [0-9.]+s' \
           "$1" 2>/dev/null | tail -1 || true)
  [ -n "$line" ] || return 1
  # "failed total": failures and errors count as failed; skipped and deselected tests not at all.
  awk '{for (i = 2; i <= NF; i++) { k = $i; sub(/[,=]+$/, "", k)
          if (k == "passed") p += $(i - 1); else if (k == "failed" || k == "error" || k == "errors") f += $(i - 1) }}
       END {print f + 0, p + f}' <<<"$line" >>"$counts"
}

# The Python tests that concern lotus.torch on a venv of pip's torch (tools/scripts/pip-stack.sh),
# with the module and lotus-tool of the gcc variant's build (built here when that variant did not run).
pip_stack() {  # pip_stack NAME
  # The venv is kept between runs (like the wheels) and remade only when the stack's pins change.
  local name="$1" venv="${LOTUS_VENV_CACHE:-$HOME/.cache/lotus-venvs}/$1" build="$out/gcc" rc=0
  local pid="${prepare_pid[pip-$name]:-}"
  if [ -n "$pid" ] && prepared "pip-$name" "$pid"; then
    cat "$out/root-pip-$name.prepare.log"
  else  # not prepared in the background, or that failed: once more, in the foreground
    [ -z "$pid" ] || tail -5 "$out/root-pip-$name.prepare.log"
    bash tools/scripts/pip-stack.sh "$name" "$venv" || return 1
  fi
  if [ ! -x "$build/tools/lotus-tool/lotus-tool" ] || ! ls "$build"/python/lotus/_lotus*.so >/dev/null 2>&1; then
    build="$out/pip"
    cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOTUS_TEST_DIRS=python \
      -DLOTUS_BUILD_EXAMPLES=OFF -DLOTUS_BUILD_BENCH=OFF -DLOTUS_WITH_TORCH=OFF >"$out/pip.configure.log" 2>&1 \
      || { cat "$out/pip.configure.log"; return 1; }
    cmake --build "$build" -j "$jobs" --target lotus_python lotus-tool || return 1
  fi
  PYTHONPATH="$build/python" "$venv/bin/python" -m lotus.torch --check 2>&1 | sed 's/^/  /' || true  # what this stack records
  # Two at once (pytest-xdist: most of these tests wait on worker processes); then, alone, the
  # matrix's `alone` files (the memory tests: other processes move their Pss; the start-up's parts,
  # measured against the job's own clock; the pip install, a build of its own). The stack's
  # selection in the [variants] table (pip-middle: its workers started by fork only) and its
  # [deselect] rows apply to both.
  local together=() alone=() select=() deselect=()
  read -r -a together <<<"$(python_files "pip-$name" yes)"
  read -r -a alone <<<"$(python_files "pip-$name" alone)"
  read -r -a deselect <<<"$(python_deselect "pip-$name")"
  eval "select=($(variant_selection "pip-$name"))"
  select+=("${deselect[@]}")
  local log="$out/pip-$name.pytest.log" log2="$out/pip-$name-serial.pytest.log"
  (cd tests/python && PYTHONPATH="$build/python" LOTUS_TOOL="$build/tools/lotus-tool/lotus-tool" \
     LOTUS_STACK_VENV="$venv" PYTHONDONTWRITEBYTECODE=1 \
     "$venv/bin/python" -m pytest -q -p no:cacheprovider -rfEs --durations=15 -n 2 "${select[@]}" "${together[@]}") 2>&1 | tee "$log" || rc=1
  count_pytest_log "$log" || rc=1
  if [ ${#alone[@]} -gt 0 ]; then
    (cd tests/python && PYTHONPATH="$build/python" LOTUS_TOOL="$build/tools/lotus-tool/lotus-tool" \
       LOTUS_STACK_VENV="$venv" PYTHONDONTWRITEBYTECODE=1 \
       "$venv/bin/python" -m pytest -q -p no:cacheprovider -rfEs "${select[@]}" "${alone[@]}") 2>&1 | tee "$log2" || rc=1
    count_pytest_log "$log2" || rc=1
  fi
  return $rc
}

# The fresh roots are debootstrapped and their packages downloaded in the background while the
# variants before them build (network time under compile time); the stages then run in them.
declare -A prepare_pid=()
start_prepare() {  # start_prepare SUITE [--tests]
  local suite="$1"; shift
  rm -rf --one-file-system "$out/root-$suite" "$out/root-$suite.prepare.log"
  rm -f "$out/root-$suite.prepare.rc"
  (rc=0
   bash tools/scripts/fresh-demo.sh --suite "$suite" "$@" --prepare "$out/root-$suite" \
     >"$out/root-$suite.prepare.log" 2>&1 </dev/null || rc=$?
   echo "$rc" >"$out/root-$suite.prepare.rc") &
  prepare_pid[$suite]=$!
}

prepared() {  # prepared SUITE: waits for the background preparation; true when it succeeded
  local rcfile="$out/root-$1.prepare.rc"
  while [ ! -f "$rcfile" ] && kill -0 "$2" 2>/dev/null; do sleep 2; done
  [ "$(cat "$rcfile" 2>/dev/null)" = 0 ]
}

fresh_stage() {  # fresh_stage SUITE [--tests]: the demo (and the stack tests) in a fresh root
  local suite="$1"; shift
  local rc=0 where=() pid="${prepare_pid[$suite]:-}"
  if [ -n "$pid" ] && prepared "$suite" "$pid"; then
    tail -1 "$out/root-$suite.prepare.log"
    where=(--root "$out/root-$suite")
  else
    [ -z "$pid" ] || { tail -5 "$out/root-$suite.prepare.log"; echo "fresh: preparing the $suite root failed; starting afresh"; }
    rm -rf --one-file-system "$out/root-$suite"
  fi
  bash tools/scripts/fresh-demo.sh --suite "$suite" "$@" "${where[@]}" || rc=1
  return $rc
}

fresh13() {  # the Debian 13 root: the demo, then the stack variant; its ctest counts are ours too
  rm -f "$out/stack13.ctest.log"
  local rc=0
  LOTUS_FRESH_CTEST_LOG="$out/stack13.ctest.log" fresh_stage trixie --tests || rc=1
  count_ctest_log "$out/stack13.ctest.log" || rc=1
  return $rc
}

demo() {  # the README's first command on this machine, and its outputs checked
  rm -rf "$out/demo_out"
  LOTUS_DEMO_BUILD="$out/demo" bash tools/scripts/demo.sh "$out/demo_out" || return 1
  bash tools/scripts/check-demo-out.sh "$out/demo_out" "$out/demo/tools/lotus-tool/lotus-tool"
}

lint() {
  bash tools/scripts/check-spdx.sh || return 1
  bash tools/scripts/check-tracked.sh || return 1
  bash tools/scripts/check-layout.sh || return 1
  python3 tools/scripts/amalgamate.py --check || return 1
  python3 tools/scripts/amalgamate.py && git diff --exit-code -- single_include/ || return 1
  local files
  files=$(git ls-files '*.hpp' '*.cpp' '*.h' | grep -v '^single_include/')
  # The style is clang-format 14's (Debian 12); another version formats differently.
  if ! command -v clang-format-14 >/dev/null; then
    echo "lint: clang-format-14 not installed here (Debian 12 has it): formatting not checked"
    return 0
  fi
  # shellcheck disable=SC2086
  clang-format-14 --dry-run -Werror $files
}

interrupted() {  # Ctrl-C or SIGTERM: end every child (each fresh root's preparation removes its root)
  trap - INT TERM
  echo "test-all: $1: ending the running stage and the background root preparations" >&2
  # Job control is on: the stage and each preparation are process groups of their own, so the
  # signal reaches every process in them, those started after this moment included.
  local g i groups=("${stage_pid:-}" "${prepare_pid[@]}")
  for g in "${groups[@]}"; do [ -z "$g" ] || kill -TERM -- "-$g" 2>/dev/null || true; done
  # fresh-demo.sh unmounts and removes its root in its own SIGTERM cleanup: let it finish, then
  # end what is left.
  for ((i = 0; i < 120; i++)); do
    local alive=0
    for g in "${groups[@]}"; do [ -z "$g" ] || ! kill -0 -- "-$g" 2>/dev/null || alive=1; done
    [ "$alive" = 1 ] || break
    sleep 0.5
  done
  for g in "${groups[@]}"; do [ -z "$g" ] || kill -KILL -- "-$g" 2>/dev/null || true; done
  wait 2>/dev/null || true
  local d
  for d in "$out"/root-bookworm "$out"/root-trixie "$out"/root-wheel-*; do
    [ -d "$d" ] || continue
    if grep -q " $d" /proc/mounts; then
      echo "test-all: $d still has mounts; not removing it" >&2
    else
      rm -rf --one-file-system "$d" 2>/dev/null || true
    fi
  done
  echo "test-all: stopped; nothing left running" >&2
  exit "$2"
}
set -m  # each background job (a stage, a root's preparation) in a process group of its own
stage_pid=""
trap 'interrupted SIGINT 130' INT
trap 'interrupted SIGTERM 143' TERM

# The wheel variant: the Python tests run against the wheel installed on Debian testing's Python 3.14
# (its default start method, forkserver): the matrix's wheel column and its [deselect] rows.
PY314_TESTS="$(python_files wheel yes)"
PY314_DESELECT="$(python_deselect wheel)"
start_wheel_prepare() {  # start_wheel_prepare SUITE [--build]: root, venv of pip's torch, .debs
  local suite="$1"; shift
  rm -rf --one-file-system "$out/root-wheel-$suite" "$out/root-wheel-$suite.prepare.log"
  rm -f "$out/root-wheel-$suite.prepare.rc"
  (rc=0
   bash tools/packaging/check-wheel.sh --suite "$suite" "$@" --prepare "$out/root-wheel-$suite" \
     >"$out/root-wheel-$suite.prepare.log" 2>&1 </dev/null || rc=$?
   echo "$rc" >"$out/root-wheel-$suite.prepare.rc") &
  prepare_pid[wheel-$suite]=$!
}
conan_stage() {  # the Conan 2 recipe, offline; its test package's build tree removed afterwards
  local venv="${LOTUS_VENV_CACHE:-$HOME/.cache/lotus-venvs}/conan" rc=0
  bash tools/scripts/pip-stack.sh conan "$venv" || return 1
  rm -rf "$out/conan-home" tools/conan/test_package/build tools/conan/test_package/CMakeUserPresets.json
  CONAN_HOME="$out/conan-home" "$venv/bin/conan" profile detect --force >/dev/null 2>&1 || return 1
  CONAN_HOME="$out/conan-home" "$venv/bin/conan" create tools/conan --build=missing -nr || rc=1
  rm -rf tools/conan/test_package/build tools/conan/test_package/CMakeUserPresets.json
  return $rc
}
wheel_stage() {  # build the wheel here, then check it in each root (prepared, or prepared now)
  local rc=0 t=$SECONDS suite args pid
  rm -rf --one-file-system "$out/wheel-dist"
  LOTUS_WHEEL_WORK="$out/wheel" bash tools/packaging/build-wheel.sh "$out/wheel-dist" || return 1
  echo "wheel: built in $((SECONDS - t)) s"
  rm -f "$out/wheel-testing.pytest.log"
  for suite in bookworm testing; do
    t=$SECONDS
    args=(--suite "$suite")
    [ "$suite" = bookworm ] || args+=(--build --tests "$PY314_TESTS $PY314_DESELECT")
    pid="${prepare_pid[wheel-$suite]:-}"
    if [ -n "$pid" ] && prepared "wheel-$suite" "$pid"; then
      grep -v '^du: ' "$out/root-wheel-$suite.prepare.log" | tail -3
    else
      [ -z "$pid" ] || tail -5 "$out/root-wheel-$suite.prepare.log"
      rm -rf --one-file-system "$out/root-wheel-$suite"
      bash tools/packaging/check-wheel.sh "${args[@]}" --prepare "$out/root-wheel-$suite" || { rc=1; continue; }
    fi
    LOTUS_WHEEL_PYTEST_LOG="$out/wheel-testing.pytest.log" \
      bash tools/packaging/check-wheel.sh "${args[@]}" --root "$out/root-wheel-$suite" "$out/wheel-dist" || rc=1
    echo "wheel: $suite checked in $((SECONDS - t)) s"
  done
  count_pytest_log "$out/wheel-testing.pytest.log" || rc=1
  return $rc
}

# What this run will do, before it does it.
echo "test-all: variants: $variants; build trees in $out"
case " $variants " in *" fresh "*|*" fresh13 "*)
  echo "test-all: fresh/fresh13 debootstrap minimal Debian roots into $out/root-* from the Debian archive" \
       "(in the background while the first variants build: 0.8 GB and 1-4 min a root, about 3 GB once" \
       "built in; each removed after its stage, and on Ctrl-C)" ;;
esac
case " $variants " in *" pip-"*)
  echo "test-all: pip-* make venvs of pip's torch in ${LOTUS_VENV_CACHE:-$HOME/.cache/lotus-venvs} (5.7 GB a" \
       "stack, from 2.9 GB of PyPI wheels kept in ${LOTUS_WHEEL_CACHE:-$HOME/.cache/lotus-wheels}; both kept until" \
       "the pins change)" ;;
esac
echo "test-all: a quick run without roots or venvs: LOTUS_VARIANTS=\"lint gcc\" bash tools/scripts/test-all.sh"

if [ -n "${LOTUS_DRY_RUN:-}" ]; then  # what each variant would run, from the matrix; nothing runs
  for v in $variants; do
    case "$v" in
      pip-newest|pip-middle)
        echo "dry-run: $v: pytest -n 2 $(variant_selection "$v") $(python_deselect "$v") $(python_files "$v" yes)"
        alone_files=$(python_files "$v" alone)
        [ -z "$alone_files" ] || echo "dry-run: $v: then alone: pytest $(variant_selection "$v") $alone_files" ;;
      wheel) echo "dry-run: wheel: on Python 3.14: pytest -n 2 $PY314_TESTS" \
                  "($(matrix_rows deselect | awk '$1 == "wheel"' | wc -l) deselected)" ;;
      stack) echo "dry-run: stack: ctest ${LOTUS_STACK_CTEST:-$(ctest_selection stack)}" ;;
      lint|demo|fresh|fresh13|conan) echo "dry-run: $v: its own script, no test selection" ;;
      *) if matrix_rows variants | awk -v v="$v" '$1 == v {f = 1} END {exit !f}'; then
           sel=$(ctest_selection "$v")
           echo "dry-run: $v: ctest ${sel:-(every test its build has)}"
         else
           echo "unknown variant: $v" >&2; exit 2
         fi ;;
    esac
  done | tr -s ' '
  exit 0
fi

# shellcheck disable=SC2086
bash tools/scripts/install-deps.sh $deps_groups

start_pip_prepare() {  # start_pip_prepare NAME: the stack's venv made while the first variants build
  rm -f "$out/root-pip-$1.prepare.rc"
  (rc=0
   bash tools/scripts/pip-stack.sh "$1" "${LOTUS_VENV_CACHE:-$HOME/.cache/lotus-venvs}/$1" \
     >"$out/root-pip-$1.prepare.log" 2>&1 </dev/null || rc=$?
   echo "$rc" >"$out/root-pip-$1.prepare.rc") &
  prepare_pid[pip-$1]=$!
}

case " $variants " in *" pip-newest "*) start_pip_prepare newest ;; esac
case " $variants " in *" pip-middle "*) start_pip_prepare middle ;; esac
case " $variants " in *" fresh13 "*) start_prepare trixie --tests ;; esac
case " $variants " in *" fresh "*) start_prepare bookworm ;; esac
case " $variants " in *" wheel "*) start_wheel_prepare bookworm; start_wheel_prepare testing --build ;; esac
# The stack variant proves a release's own packages (lotus-tool and the module built by its GCC
# with -Werror, lotus.torch's records on its torch, the docs' commands); the gcc variant runs the
# Python tests on Debian 12's torch 1.13, but leaves to pip-newest and pip-middle what they run
# when they are in the run (the pip install, the flight recorder, memory, frames, autotune): the
# matrix's stack and gcc columns.
stack_ctest="${LOTUS_STACK_CTEST:-$(ctest_selection stack)}"
gcc_ctest="$(ctest_selection gcc)"
for v in $variants; do
  case "$v" in
    lint) stage lint "SPDX lines, tracked outputs, clang-format-14 and single_include freshness" lint ;;
    demo) stage demo "tools/scripts/demo.sh on this machine, its outputs checked" demo ;;
    fresh) stage fresh "tools/scripts/demo.sh on a debootstrap Debian 12 root" fresh_stage bookworm ;;
    conan) stage conan "conan create tools/conan (Conan 2, offline), its test package's traced program" conan_stage ;;
    wheel) stage wheel "lotus-trace's wheel built, installed and checked on Debian 12 (3.11) and testing (3.14) roots without a compiler" wheel_stage ;;
    fresh13) stage fresh13 "tools/scripts/demo.sh, then the stack variant, on a debootstrap Debian 13 root" fresh13 ;;
    stack) stage stack "lotus-tool built, Python and docs tests on this release's GCC, CLI11 and torch, -Werror" \
             configure_build_test stack "$stack_ctest" \
             -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=g++ -DLOTUS_WERROR=ON \
             -DLOTUS_TEST_DIRS="python;docs" -DLOTUS_BUILD_BENCH=OFF -DLOTUS_WITH_TORCH=OFF ;;
    # The tests' own programs at -O1 (40 % less CPU than -O3); lotus-tool, the examples and the
    # Python module, what users build, at Release's -O3.
    # The benchmarks are built (not run: bench/README.md runs them), but the libtorch and peer ones.
    gcc) stage gcc "full suite, -Werror" configure_build_test gcc "$gcc_ctest" \
           -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=g++ -DLOTUS_WERROR=ON -DLOTUS_BUILD_BENCH=ON \
           "-DLOTUS_BENCH_DIRS=core;collector;runtime;tool;live" \
           -DLOTUS_TEST_CXX_FLAGS=-O1 ;;
    # Clang's warnings come from its front end, whatever the level: the variant builds at -O1
    # (its build was 370 s of the stage's 434 at Release's -O3); gcc proves the -O3 build.
    clang) stage clang "the tool, runtime/collector/CMake tests and examples, -Werror, fuzzers" configure_build_test clang "$(ctest_selection clang)" \
             -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG" -DCMAKE_CXX_COMPILER=clang++ -DLOTUS_WERROR=ON \
             -DLOTUS_TEST_DIRS="core;config;collector;tool;cmake;nvtx;itt" -DLOTUS_BUILD_PYTHON=OFF \
             -DLOTUS_WITH_TORCH=OFF -DLOTUS_BUILD_BENCH=OFF -DLOTUS_FUZZ=ON -DLOTUS_FUZZ_SECONDS=10 ;;
    asan) stage asan "ASan+UBSan: core, config, tool" configure_build_test asan "$(ctest_selection asan)" \
            -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS=-O1 -DCMAKE_CXX_COMPILER=g++ \
            -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DLOTUS_SANITIZE_DEBUG_INFO=-g1 -DLOTUS_TEST_CXX_FLAGS=-O0 \
            -DLOTUS_SANITIZE=address,undefined -DLOTUS_TEST_DIRS="core;config;tool" \
            -DLOTUS_BUILD_EXAMPLES=OFF -DLOTUS_BUILD_BENCH=OFF -DLOTUS_WITH_TORCH=OFF -DLOTUS_BUILD_PYTHON=OFF ;;
    tsan) stage tsan "TSan: core, config, collector" configure_build_test tsan "$(ctest_selection tsan)" \
            -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS=-O1 -DCMAKE_CXX_COMPILER=g++ \
            -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DLOTUS_SANITIZE_DEBUG_INFO=-g1 \
            -DLOTUS_SANITIZE=thread -DLOTUS_TEST_DIRS="core;config;collector" \
            -DLOTUS_BUILD_EXAMPLES=OFF -DLOTUS_BUILD_TOOLS=OFF -DLOTUS_BUILD_BENCH=OFF -DLOTUS_WITH_TORCH=OFF -DLOTUS_BUILD_PYTHON=OFF ;;
    single) stage single "single_include: core and config against the generated header" configure_build_test single "$(ctest_selection single)" \
              -DCMAKE_BUILD_TYPE=Release -DLOTUS_USE_SINGLE_INCLUDE=ON -DLOTUS_TEST_DIRS="core;config" \
              -DLOTUS_TEST_CXX_FLAGS=-O1 \
              -DLOTUS_BUILD_EXAMPLES=OFF -DLOTUS_BUILD_TOOLS=OFF -DLOTUS_BUILD_BENCH=OFF -DLOTUS_WITH_TORCH=OFF -DLOTUS_BUILD_PYTHON=OFF ;;
    pip-newest|pip-middle)
      stage "$v" "lotus.torch's loader families and autotune (newest: and the rest on it) on pip's torch ($(bash tools/scripts/pip-stack.sh --list "${v#pip-}" | grep '^torch==' | cut -d= -f3))" \
        pip_stack "${v#pip-}" ;;
    disabled) stage disabled "LOTUS_DISABLE: examples and the disabled test" configure_build_test disabled "$(ctest_selection disabled)" \
                -DCMAKE_BUILD_TYPE=Release -DLOTUS_DISABLE=ON -DLOTUS_WERROR=ON -DLOTUS_TEST_DIRS=config \
                -DLOTUS_BUILD_TOOLS=OFF -DLOTUS_BUILD_BENCH=OFF -DLOTUS_WITH_TORCH=OFF ;;
    *) echo "unknown variant: $v" >&2; exit 2 ;;
  esac
done

echo
# CI shows only the end of this script's output: the failed tests with their failed checks (the
# first lines of each Catch2 failure, 24 at most) and the end of their output (ctest's
# LastTest.log, 25 lines each, at most 8 tests a variant), then the stage times.
for log in "$out"/*.ctest.log; do
  [ -f "$log" ] || continue
  v=$(basename "$log" .ctest.log)
  sed -n '/The following tests FAILED:/,/^$/p' "$log" | sed "s|^|$v: |"
  last="$out/$v/Testing/Temporary/LastTest.log"
  [ -f "$last" ] || continue
  sed -n -E 's/^[[:space:]]*[0-9]+ - (.*) \((Failed|Timeout|SEGFAULT|Subprocess aborted|Exception|Child aborted|Not Run)\)$/\1/p' \
    "$log" | head -8 | while IFS= read -r t; do
    echo "$v: the end of \"$t\":"
    awk -v t="$t" '/^[0-9]+\/[0-9]+ Testing: / && substr($0, index($0, "Testing: ") + 9) == t {on = 1; n = 0; next}
                   on && index($0, "\"" t "\" end time:") == 1 {on = 0}
                   on && /(: FAILED:|: error: )$/ && nf < 24 {left = 5}
                   on && left > 0 && nf < 24 {fail[nf++] = $0; left--}
                   on {buf[n++ % 25] = $0}
                   END {if (nf > 0) print "  the failed checks (Catch2, first lines of each):"
                        for (i = 0; i < nf; i++) print "  " fail[i]
                        if (nf > 0) print "  the end of its output:"
                        for (i = (n > 25 ? n - 25 : 0); i < n; i++) print "  " buf[i % 25]}' "$last"
  done
done
for log in "$out"/*.pytest.log; do  # pytest's -r summary names each failure on a FAILED/ERROR line
  [ -f "$log" ] || continue
  { grep -E '^(FAILED|ERROR) ' "$log" || true; } | head -20 | cut -c1-300 | sed "s|^|$(basename "$log" .pytest.log): |"
done
echo "stage times:"
printf '%s\n' "${stage_times[@]}"
printf 'total  %-11s %6d s\n' "" "$SECONDS"
[ ${#failures[@]} -eq 0 ] || printf 'failed variant: %s\n' "${failures[@]}"
echo "variants: $passed passed, $failed failed"
read -r tests_failed tests_total < <(awk '{f += $1; t += $2} END {print f + 0, t + 0}' "$counts")
echo "tests: $((tests_total - tests_failed)) passed, $tests_failed failed"
[ "$failed" -eq 0 ]
