# SPDX-License-Identifier: MIT
# shellcheck shell=bash disable=SC2154
# The stages of tools/scripts/test-all.sh that run outside its CMake build trees: the Python tests on
# pip's torch (pip_stack), the wheel (wheel_stage), Conan (conan_stage). Sourced by test-all.sh,
# whose variables and helpers (out, venvs, jobs, tm, prepared, count_log) they use.
# The Python tests that concern lotus.torch on a venv of pip's torch (tools/scripts/pip-stack.sh),
# with the module and lotus-tool of the gcc variant's build (built here when that variant did not run).
# The venv is kept between runs (like the wheels) and remade only when the stack's pins change.
pip_stack() {  # pip_stack NAME
  local name="$1" venv="$venvs/$1" build="$out/gcc" rc=0
  if prepared "pip-$name"; then cat "$out/root-pip-$name.prepare.log"
  else bash tools/scripts/pip-stack.sh "$name" "$venv" || return 1; fi  # once more, in the foreground
  if [ ! -x "$build/tools/lotus-tool/lotus-tool" ] || ! ls "$build"/python/lotus/_lotus*.so >/dev/null 2>&1; then
    build="$out/pip"
    cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOTUS_TEST_DIRS=python -DLOTUS_BUILD_EXAMPLES=OFF \
      -DLOTUS_BUILD_BENCH=OFF -DLOTUS_WITH_TORCH=OFF >"$out/pip.configure.log" 2>&1 || { cat "$out/pip.configure.log"; return 1; }
    cmake --build "$build" -j "$jobs" --target lotus_python lotus-tool || return 1
  fi
  PYTHONPATH="$build/python" "$venv/bin/python" -m lotus.torch --check 2>&1 | sed 's/^/  /' || true  # what this stack records
  # Two at once (pytest-xdist: most of these tests wait on worker processes); then the matrix's
  # `alone` files, alone (memory: other processes move their Pss; the pip install, a build of its
  # own). The stack's selection and [deselect] rows apply to both.
  local together=() alone=() select=() deselect=()
  read -r -a together <<<"$(tm files "pip-$name" yes)"
  read -r -a alone <<<"$(tm files "pip-$name" alone)"
  read -r -a deselect <<<"$(tm deselect "pip-$name")"
  eval "select=($(tm selection "pip-$name"))"
  pytest_in() {  # pytest_in LOG ARGS...
    (cd tests/python && PYTHONPATH="$build/python" LOTUS_TOOL="$build/tools/lotus-tool/lotus-tool" LOTUS_STACK_VENV="$venv" \
       PYTHONDONTWRITEBYTECODE=1 "$venv/bin/python" -m pytest -q -p no:cacheprovider -rfEs "${select[@]}" "${deselect[@]}" "${@:2}") \
      2>&1 | tee "$1" || rc=1
    count_log pytest "$1" || rc=1
  }
  pytest_in "$out/pip-$name.pytest.log" --durations=15 -n 2 "${together[@]}"
  [ ${#alone[@]} -eq 0 ] || pytest_in "$out/pip-$name-serial.pytest.log" "${alone[@]}"
  return $rc
}
conan_stage() {  # the Conan 2 recipe, offline; its test package's build tree removed afterwards
  local venv="$venvs/conan" rc=0 made=(tools/conan/test_package/build tools/conan/test_package/CMakeUserPresets.json)
  bash tools/scripts/pip-stack.sh conan "$venv" || return 1
  rm -rf "$out/conan-home" "${made[@]}"
  CONAN_HOME="$out/conan-home" "$venv/bin/conan" profile detect --force >/dev/null 2>&1 || return 1
  CONAN_HOME="$out/conan-home" "$venv/bin/conan" create tools/conan --build=missing -nr || rc=1
  rm -rf "${made[@]}"
  return $rc
}
# The wheel variant: the Python tests run against the wheel installed on Debian testing's Python 3.14
# (its default start method, forkserver): the matrix's wheel column and its [deselect] rows.
wheel_stage() {  # build the wheel here, then check it in each root (prepared, or prepared now)
  local rc=0 t=$SECONDS suite args
  if prebuilt wheel; then build_wheel || return 1
  elif [ "$(cat "$out/wheel.prebuild.rc" 2>/dev/null)" != 0 ]; then cat "$out/wheel.prebuild.log"; return 1; fi
  echo "wheel: built in $((SECONDS - t)) s"
  rm -f "$out/wheel-testing.pytest.log"
  for suite in bookworm testing; do
    t=$SECONDS
    args=(--suite "$suite")
    [ "$suite" = bookworm ] || args+=(--build --tests "$(tm files wheel yes) $(tm deselect wheel)")
    if prepared "wheel-$suite"; then
      grep -v '^du: ' "$out/root-wheel-$suite.prepare.log" | tail -3
    else
      rm -rf --one-file-system "$out/root-wheel-$suite"
      bash tools/packaging/check-wheel.sh "${args[@]}" --prepare "$out/root-wheel-$suite" || { rc=1; continue; }
    fi
    LOTUS_WHEEL_PYTEST_LOG="$out/wheel-testing.pytest.log" \
      bash tools/packaging/check-wheel.sh "${args[@]}" --root "$out/root-wheel-$suite" "$out/wheel-dist" || rc=1
    echo "wheel: $suite checked in $((SECONDS - t)) s"
  done
  count_log pytest "$out/wheel-testing.pytest.log" || rc=1
  return $rc
}
