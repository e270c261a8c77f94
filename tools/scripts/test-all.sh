#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The whole lotus test suite: install dependencies, then every build variant CI checks.
#   bash tools/scripts/test-all.sh                        the default variants of this Debian release
#   LOTUS_VARIANTS="gcc" bash tools/scripts/test-all.sh   only some variants
#   LOTUS_DRY_RUN=1 bash tools/scripts/test-all.sh        what each variant would run; nothing runs
# What each variant is, which run by default, how the CMake ones are built and which tests run on
# which stack (Debian's torch, pip's, the wheel's Python 3.14): tools/scripts/test-matrix.txt, the
# one table (tools/scripts/test-matrix.py reads it); this script says how. Build trees go to
# build-ci/<variant> (LOTUS_BUILD_ROOT). Each stage prints `::: VARIANT: what` as it starts and
# `::: VARIANT passed (N s)` as it ends; the run ends with each stage's time and the total.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
codename="$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")" || codename=""
matrix="${LOTUS_TEST_MATRIX:-$root/tools/scripts/test-matrix.txt}"  # another: tests/docs' cases
# The table is read by Python (tools/deps.txt's build group; a minimal root may lack it).
command -v python3 >/dev/null || bash tools/scripts/install-deps.sh build
tm() { python3 "$root/tools/scripts/test-matrix.py" --matrix "$matrix" --variants "${variants:-}" "$@"; }
tm check
# The default variants: the matrix's deb12 column on Debian 12 (CI's machine), else its deb13.
if [ "$codename" = bookworm ]; then release_col=deb12; else release_col=deb13; fi
variants="${LOTUS_VARIANTS:-$(tm defaults "$release_col")}"
# Only the packages the variants need: `stack` alone needs the stack group, anything else all.
deps_groups=stack; for v in $variants; do [ "$v" = stack ] || deps_groups=all; done
jobs="${LOTUS_JOBS:-$(nproc)}"
# ctest runs one test more than the cores: the tests mostly wait (on their subprocesses, sleeps, servers;
# gcc's ctest at -j2 on 2 cores used 47 % of them); those that measure run alone (RUN_SERIAL).
ctest_jobs="${LOTUS_CTEST_JOBS:-$((jobs + 1))}"
out="${LOTUS_BUILD_ROOT:-$root/build-ci}"
venvs="${LOTUS_VENV_CACHE:-$HOME/.cache/lotus-venvs}"  # the pip stacks' and conan's, kept between runs
mkdir -p "$out"
passed=0 failed=0 failures=() stage_times=()
# "failed total" per test log, appended by the stages (each runs in a subshell of its own).
counts="$out/.test-counts"; : >"$counts"
count_log() { tm count "$1" "$2" >>"$counts"; }  # count_log ctest|pytest LOG: false without a total
stage() {  # stage VARIANT WHAT COMMAND...
  local name="$1" what="$2" t0=$SECONDS result; shift 2
  echo "::: $name: $what"
  # In the background, waited for: Ctrl-C or SIGTERM runs the trap at once, not when it ends.
  "$@" </dev/null &
  stage_pid=$!
  if wait "$stage_pid"; then passed=$((passed + 1)) result=passed
  else failed=$((failed + 1)) result=FAILED failures+=("$name"); fi
  echo "::: $name $result ($((SECONDS - t0)) s)"
  stage_times+=("$(printf 'stage  %-11s %6d s  %s' "$name" "$((SECONDS - t0))" "$result")")
}
cmake_build() {  # cmake_build VARIANT: its [build] rows configured and built into build-ci/VARIANT
  local dir="$1" args=() targets
  mapfile -t args < <(tm cmake "$dir")
  targets=$(tm targets "$dir")
  cmake -S "$root" -B "$out/$dir" -G Ninja "${args[@]}" >"$out/$dir.configure.log" 2>&1 \
    || { cat "$out/$dir.configure.log"; return 1; }
  # shellcheck disable=SC2086
  cmake --build "$out/$dir" -j "$jobs" ${targets:+--target $targets}
}
# The CMake variants after the first are built in the background, one after the other, in the idle
# scheduling class (chrt -i: only on CPU the stages leave unused; gcc's ctest used about half the
# cores, the pip stages less). A variant is claimed (mkdir) by the background or by its stage,
# whichever comes first; a stage whose tree the background claimed waits for it, then builds what
# is left (nothing: the build's errors, if any, are shown again there).
claim() { mkdir "$out/.claim-$1" 2>/dev/null; }
build_wheel() { rm -rf --one-file-system "$out/wheel-dist"; LOTUS_WHEEL_WORK="$out/wheel" bash tools/packaging/build-wheel.sh "$out/wheel-dist"; }
prebuild() {  # prebuild VARIANT... (the wheel variant: its wheel)
  chrt -i -p 0 "$BASHPID" >/dev/null 2>&1 || renice -n 19 -p "$BASHPID" >/dev/null 2>&1 || true
  local v; for v in "$@"; do
    claim "$v" || continue
    if [ "$v" = wheel ]; then build_wheel; else cmake_build "$v"; fi >"$out/$v.prebuild.log" 2>&1
    echo $? >"$out/$v.prebuild.rc"
  done
}
prebuilt() {  # prebuilt VARIANT: true when its stage builds it; else waits for the background's build
  ! claim "$1" || return 0
  while [ ! -f "$out/$1.prebuild.rc" ] && kill -0 "${prepare_pid[builds]:-0}" 2>/dev/null; do sleep 2; done
  echo "$1: built in the background (exit $(cat "$out/$1.prebuild.rc" 2>/dev/null || echo '?'))"
  return 1
}
configure_build_test() {  # configure_build_test VARIANT: its [build] rows, then its ctest selection
  local dir="$1" log="$out/$1.ctest.log" rc=0 sel
  sel=$(tm ctest "$dir")
  prebuilt "$dir" || true
  cmake_build "$dir" || return 1
  # shellcheck disable=SC2086
  (cd "$out/$dir" && ctest --output-on-failure -j "$ctest_jobs" $sel) 2>&1 | tee "$log" || rc=1
  count_log ctest "$log" || rc=1
  return $rc
}
# The stages of pip's venvs, the wheel and Conan (pip_stack, wheel_stage, conan_stage).
# shellcheck source=tools/scripts/test-stages.sh
. "$root/tools/scripts/test-stages.sh"
# The fresh roots (debootstrapped, their packages downloaded), the wheel's roots and the pip stacks'
# venvs are prepared in the background while the variants before them build (network time under
# compile time); the stages then run in them. prepare KEY COMMAND...: the log root-KEY.prepare.log.
declare -A prepare_pid=()
prepare() {
  local key="$1"; shift
  rm -rf --one-file-system "$out/root-$key" "$out/root-$key.prepare.log"
  rm -f "$out/root-$key.prepare.rc"
  (rc=0
   "$@" >"$out/root-$key.prepare.log" 2>&1 </dev/null || rc=$?
   echo "$rc" >"$out/root-$key.prepare.rc") &
  prepare_pid[$key]=$!
}
prepared() {  # prepared KEY: waits for its background preparation, if any; true when it succeeded
  local rcfile="$out/root-$1.prepare.rc" pid="${prepare_pid[$1]:-}"
  [ -n "$pid" ] || return 1
  while [ ! -f "$rcfile" ] && kill -0 "$pid" 2>/dev/null; do sleep 2; done
  [ "$(cat "$rcfile" 2>/dev/null)" = 0 ] && return 0
  tail -5 "$out/root-$1.prepare.log"; echo "test-all: preparing $1 failed; once more in its stage"; return 1
}
fresh_stage() {  # fresh_stage SUITE [--tests]: the demo (and the stack tests) in a fresh root
  local suite="$1"; shift
  local where=()
  if prepared "$suite"; then tail -1 "$out/root-$suite.prepare.log"; where=(--root "$out/root-$suite")
  else rm -rf --one-file-system "$out/root-$suite"; fi
  bash tools/scripts/fresh-demo.sh --suite "$suite" "$@" "${where[@]}"
}
fresh13() {  # the Debian 13 root: the demo, then the stack variant; its ctest counts are ours too
  local rc=0
  rm -f "$out/stack13.ctest.log"
  LOTUS_FRESH_CTEST_LOG="$out/stack13.ctest.log" fresh_stage trixie --tests || rc=1
  count_log ctest "$out/stack13.ctest.log" || rc=1
  return $rc
}
demo() {  # the README's first command on this machine, and its outputs checked
  rm -rf "$out/demo_out"
  LOTUS_DEMO_BUILD="$out/demo" bash tools/scripts/demo.sh "$out/demo_out" || return 1
  bash tools/scripts/check-demo-out.sh "$out/demo_out" "$out/demo/tools/lotus-tool/lotus-tool"
}
interrupted() {  # Ctrl-C or SIGTERM: end every child (each fresh root's preparation removes its root)
  trap - INT TERM
  echo "test-all: $1: ending the running stage and the background root preparations" >&2
  # Job control is on: the stage and each preparation are process groups of their own (the signal
  # reaches every process in them, those started later included). fresh-demo.sh unmounts and removes
  # its root in its own SIGTERM cleanup: let it finish (60 s at most), then end what is left.
  local i d
  signal_all() {
    local g s=1
    for g in "${stage_pid:-}" "${prepare_pid[@]}"; do [ -z "$g" ] || ! kill "$1" -- "-$g" 2>/dev/null || s=0; done
    return $s  # true when it reached a group
  }
  signal_all -TERM || true
  for ((i = 0; i < 120; i++)); do signal_all -0 || break; sleep 0.5; done
  signal_all -KILL || true
  wait 2>/dev/null || true
  for d in "$out"/root-bookworm "$out"/root-trixie "$out"/root-wheel-*; do
    [ -d "$d" ] || continue
    if grep -q " $d" /proc/mounts; then echo "test-all: $d still has mounts; not removing it" >&2
    else rm -rf --one-file-system "$d" 2>/dev/null || true; fi
  done
  echo "test-all: stopped; nothing left running" >&2
  exit "$2"
}
set -m  # each background job (a stage, a root's preparation) in a process group of its own
trap 'interrupted SIGINT 130' INT
trap 'interrupted SIGTERM 143' TERM

# What this run will do, before it does it.
echo "test-all: variants: $variants; build trees in $out"
case " $variants " in *" fresh "*|*" fresh13 "*)
  echo "test-all: fresh/fresh13 debootstrap minimal Debian roots into $out/root-* from the Debian archive" \
       "(in the background while the first variants build: 0.8 GB and 1-4 min a root, about 3 GB once" \
       "built in; each removed after its stage, and on Ctrl-C)" ;;
esac
case " $variants " in *" pip-"*)
  echo "test-all: pip-* make venvs of pip's torch in $venvs (5.7 GB a stack, from 2.9 GB of PyPI wheels" \
       "kept in ${LOTUS_WHEEL_CACHE:-$HOME/.cache/lotus-wheels}; both kept until the pins change)" ;;
esac
echo "test-all: a quick run without roots or venvs: LOTUS_VARIANTS=\"lint gcc\" bash tools/scripts/test-all.sh"
later=(); for v in $variants; do [ -z "$(tm what "$v")" ] && [ "$v" != wheel ] || later+=("$v"); done
[ ${#later[@]} -lt 2 ] || echo "test-all: built in the background (idle scheduling class) while the" \
  "stages before theirs test: ${later[*]:1}"
# What each variant would run, from the matrix; nothing runs.
[ -z "${LOTUS_DRY_RUN:-}" ] || { tm plan; exit 0; }
# shellcheck disable=SC2086
bash tools/scripts/install-deps.sh $deps_groups
rm -rf "$out"/.claim-* "$out"/*.prebuild.rc
[ ${#later[@]} -lt 2 ] || prepare builds prebuild "${later[@]:1}"
for v in $variants; do  # what the stages need from the network, while the first variants build
  case "$v" in
    pip-newest|pip-middle) prepare "$v" bash tools/scripts/pip-stack.sh "${v#pip-}" "$venvs/${v#pip-}" ;;
    fresh13) prepare trixie bash tools/scripts/fresh-demo.sh --suite trixie --tests --prepare "$out/root-trixie" ;;
    fresh) prepare bookworm bash tools/scripts/fresh-demo.sh --suite bookworm --prepare "$out/root-bookworm" ;;
    wheel) prepare wheel-bookworm bash tools/packaging/check-wheel.sh --suite bookworm --prepare "$out/root-wheel-bookworm"
           prepare wheel-testing bash tools/packaging/check-wheel.sh --suite testing --build --prepare "$out/root-wheel-testing" ;;
  esac
done
# The stack variant proves a release's own packages; the gcc variant runs the Python tests on Debian
# 12's torch 1.13, but leaves to pip-newest and pip-middle what they run when they are in the run
# (the pip install, the flight recorder, memory, frames, autotune): the matrix's stack and gcc
# columns. The variants built with CMake are the matrix's [build] rows.
for v in $variants; do
  case "$v" in
    lint) stage lint "SPDX lines, tracked outputs, clang-format-14 and single_include freshness" bash tools/scripts/lint.sh ;;
    demo) stage demo "tools/scripts/demo.sh on this machine, its outputs checked" demo ;;
    fresh) stage fresh "tools/scripts/demo.sh on a debootstrap Debian 12 root" fresh_stage bookworm ;;
    conan) stage conan "conan create tools/conan (Conan 2, offline), its test package's traced program" conan_stage ;;
    wheel) stage wheel "lotus-trace's wheel built, installed and checked on Debian 12 (3.11) and testing (3.14) roots without a compiler" wheel_stage ;;
    fresh13) stage fresh13 "tools/scripts/demo.sh, then the stack variant, on a debootstrap Debian 13 root" fresh13 ;;
    pip-newest|pip-middle)
      stage "$v" "lotus.torch's records of torch's and torchdata's loaders (newest: every Python test that concerns torch) on pip's torch ($(bash tools/scripts/pip-stack.sh --list "${v#pip-}" | grep '^torch==' | cut -d= -f3))" \
        pip_stack "${v#pip-}" ;;
    *) what=$(tm what "$v")
       [ -n "$what" ] || { echo "unknown variant: $v" >&2; exit 2; }
       stage "$v" "$what" configure_build_test "$v" ;;
  esac
done
echo
# CI shows only the end of this script's output: the failed tests with their failed checks and the
# end of their output, then the stage times.
tm failures "$out"
echo "stage times:"
printf '%s\n' "${stage_times[@]}"
printf 'total  %-11s %6d s\n' "" "$SECONDS"
[ ${#failures[@]} -eq 0 ] || printf 'failed variant: %s\n' "${failures[@]}"
echo "variants: $passed passed, $failed failed"
tm totals "$counts"
[ "$failed" -eq 0 ]
