#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The README's commands on a truly fresh Debian: builds a minimal root with `debootstrap
# --variant=minbase` (plus git), clones a commit of this repository into it, runs `bash
# tools/scripts/demo.sh` there as root, and checks what it wrote (lotus-tool check on the trace, the
# timeline parses as JSON, the report exists). With --tests it then runs the `stack` variant of
# tools/scripts/test-all.sh there (the tool, Python and docs tests on that release's GCC, CLI11 and torch).
# Mounts and the root are removed on every path.
#   bash tools/scripts/fresh-demo.sh [--suite bookworm|trixie] [--tests] [REPO [COMMIT]]
#        (default: bookworm, this checkout, HEAD)
#   bash tools/scripts/fresh-demo.sh [--suite S] [--tests] --prepare DIR   only debootstrap into DIR and
#        download (not install) the packages the run will install, then leave DIR for:
#   bash tools/scripts/fresh-demo.sh [--suite S] [--tests] --root DIR [REPO [COMMIT]]   run in that root
#        (removed afterwards). test-all.sh prepares while other variants build.
# Needs root and debootstrap (tools/deps.txt group `fresh`); downloads from the Debian archive this
# machine's apt sources name (LOTUS_FRESH_MIRROR overrides). LOTUS_FRESH_CTEST_LOG=FILE: where to
# copy the root's ctest log (--tests). Exit 0 when the demo (and the tests) pass there.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
suite=bookworm
tests=0
prepare=""
given_root=""
while [ $# -gt 0 ]; do
  case "$1" in
    --suite) suite="${2:?--suite needs bookworm or trixie}"; shift 2 ;;
    --tests) tests=1; shift ;;
    --prepare) prepare="${2:?--prepare needs a directory}"; shift 2 ;;
    --root) given_root="${2:?--root needs a directory}"; shift 2 ;;
    -*) echo "fresh-demo: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
case "$suite" in bookworm|trixie) ;; *) echo "fresh-demo: --suite bookworm or trixie, not '$suite'" >&2; exit 2 ;; esac
repo="${1:-$here}"
commit="$(git -C "$repo" rev-parse "${2:-HEAD}")"
[ "$(id -u)" = 0 ] || { echo "fresh-demo: needs root (debootstrap, chroot, mount)" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "fresh-demo: debootstrap missing (bash tools/scripts/install-deps.sh fresh)" >&2; exit 2; }
mirror="${LOTUS_FRESH_MIRROR:-}"
if [ -z "$mirror" ]; then
  # The archive this machine installs from: deb822 sources first, then the one-line format.
  mirror="$(sed -n 's/^URIs: *\(http[^ ]*debian\)\/* *$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1)"
  [ -n "$mirror" ] || mirror="$(awk '$1 == "deb" && $2 ~ /^http.*debian\/?$/ {print $2; exit}' \
    /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true)"
  [ -n "$mirror" ] || { echo "fresh-demo: no Debian archive found in /etc/apt/sources*; set LOTUS_FRESH_MIRROR" >&2; exit 2; }
fi
if [ -n "$prepare" ]; then
  root="$prepare"
  [ ! -e "$root" ] || [ -z "$(ls -A "$root")" ] || { echo "fresh-demo: --prepare $root: not empty" >&2; exit 2; }
  mkdir -p "$root"
elif [ -n "$given_root" ]; then
  root="$given_root"
  [ -x "$root/usr/bin/apt-get" ] || { echo "fresh-demo: --root $root: not a prepared root" >&2; exit 2; }
else
  root="$(mktemp -d "${TMPDIR:-/var/tmp}/lotus-fresh.XXXXXX")"
fi
mounts=()
cleanup() {
  local rc=$?
  local i
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount -l "${mounts[i]}" 2>/dev/null || true; done
  # debootstrap mounts proc and sys itself; never delete through a live mount.
  for m in proc sys dev/pts dev; do
    mountpoint -q "$root/$m" 2>/dev/null && umount -l "$root/$m" 2>/dev/null || true
  done
  if grep -q " $root" /proc/mounts; then
    echo "fresh-demo: $root still has mounts; not removing it" >&2
  elif [ -n "$prepare" ] && [ "$rc" = 0 ]; then
    :  # left for --root
  else
    rm -rf --one-file-system "$root"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

t0=$SECONDS
if [ -z "$given_root" ]; then
  echo "fresh-demo: debootstrap minbase $suite from $mirror into $root"
  log="$(mktemp "${TMPDIR:-/tmp}/lotus-debootstrap.XXXXXX")"
  debootstrap --variant=minbase --include=git,ca-certificates "$suite" "$root" "$mirror" \
    >"$log" 2>&1 || { tail -20 "$log"; rm -f "$log"; exit 1; }
  rm -f "$log"
  echo "fresh-demo: root ready in $((SECONDS - t0)) s"
fi
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
mount -t proc proc "$root/proc" && mounts+=("$root/proc")
mount --bind /dev "$root/dev" && mounts+=("$root/dev")
# DataLoader workers share tensors through /dev/shm, and torch reads the CPU layout from /sys.
mount -t tmpfs -o size=2g,mode=1777 shm "$root/dev/shm" && mounts+=("$root/dev/shm")
mount -t sysfs sys "$root/sys" && mounts+=("$root/sys")

if [ -n "$prepare" ]; then
  # Download what the run's install steps will install (they still install it themselves).
  groups="demo"
  [ "$tests" = 1 ] && groups="demo stack"
  # shellcheck disable=SC2086
  pkgs="$(LOTUS_DEBIAN_CODENAME="$suite" bash "$here/tools/scripts/deps.sh" $groups | tr '\n' ' ')"
  # shellcheck disable=SC2086
  chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
    bash -c "apt-get update -qq && apt-get install -y -qq --download-only --no-install-recommends $pkgs" \
    || { echo "fresh-demo: downloading the packages into the $suite root failed" >&2; exit 1; }
  echo "fresh-demo: $suite root prepared in $root in $((SECONDS - t0)) s"
  exit 0
fi

# The commit, cloned as a user would (no hard links into this repository).
git clone -q --no-hardlinks "$repo" "$root/root/lotus"
git -C "$root/root/lotus" checkout -q "$commit"
echo "fresh-demo: running 'bash tools/scripts/demo.sh' at ${commit:0:12} as root in the fresh root"
chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  LANG=C.UTF-8 bash -c 'cd /root/lotus && bash tools/scripts/demo.sh /root/out'

LOTUS_DEMO_TOOL_OUT=/root/out bash "$here/tools/scripts/check-demo-out.sh" "$root/root/out" \
  /root/lotus/build-demo/tools/lotus-tool/lotus-tool chroot "$root"
echo "fresh-demo: demo passed on $suite in $((SECONDS - t0)) s"
if [ "$tests" = 1 ]; then
  t1=$SECONDS
  echo "fresh-demo: running 'LOTUS_VARIANTS=stack bash tools/scripts/test-all.sh' in the $suite root"
  rc=0
  chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8 LOTUS_VARIANTS=stack bash -c 'cd /root/lotus && bash tools/scripts/test-all.sh' || rc=$?
  [ -z "${LOTUS_FRESH_CTEST_LOG:-}" ] || cp "$root/root/lotus/build-ci/stack.ctest.log" "$LOTUS_FRESH_CTEST_LOG" 2>/dev/null || true
  echo "fresh-demo: stack tests on $suite: exit $rc in $((SECONDS - t1)) s"
  [ "$rc" = 0 ] || exit 1
fi
echo "fresh-demo: passed in $((SECONDS - t0)) s"
