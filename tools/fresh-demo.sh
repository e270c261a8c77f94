#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The README's first command on a truly fresh Debian 12: builds a minimal bookworm root with
# `debootstrap --variant=minbase` (plus git), clones a commit of this repository into it, runs
# `bash tools/demo.sh` there as root, and checks what it wrote (lotus-tool check on the trace, the
# timeline parses as JSON, the report exists). Mounts and the root are removed on every path.
#   bash tools/fresh-demo.sh [REPO [COMMIT]]     (default: this checkout, HEAD)
# Needs root and debootstrap (tools/deps.txt group `fresh`); downloads from the apt mirror
# (LOTUS_FRESH_MIRROR, default: the host's Debian mirror). Exit 0 when the demo works there.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
repo="${1:-$here}"
commit="$(git -C "$repo" rev-parse "${2:-HEAD}")"
[ "$(id -u)" = 0 ] || { echo "fresh-demo: needs root (debootstrap, chroot, mount)" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "fresh-demo: debootstrap missing (bash tools/install-deps.sh fresh)" >&2; exit 2; }
mirror="${LOTUS_FRESH_MIRROR:-}"
if [ -z "$mirror" ]; then
  mirror="$(sed -n 's/^URIs: *\(http[^ ]*debian\)$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1)"
  [ -n "$mirror" ] || mirror="$(awk '$1 == "deb" && $3 == "bookworm" {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)"
  [ -n "$mirror" ] || mirror="http://deb.debian.org/debian"
fi
root="$(mktemp -d "${TMPDIR:-/var/tmp}/lotus-fresh.XXXXXX")"
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
  else
    rm -rf --one-file-system "$root"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

t0=$SECONDS
echo "fresh-demo: debootstrap minbase bookworm from $mirror into $root"
debootstrap --variant=minbase --include=git,ca-certificates bookworm "$root" "$mirror" \
  >"$root.debootstrap.log" 2>&1 || { tail -20 "$root.debootstrap.log"; rm -f "$root.debootstrap.log"; exit 1; }
rm -f "$root.debootstrap.log"
echo "fresh-demo: root ready in $((SECONDS - t0)) s"
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
mount -t proc proc "$root/proc" && mounts+=("$root/proc")
mount --bind /dev "$root/dev" && mounts+=("$root/dev")

# The commit, cloned as a user would (no hard links into this repository).
git clone -q --no-hardlinks "$repo" "$root/root/lotus"
git -C "$root/root/lotus" checkout -q "$commit"
echo "fresh-demo: running 'bash tools/demo.sh' at ${commit:0:12} as root in the fresh root"
chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  LANG=C.UTF-8 bash -c 'cd /root/lotus && bash tools/demo.sh /root/out'

out="$root/root/out"
trace="$out/trace"
chroot "$root" /root/lotus/build-demo/tools/lotus-tool/lotus-tool check /root/out/trace
/usr/bin/python3 - "$out/timeline.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
events = doc["traceEvents"] if isinstance(doc, dict) else doc
spans = [e for e in events if e.get("ph") == "X"]
assert spans, "timeline has no spans"
print(f"fresh-demo: timeline.json parses: {len(events)} events, {len(spans)} spans")
PY
[ -s "$out/report.html" ] && grep -q "</html>" "$out/report.html" || { echo "fresh-demo: report.html missing or cut" >&2; exit 1; }
ls "$trace" | grep -q "_worker_pid_" || { echo "fresh-demo: no worker trace files" >&2; exit 1; }
echo "fresh-demo: passed in $((SECONDS - t0)) s"
