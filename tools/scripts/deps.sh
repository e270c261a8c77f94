#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Lists the Debian packages of groups of tools/deps.txt, one per line, without repeats, by the names
# of the running Debian release (tools/deps.txt: `PACKAGE RELEASE=NAME`).
#   bash tools/scripts/deps.sh demo          the demo's packages (and those of the groups it includes)
#   bash tools/scripts/deps.sh all           every group
# Exit 2 for an unknown group.
set -euo pipefail
file="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/deps.txt"
[ $# -gt 0 ] || { echo "usage: deps.sh GROUP... (groups: $(grep -o '^\[[a-z0-9_-]*\]' "$file" | tr -d '[]' | tr '\n' ' ')all)" >&2; exit 2; }
codename="${LOTUS_DEBIAN_CODENAME:-}"
if [ -z "$codename" ] && [ -r /etc/os-release ]; then
  codename="$(. /etc/os-release && echo "${VERSION_CODENAME:-}")"
fi
awk -v want="$*" -v codename="$codename" '
  function add(g,   i, n, parts) {
    if (g in done) return
    done[g] = 1
    if (!(g in known)) { print "deps.sh: unknown group: " g > "/dev/stderr"; bad = 1; return }
    n = split(incl[g], parts, " ")
    for (i = 1; i <= n; i++) add(parts[i])
    n = split(pkgs[g], parts, " ")
    for (i = 1; i <= n; i++) if (!(parts[i] in seen)) { seen[parts[i]] = 1; out[++count] = parts[i] }
  }
  /^[[:space:]]*(#|$)/ { next }
  /^\[/ {
    match($0, /^\[[a-z0-9_-]+\]/)
    if (RSTART != 1) { print "deps.sh: bad group line: " $0 > "/dev/stderr"; exit 2 }
    cur = substr($0, 2, RLENGTH - 2); known[cur] = 1; order[++groups] = cur
    incl[cur] = substr($0, RLENGTH + 1); next
  }
  {
    if (cur == "") { print "deps.sh: package outside a group: " $0 > "/dev/stderr"; exit 2 }
    name = $1
    for (i = 2; i <= NF; i++) {  # RELEASE=NAME: that release names it so ("-": not needed)
      if (split($i, alt, "=") != 2) { print "deps.sh: bad package line: " $0 > "/dev/stderr"; exit 2 }
      if (alt[1] == codename) name = alt[2]
    }
    if (name != "-") pkgs[cur] = pkgs[cur] " " name
  }
  END {
    n = split(want, w, " ")
    for (i = 1; i <= n; i++) {
      if (w[i] == "all") { for (j = 1; j <= groups; j++) add(order[j]) } else add(w[i])
    }
    if (bad) exit 2
    for (i = 1; i <= count; i++) print out[i]
  }' "$file"
