#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The whole lotus test suite: install dependencies, then every build variant CI checks.
#   bash tools/scripts/test-all.sh            everything for this machine's Debian release
#   LOTUS_VARIANTS="gcc" bash tools/scripts/test-all.sh   only some variants
# Variants: lint fresh fresh13 gcc clang asan tsan single disabled stack pip-newest pip-middle. Build trees go to
# build-ci/<variant>. On Debian 12 (the CI machine) the default is every variant but `stack`:
# `fresh` runs tools/scripts/demo.sh in a minimal Debian 12 root made by debootstrap, `fresh13` runs it and
# then the `stack` variant in a Debian 13 root (GCC 14, CLI11 2.4, torch 2.6; root and the Debian
# archive needed; tools/scripts/fresh-demo.sh). `stack` is the tool, Python and docs tests with -Werror on
# the machine's own compiler, Python and torch. On Debian 13 the default is lint, gcc (the whole
# suite with GCC 14), single and disabled; the compiler-variant builds (clang, sanitizers) and the
# fresh roots are proven from Debian 12.
# pip-newest and pip-middle: the Python tests of lotus.torch, its loader families, autotune and
# lotus.frame, run by a venv of pip's torch (tools/scripts/pip-stacks.txt: the newest release and
# one from the middle of the 2.x line; about 2.9 GB of wheels each, downloaded once into
# ~/.cache/lotus-wheels) against the gcc variant's build; pip-newest also pip-installs lotus into
# its venv. Both are in the Debian 12 default.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
codename="$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")" || codename=""
if [ "$codename" = bookworm ]; then
  default_variants="lint fresh gcc pip-newest pip-middle clang asan tsan single disabled fresh13"
else
  default_variants="lint gcc single disabled"
fi
variants="${LOTUS_VARIANTS:-$default_variants}"
# Only the packages the variants need: `stack` alone needs the stack group, anything else all.
deps_groups="stack"
for v in $variants; do [ "$v" = stack ] || deps_groups="all"; done
bash tools/scripts/install-deps.sh $deps_groups

jobs="${LOTUS_JOBS:-$(nproc)}"
out="${LOTUS_BUILD_ROOT:-$root/build-ci}"
mkdir -p "$out"
passed=0
failed=0
failures=()
tests_total=0
tests_failed=0

stage() {  # stage NAME COMMAND...
  local name="$1"; shift
  local t0=$SECONDS
  echo "::: $name"
  if "$@"; then
    passed=$((passed + 1))
    echo "::: $name passed ($((SECONDS - t0)) s)"
  else
    failed=$((failed + 1))
    failures+=("$name")
    echo "::: $name FAILED ($((SECONDS - t0)) s)"
  fi
}

configure_build_test() {  # dir ctest-args -- cmake-args...
  local dir="$1" ctest_args="$2"; shift 2
  cmake -S "$root" -B "$out/$dir" -G Ninja "$@" >"$out/$dir.configure.log" 2>&1 \
    || { cat "$out/$dir.configure.log"; return 1; }
  cmake --build "$out/$dir" -j "$jobs" || return 1
  local log="$out/$dir.ctest.log" rc=0
  # shellcheck disable=SC2086
  (cd "$out/$dir" && ctest --output-on-failure -j "$jobs" $ctest_args) 2>&1 | tee "$log" || rc=1
  count_ctest_log "$log" || rc=1
  return $rc
}

count_ctest_log() {  # adds a ctest log's "100% tests passed, 0 tests failed out of 42" to the totals
  local line
  line=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$1" 2>/dev/null | tail -1 || true)
  [ -n "$line" ] || return 1
  tests_failed=$((tests_failed + $(sed -E 's/.* ([0-9]+) tests? failed out of.*/\1/' <<<"$line")))
  tests_total=$((tests_total + $(sed -E 's/.*out of ([0-9]+).*/\1/' <<<"$line")))
}

count_pytest_log() {  # adds pytest's closing "== 12 passed, 1 failed, 3 skipped in 9.1s ==" to the totals
  local line passed_n failed_n
  line=$(grep -E '^=+ .*(passed|failed|error).* in [0-9.]+s' "$1" 2>/dev/null | tail -1 || true)
  [ -n "$line" ] || return 1
  passed_n=$(grep -oE '[0-9]+ passed' <<<"$line" | cut -d' ' -f1 || true)
  failed_n=$(( $(grep -oE '[0-9]+ failed' <<<"$line" | cut -d' ' -f1 || echo 0) \
             + $(grep -oE '[0-9]+ errors?' <<<"$line" | cut -d' ' -f1 || echo 0) ))
  tests_failed=$((tests_failed + failed_n))
  tests_total=$((tests_total + ${passed_n:-0} + failed_n))
}

# The Python tests that concern lotus.torch on a venv of pip's torch (tools/scripts/pip-stack.sh),
# with the module and lotus-tool of the gcc variant's build (built here when that variant did not run).
pip_stack() {  # pip_stack NAME
  local name="$1" venv="$out/venv-$1" build="$out/gcc" rc=0
  bash tools/scripts/pip-stack.sh "$name" "$venv" || return 1
  if [ ! -x "$build/tools/lotus-tool/lotus-tool" ] || ! ls "$build"/python/lotus/_lotus*.so >/dev/null 2>&1; then
    build="$out/pip"
    cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOTUS_TEST_DIRS=python \
      -DLOTUS_BUILD_EXAMPLES=OFF -DLOTUS_BUILD_BENCH=OFF -DLOTUS_WITH_TORCH=OFF >"$out/pip.configure.log" 2>&1 \
      || { cat "$out/pip.configure.log"; return 1; }
    cmake --build "$build" -j "$jobs" --target lotus_python lotus-tool || return 1
  fi
  "$venv/bin/python" -m lotus.torch --check 2>&1 | sed 's/^/  /' || true  # what this stack records
  local tests=(test_torch.py test_stateful.py test_nodes.py test_autotune.py test_autotune_equivalence.py
               test_frame.py test_flight.py test_live.py test_memory.py test_distributed.py)
  [ "$name" = newest ] && tests+=(test_install.py::test_pip_install_into_a_venv_with_pips_torch)
  local log="$out/pip-$name.pytest.log"
  (cd tests/python && PYTHONPATH="$build/python" LOTUS_TOOL="$build/tools/lotus-tool/lotus-tool" \
     LOTUS_STACK_VENV="$venv" PYTHONDONTWRITEBYTECODE=1 \
     "$venv/bin/python" -m pytest -q -p no:cacheprovider -rs "${tests[@]}") 2>&1 | tee "$log" || rc=1
  count_pytest_log "$log" || rc=1
  return $rc
}

# The fresh roots are debootstrapped and their packages downloaded in the background while the
# variants before them build (network time under compile time); the stages then run in them.
declare -A prepare_pid=()
start_prepare() {  # start_prepare SUITE [--tests]
  local suite="$1"; shift
  rm -rf --one-file-system "$out/root-$suite" "$out/root-$suite.prepare.log"
  bash tools/scripts/fresh-demo.sh --suite "$suite" "$@" --prepare "$out/root-$suite" \
    >"$out/root-$suite.prepare.log" 2>&1 &
  prepare_pid[$suite]=$!
}

fresh_stage() {  # fresh_stage SUITE [--tests]: the demo (and the stack tests) in a fresh root
  local suite="$1"; shift
  local rc=0 where=() pid="${prepare_pid[$suite]:-}"
  if [ -n "$pid" ] && wait "$pid"; then
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

case " $variants " in *" fresh13 "*) start_prepare trixie --tests ;; esac
case " $variants " in *" fresh "*) start_prepare bookworm ;; esac
# The pip install builds everything once more (minutes): with fresh13 it is proven on Debian 13.
gcc_ctest=""
case " $variants " in *" fresh13 "*) gcc_ctest="-E ^python\.pip$" ;; esac
for v in $variants; do
  case "$v" in
    lint) stage "lint: SPDX lines, tracked outputs, clang-format-14 and single_include freshness" lint ;;
    fresh) stage "fresh: tools/scripts/demo.sh on a debootstrap Debian 12 root" fresh_stage bookworm ;;
    fresh13) stage "fresh13: tools/scripts/demo.sh, then the stack variant, on a debootstrap Debian 13 root" fresh13 ;;
    stack) stage "stack: lotus-tool, Python and docs tests on this release's GCC, CLI11 and torch, -Werror" \
             configure_build_test stack "" \
             -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=g++ -DLOTUS_WERROR=ON \
             -DLOTUS_TEST_DIRS="tool;python;docs" -DLOTUS_BUILD_BENCH=OFF -DLOTUS_WITH_TORCH=OFF ;;
    gcc) stage "gcc: full suite, -Werror" configure_build_test gcc "$gcc_ctest" \
           -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=g++ -DLOTUS_WERROR=ON ;;
    clang) stage "clang: everything built, runtime/tool/collector tests, -Werror, fuzzers" configure_build_test clang "-LE python" \
             -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++ -DLOTUS_WERROR=ON \
             -DLOTUS_TEST_DIRS="core;config;collector;tool;cmake;nvtx;itt;python" \
             -DLOTUS_WITH_TORCH=OFF -DLOTUS_BUILD_BENCH=OFF -DLOTUS_FUZZ=ON -DLOTUS_FUZZ_SECONDS=20 ;;
    asan) stage "asan+ubsan: core, config, tool" configure_build_test asan "" \
            -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS=-O1 -DCMAKE_CXX_COMPILER=g++ \
            -DLOTUS_SANITIZE=address,undefined -DLOTUS_TEST_DIRS="core;config;tool" \
            -DLOTUS_BUILD_EXAMPLES=OFF -DLOTUS_BUILD_BENCH=OFF -DLOTUS_WITH_TORCH=OFF -DLOTUS_BUILD_PYTHON=OFF ;;
    tsan) stage "tsan: core, config, collector" configure_build_test tsan "" \
            -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS=-O1 -DCMAKE_CXX_COMPILER=g++ \
            -DLOTUS_SANITIZE=thread -DLOTUS_TEST_DIRS="core;config;collector" \
            -DLOTUS_BUILD_EXAMPLES=OFF -DLOTUS_BUILD_TOOLS=OFF -DLOTUS_BUILD_BENCH=OFF -DLOTUS_WITH_TORCH=OFF -DLOTUS_BUILD_PYTHON=OFF ;;
    single) stage "single_include: core and config against the generated header" configure_build_test single "" \
              -DCMAKE_BUILD_TYPE=Release -DLOTUS_USE_SINGLE_INCLUDE=ON -DLOTUS_TEST_DIRS="core;config" \
              -DLOTUS_BUILD_EXAMPLES=OFF -DLOTUS_BUILD_TOOLS=OFF -DLOTUS_BUILD_BENCH=OFF -DLOTUS_WITH_TORCH=OFF -DLOTUS_BUILD_PYTHON=OFF ;;
    pip-newest|pip-middle)
      stage "$v: lotus.torch, loader families, autotune and frame tests on pip's torch ($(bash tools/scripts/pip-stack.sh --list "${v#pip-}" | grep '^torch==' | cut -d= -f3))" \
        pip_stack "${v#pip-}" ;;
    disabled) stage "LOTUS_DISABLE: examples and the disabled test" configure_build_test disabled "-R config.disabled" \
                -DCMAKE_BUILD_TYPE=Release -DLOTUS_DISABLE=ON -DLOTUS_WERROR=ON -DLOTUS_TEST_DIRS=config \
                -DLOTUS_BUILD_TOOLS=OFF -DLOTUS_BUILD_BENCH=OFF -DLOTUS_WITH_TORCH=OFF ;;
    *) echo "unknown variant: $v" >&2; exit 2 ;;
  esac
done

echo
# The failed tests by name, per ctest log: CI shows only the end of this script's output.
for log in "$out"/*.ctest.log; do
  [ -f "$log" ] || continue
  sed -n '/The following tests FAILED:/,/^$/p' "$log" | sed "s|^|$(basename "$log" .ctest.log): |"
done
[ ${#failures[@]} -eq 0 ] || printf 'failed variant: %s\n' "${failures[@]}"
echo "variants: $passed passed, $failed failed"
echo "tests: $((tests_total - tests_failed)) passed, $tests_failed failed"
[ "$failed" -eq 0 ]
