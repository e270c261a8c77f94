#!/usr/bin/env python3
# lotus — checks the rule of the runtime's cold-code region (LOTUS_DETAIL_COLD_CODE_BEGIN)
# SPDX-License-Identifier: MIT
"""In header-only mode with GCC, include/lotus/detail/runtime.hpp opens a region compiled as at -Og
(a `#pragma GCC optimize`). A system header first included inside that region would be compiled
that way for the rest of the user's translation unit, so runtime.hpp includes every system header
of the headers it reaches before it opens the region. This script checks that rule: every
`#include <...>` of a lotus header reachable from runtime.hpp (other than the headers runtime.hpp
includes before the region opens) must appear in runtime.hpp above LOTUS_DETAIL_COLD_CODE_BEGIN.
Exit status 0 when the rule holds, 1 (naming each header) when it does not."""

import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "include")
RUNTIME = "lotus/detail/runtime.hpp"
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def includes(rel):
    """(system, local) includes of a header, in order."""
    system, local = [], []
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        for line in f:
            m = INCLUDE.match(line)
            if m:
                (system if m.group(1) == "<" else local).append(m.group(2))
    return system, local


def main():
    with open(os.path.join(ROOT, RUNTIME), encoding="utf-8") as f:
        text = f.read()
    marker = text.find("\nLOTUS_DETAIL_COLD_CODE_BEGIN")
    if marker < 0:
        print(f"check-cold-region: {RUNTIME} has no LOTUS_DETAIL_COLD_CODE_BEGIN line")
        return 1
    before_sys, before_local = set(), set()
    for line in text[:marker].splitlines():
        m = INCLUDE.match(line)
        if m:
            (before_sys if m.group(1) == "<" else before_local).add(m.group(2))
    # Headers included before the region opens, with everything they include, are complete by
    # then; the others may be first included inside it.
    done, stack = set(), list(before_local)
    while stack:
        rel = stack.pop()
        if rel not in done:
            done.add(rel)
            before_sys.update(includes(rel)[0])
            stack += includes(rel)[1]
    seen, stack, missing = set(done), [RUNTIME], []
    while stack:
        rel = stack.pop()
        if rel in seen:
            continue
        seen.add(rel)
        system, local = includes(rel)
        if rel != RUNTIME:
            missing += [(rel, h) for h in system if h not in before_sys]
        stack += local
    for rel, header in missing:
        print(f"check-cold-region: {rel} includes <{header}>, which {RUNTIME} does not include "
              "before LOTUS_DETAIL_COLD_CODE_BEGIN")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
