#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs lotus-trace's wheel as a user does, on a fresh Debian root with no compiler, and checks it:
# a minimal root (debootstrap --variant=minbase, with python3-venv only), a venv there with pip's
# newest torch (tools/scripts/pip-stacks.txt [newest], less pandas, dask and pyarrow, which only
# lotus.frame uses), then
#   1. `pip install lotus-trace` from the wheel's directory (no index) in at most 10 s;
#   2. `python -m lotus.torch --check` passes (every loader family records);
#   3. a traced DataLoader (2 workers, the interpreter's default start method) and the wheel's
#      lotus-tool: `check`, then `report` writes its page (lotus-tool's libdw and libelf are the wheel's);
#   4. with --tests FILES: those tests/python files run against the installed wheel (pytest -n 2);
#   5. g++ and cmake installed (for this step only) and a CMake consumer built against the wheel's
#      package config (find_package(lotus) with -DCMAKE_PREFIX_PATH=<venv>), run, its records checked;
#   6. `pip uninstall lotus-trace` leaves the venv file for file as it was before the install.
# Each step prints its seconds.
#   bash tools/packaging/check-wheel.sh --suite S --prepare ROOT       debootstrap S into ROOT, make the
#        venv (wheels downloaded on this machine, kept in ~/.cache/lotus-wheels: LOTUS_WHEEL_CACHE),
#        download the .debs of step 5 (and of --build); nothing of lotus yet
#   bash tools/packaging/check-wheel.sh --suite S --root ROOT [--build] [--tests "FILES"] WHEEL_DIR
#        run the checks in that root (removed afterwards) with the wheel in WHEEL_DIR; --build first
#        builds the wheel in the root's Python (tools/packaging/build-wheel.sh at this checkout's HEAD)
#        in an overlay of the root, which is discarded, so the checks still see no compiler, and puts
#        it into WHEEL_DIR
# S: bookworm (Debian 12, Python 3.11) or testing (Python 3.14; its default start method is forkserver).
# Needs root, debootstrap and overlayfs; the Debian archive of this machine's apt sources
# (LOTUS_FRESH_MIRROR overrides) and PyPI (for --prepare's downloads only).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
suite=bookworm prepare="" root="" build=0 tests=""
while [ $# -gt 0 ]; do
  case "$1" in
    --suite) suite="${2:?}"; shift 2 ;;
    --prepare) prepare="${2:?}"; shift 2 ;;
    --root) root="${2:?}"; shift 2 ;;
    --build) build=1; shift ;;
    --tests) tests="${2?}"; shift 2 ;;
    -*) echo "check-wheel: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
case "$suite" in bookworm|testing) ;; *) echo "check-wheel: --suite bookworm or testing" >&2; exit 2 ;; esac
[ "$(id -u)" = 0 ] || { echo "check-wheel: needs root (debootstrap, chroot, mount)" >&2; exit 2; }
[ -n "$prepare" ] || [ -n "$root" ] || { echo "check-wheel: --prepare ROOT or --root ROOT" >&2; exit 2; }
[ -n "$prepare" ] && root="$prepare"
root="$(mkdir -p "$root" && cd "$root" && pwd)"
cache="${LOTUS_WHEEL_CACHE:-$HOME/.cache/lotus-wheels}"
t0=$SECONDS
step() { echo "check-wheel $suite: [$((SECONDS - t0)) s] $*"; }
in_root() {  # in_root DIR COMMAND: a clean environment in the chroot, no byte code written
  local r="$1"; shift
  chroot "$r" /usr/bin/env -i HOME=/root PATH=/root/venv/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
    PYTHONDONTWRITEBYTECODE=1 DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_INDEX=1 PIP_FIND_LINKS=/root/.cache/lotus-wheels/wheel bash -c "$*"
}
apt_opts="-o Acquire::Check-Valid-Until=false -o APT::Install-Recommends=false -qq"
consumer_debs="g++ cmake make"
# What tools/packaging/build-wheel.sh needs in the root (tools/deps.txt's tool group, Python's headers).
build_debs="$(LOTUS_DEBIAN_CODENAME=bookworm bash "$here/tools/scripts/deps.sh" tool | tr '\n' ' ') python3-dev python3-venv"

mounts=()
mount_in() {  # mount_in ROOT: what a DataLoader and torch need (/proc, /dev, /dev/shm, /sys), the wheel cache
  local r="$1"
  mount -t proc proc "$r/proc" && mounts+=("$r/proc")
  mount --bind /dev "$r/dev" && mounts+=("$r/dev")
  mount -t tmpfs -o size=2g,mode=1777 shm "$r/dev/shm" && mounts+=("$r/dev/shm")
  mount -t sysfs sys "$r/sys" && mounts+=("$r/sys")
  mkdir -p "$r/root/.cache/lotus-wheels" "$wcache"
  mount --bind "$wcache" "$r/root/.cache/lotus-wheels" && mounts+=("$r/root/.cache/lotus-wheels")
}
unmount_all() {
  local i
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount -l "${mounts[i]}" 2>/dev/null || true; done
  mounts=()
}
cleanup() {
  local rc=$?
  unmount_all
  for d in "$root" "$root.overlay"; do
    for m in root/.cache/lotus-wheels proc sys dev/shm dev/pts dev; do
      mountpoint -q "$d/$m" 2>/dev/null && umount -l "$d/$m" 2>/dev/null || true
    done
  done
  mountpoint -q "$root.overlay" 2>/dev/null && umount -l "$root.overlay" 2>/dev/null || true
  if grep -q " $root" /proc/mounts; then
    echo "check-wheel: $root still has mounts; not removing it" >&2
  elif [ -n "$prepare" ] && [ "$rc" = 0 ]; then
    :  # left for --root
  else
    rm -rf --one-file-system "$root" "$root.overlay" "$root.upper" "$root.work"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -n "$prepare" ] && [ -x "$root/usr/bin/apt-get" ] && [ ! -e "$root/root/venv" ]; then
  step "$root: debootstrap made it already; going on from there"
elif [ -n "$prepare" ]; then
  [ -z "$(ls -A "$root")" ] || { echo "check-wheel: --prepare $root: not empty" >&2; exit 2; }
  mirror="${LOTUS_FRESH_MIRROR:-$(sed -n 's/^URIs: *\(http[^ ]*debian\)\/* *$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1)}"
  [ -n "$mirror" ] || mirror="$(awk '$1 == "deb" && $2 ~ /^http.*debian\/?$/ {print $2; exit}' \
    /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true)"
  [ -n "$mirror" ] || { echo "check-wheel: no Debian archive in /etc/apt/sources*; set LOTUS_FRESH_MIRROR" >&2; exit 2; }
  step "debootstrap minbase $suite (python3-venv) into $root"
  log="$(mktemp)"
  debootstrap --variant=minbase --include=python3-venv,ca-certificates "$suite" "$root" "$mirror" >"$log" 2>&1 \
    || { tail -20 "$log"; rm -f "$log"; exit 1; }
  rm -f "$log"
fi
[ -x "$root/usr/bin/python3" ] || { echo "check-wheel: $root: no prepared root" >&2; exit 2; }
pyver="$(readlink "$root/usr/bin/python3" | sed -n 's/^python\([0-9]\)\.\([0-9]*\)$/\1\2/p')"
[ -n "$pyver" ] || { echo "check-wheel: $root/usr/bin/python3 is not pythonX.Y" >&2; exit 1; }
# The root's CPython's wheels: this machine's cache when its Python is the same, else cpXY/ in it.
host="$(/usr/bin/python3 -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')"
wcache="$cache"
[ "$pyver" = "$host" ] || wcache="$cache/cp$pyver"
pins="$(bash "$here/tools/scripts/pip-stack.sh" --list newest | grep -Ev '^(pandas|dask|distributed|pyarrow)==' | tr '\n' ' ')"
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true

if [ -n "$prepare" ]; then
  step "downloading the newest stack's wheels for cp$pyver into $wcache/newest (once)"
  mkdir -p "$wcache/newest"
  # shellcheck disable=SC2086
  /usr/bin/python3 -m pip download -q --only-binary=:all: --python-version "${pyver:0:1}.${pyver:1}" \
    -d "$wcache/newest" $pins
  if [ "$build" = 1 ]; then
    # shellcheck disable=SC2046
    /usr/bin/python3 -m pip download -q --only-binary=:all: --python-version "${pyver:0:1}.${pyver:1}" \
      -d "$wcache/wheel" $(bash "$here/tools/scripts/pip-stack.sh" --list wheel)
  fi
  mount_in "$root"
  step "venv /root/venv with $pins"
  in_root "$root" "python3 -m venv /root/venv && /root/venv/bin/pip install -q --no-index \
    --find-links /root/.cache/lotus-wheels/newest $pins"
  step "downloading (not installing) $consumer_debs$([ "$build" = 0 ] || echo " and the build's packages")"
  in_root "$root" "apt-get $apt_opts update && apt-get $apt_opts install -y --download-only $consumer_debs \
    $([ "$build" = 0 ] || echo "$build_debs")"
  unmount_all
  step "prepared $root ($(du -sxm "$root" | cut -f1) MB)"
  exit 0
fi

wheels="$(mkdir -p "${1:?WHEEL_DIR}" && cd "$1" && pwd)"
mount_in "$root"
if [ "$build" = 1 ]; then
  step "building the cp$pyver wheel in an overlay of the root (tools/packaging/build-wheel.sh)"
  ov="$root.overlay"
  rm -rf --one-file-system "$ov" "$root.upper" "$root.work"
  mkdir -p "$ov" "$root.upper" "$root.work"
  mount -t overlay overlay -o "lowerdir=$root,upperdir=$root.upper,workdir=$root.work" "$ov"
  mounts+=("$ov")
  mount_in "$ov"
  git clone -q --no-hardlinks "$here" "$ov/root/lotus"
  git -C "$ov/root/lotus" checkout -q "$(git -C "$here" rev-parse HEAD)"
  in_root "$ov" "apt-get $apt_opts install -y $build_debs >/dev/null"
  in_root "$ov" "cd /root/lotus && bash tools/packaging/build-wheel.sh /root/dist"
  rm -f "$wheels"/lotus_trace-*-cp"$pyver"-*.whl
  cp "$ov"/root/dist/lotus_trace-*.whl "$wheels/"
  unmount_all
  rm -rf --one-file-system "$ov" "$root.upper" "$root.work"
  mount_in "$root"
  step "built $(ls "$wheels"/lotus_trace-*-cp"$pyver"-*.whl)"
fi
wheel="$(ls "$wheels"/lotus_trace-*-cp"$pyver"-cp"$pyver"-*manylinux*.whl | head -1)"
mkdir -p "$root/root/dist"
rm -f "$root"/root/dist/*.whl
cp "$wheel" "$root/root/dist/"
for cc in cc gcc g++ c++ clang cmake; do
  ! in_root "$root" "command -v $cc" >/dev/null || { echo "check-wheel: the root has $cc: not a root without a compiler" >&2; exit 1; }
done
in_root "$root" "find /root/venv | sort" >"$root/root/venv.before"

step "1. pip install lotus-trace ($(basename "$wheel"), $(du -h "$wheel" | cut -f1)) into the venv of pip's torch"
t="$(in_root "$root" "s=\$(date +%s.%N); pip install -q --no-index --find-links /root/dist lotus-trace >&2; \
  e=\$(date +%s.%N); python3 -c \"print(f'{\$e - \$s:.2f}')\"")"
echo "check-wheel $suite: pip install lotus-trace took $t s (at most 10 s)"
[ -n "${LOTUS_WHEEL_TIMES:-}" ] && echo "$suite cp$pyver pip-install $t" >>"$LOTUS_WHEEL_TIMES"
python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) <= 10 else 1)" "$t" \
  || { echo "check-wheel: pip install took $t s, more than 10 s" >&2; exit 1; }

step "2. python -m lotus.torch --check"
in_root "$root" "cd /tmp && python -m lotus.torch --check" | tee "$root/root/check.txt" | sed 's/^/  /'
grep -q "  DataLoader: ok" "$root/root/check.txt" && ! grep -q "does not support" "$root/root/check.txt" \
  || { echo "check-wheel: lotus.torch --check does not say every family records" >&2; exit 1; }

step "3. a traced DataLoader (default start method), lotus-tool check and report"
cat >"$root/root/traced.py" <<'PY'
import multiprocessing, sys, torch, lotus.torch
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms as T
class AddOne:
    def __call__(self, x): return x + 1
class Seq(Dataset):
    def __init__(self): self.t = T.Compose([AddOne()])
    def __len__(self): return 32
    def __getitem__(self, i): return self.t(torch.tensor([float(i)]))
if __name__ == "__main__":
    lotus.torch.instrument(log_file=sys.argv[1])
    total = sum(float(b.sum()) for b in DataLoader(Seq(), batch_size=4, num_workers=2))
    print(f"start method {multiprocessing.get_start_method()}, sum {total}, torch {torch.__version__}")
PY
in_root "$root" "cd /root && rm -rf trace && python traced.py trace/lotustrace_log && lotus-tool --version \
  && lotus-tool check trace/ && lotus-tool report trace/ -o report.html && ls -la report.html \
  && ldd \$(python -c 'import lotus._tool as t; print(t.bundled())') | grep -E 'libdw|libelf'" | sed 's/^/  /'
[ "$suite" != testing ] || grep -q forkserver <(in_root "$root" "python -c 'import multiprocessing as m; print(m.get_start_method())'") \
  || { echo "check-wheel: testing's default start method is not forkserver" >&2; exit 1; }

if [ -n "$tests" ]; then
  step "4. tests/python: $tests (against the installed wheel)"
  rm -rf "$root/root/tests"
  mkdir -p "$root/root/tests"
  mkdir -p "$root/root/tests/tool"
  cp -a "$here/tests/python" "$root/root/tests/"
  cp -a "$here/tests/tool/data" "$root/root/tests/tool/"  # lotus-tool's cases some Python tests share
  rm -rf "$root/root/examples" && mkdir -p "$root/root/examples"
  cp -a "$here/examples/python_pipeline" "$root/root/examples/"  # a script the pre-flight tests run
  rc=0
  in_root "$root" "cd /root/tests/python && LOTUS_TOOL=/root/venv/bin/lotus-tool python -m pytest -q \
    -p no:cacheprovider -rfEs --durations=10 -n 2 $tests" 2>&1 | tee "$root/root/pytest.log" || rc=1
  [ -z "${LOTUS_WHEEL_PYTEST_LOG:-}" ] || cp "$root/root/pytest.log" "$LOTUS_WHEEL_PYTEST_LOG"
  [ "$rc" = 0 ] || exit 1
fi

step "5. a CMake consumer of the wheel's package config (g++ and cmake installed for this step)"
in_root "$root" "apt-get $apt_opts install -y $consumer_debs >/root/apt.log 2>&1 || { cat /root/apt.log; exit 1; }"
mkdir -p "$root/root/consumer"
cat >"$root/root/consumer/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.21)
project(consumer CXX)
find_package(lotus 0.1 CONFIG REQUIRED)
message(STATUS "lotus ${lotus_VERSION} from ${lotus_DIR}")
add_executable(consumer main.cpp)
target_link_libraries(consumer PRIVATE lotus::lotus)
CM
cat >"$root/root/consumer/main.cpp" <<'CPP'
#include <lotus/lotus.hpp>
int main() {
  for (int batch = 0; batch < 3; ++batch) {
    LOTUS_BATCH_PREPROCESSED(batch);
    LOTUS_SCOPE("Normalize");
  }
}
CPP
in_root "$root" "cd /root/consumer && cmake -S . -B b -DCMAKE_PREFIX_PATH=/root/venv -DCMAKE_BUILD_TYPE=Release \
  | grep 'lotus ' && cmake --build b >/dev/null && LOTUS_LOG_FILE=/root/ctrace/x b/consumer \
  && lotus-tool check /root/ctrace && grep -c '^SNormalize,' /root/ctrace/x_worker_pid_*" | sed 's/^/  /'

step "6. pip uninstall lotus-trace removes every file it installed"
in_root "$root" "pip uninstall -y -q lotus-trace && find /root/venv | sort" >"$root/root/venv.after"
if ! diff "$root/root/venv.before" "$root/root/venv.after" >"$root/root/venv.diff"; then
  echo "check-wheel: after pip uninstall the venv differs from before the install:" >&2
  head -30 "$root/root/venv.diff" >&2
  exit 1
fi
step "passed on $suite (Python ${pyver:0:1}.${pyver:1})"
