#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Makes a venv with one PyPI stack of tools/scripts/pip-stacks.txt installed (pip's torch, not
# Debian's), for the pip-* variants of test-all.sh and for trying lotus on pip's torch by hand.
#   bash tools/scripts/pip-stack.sh newest /tmp/venv-newest     # venv with torch 2.15.0 & co.
#   bash tools/scripts/pip-stack.sh --list newest               # the stack's pins, one a line
# The wheels are downloaded once into ${LOTUS_WHEEL_CACHE:-~/.cache/lotus-wheels}/NAME and installed
# from there with --no-index; a venv that already holds the same pins is kept. Prints one line with
# the download's size and seconds and the install's seconds. Exit 2 for an unknown stack.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
file="$here/pip-stacks.txt"

pins() {  # pins NAME: the stack's pins with those of the stacks it includes
  awk -v want="$1" '
    function add(g,   i, n, parts) {
      if (g in done) return
      done[g] = 1
      if (!(g in known)) { print "pip-stack: unknown stack: " g > "/dev/stderr"; bad = 1; return }
      n = split(incl[g], parts, " ")
      for (i = 1; i <= n; i++) add(parts[i])
      n = split(pkgs[g], parts, " ")
      for (i = 1; i <= n; i++) out[++count] = parts[i]
    }
    /^[[:space:]]*(#|$)/ { next }
    /^\[/ {
      match($0, /^\[[a-z0-9_-]+\]/)
      if (RSTART != 1) { print "pip-stack: bad stack line: " $0 > "/dev/stderr"; exit 2 }
      cur = substr($0, 2, RLENGTH - 2); known[cur] = 1
      incl[cur] = substr($0, RLENGTH + 1); next
    }
    {
      if (cur == "" || $0 !~ /^[A-Za-z0-9_.-]+==[A-Za-z0-9_.+-]+$/) {
        print "pip-stack: bad pin line: " $0 > "/dev/stderr"; exit 2
      }
      pkgs[cur] = pkgs[cur] " " $0
    }
    END { add(want); if (bad) exit 2; for (i = 1; i <= count; i++) print out[i] }' "$file"
}

if [ "${1:-}" = --list ]; then
  [ $# -eq 2 ] || { echo "usage: pip-stack.sh --list NAME" >&2; exit 2; }
  pins "$2"
  exit
fi
[ $# -eq 2 ] || { echo "usage: pip-stack.sh NAME VENV_DIR | --list NAME" >&2; exit 2; }
name="$1" venv="$2"
list="$(pins "$name")" || exit 2
python="${LOTUS_STACK_PYTHON:-/usr/bin/python3}"
cache="${LOTUS_WHEEL_CACHE:-$HOME/.cache/lotus-wheels}/$name"
mkdir -p "$cache"
stamp="$(printf '%s\n' "$list" | sha256sum | cut -c1-16)"
if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.lotus-stack" 2>/dev/null)" = "$name $stamp" ]; then
  echo "pip-stack $name: $venv already holds it"
  exit 0
fi
before=$(du -sm "$cache" | cut -f1)
t0=$SECONDS
# shellcheck disable=SC2086
"$python" -m pip download --quiet --disable-pip-version-check -d "$cache" $list
t1=$SECONDS
after=$(du -sm "$cache" | cut -f1)
rm -rf --one-file-system "$venv"
"$python" -m venv "$venv"
# shellcheck disable=SC2086
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-index \
  --find-links "$cache" $list
t2=$SECONDS
echo "$name $stamp" >"$venv/.lotus-stack"
echo "pip-stack $name: downloaded $((after - before)) MB in $((t1 - t0)) s (cache $after MB), installed in $((t2 - t1)) s: $(echo $list | tr '\n' ' ')"
