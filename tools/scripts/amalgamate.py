#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generate single_include/lotus/lotus.hpp from include/lotus (deterministic, no timestamp).

Starts at include/lotus/lotus.hpp, inlines every "lotus/..." include once in include order, leaves
system includes alone and keeps one #pragma once. `--check` exits non-zero when the committed file
differs from what the sources generate.
"""
import argparse
import difflib
import pathlib
import re
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
INCLUDE = ROOT / "include"
OUTPUT = ROOT / "single_include" / "lotus" / "lotus.hpp"
LOCAL = re.compile(r'^\s*#\s*include\s+"(lotus/[^"]+)"\s*(//.*)?$')  # a trailing // comment allowed
PRAGMA = re.compile(r"^\s*#\s*pragma\s+once\s*$")
VERSION = re.compile(r'#define LOTUS_VERSION_STRING "([^"]+)"')


IF_OPEN = re.compile(r"^\s*#\s*if(n?def)?\b")
IF_ELSE = re.compile(r"^\s*#\s*(else|elif)\b")
IF_CLOSE = re.compile(r"^\s*#\s*endif\b")


def covered(emitted, conds):
    """True when a copy emitted under `emitted` conditions is active wherever `conds` holds."""
    return any(tuple(conds[: len(e)]) == e for e in emitted)


def expand(rel, emitted, out, conds=()):
    """Inline `rel` like #include + #pragma once would.

    A header first reached inside an #if block may be skipped by the preprocessor there, so each
    inlined copy carries its own guard macro, and a header is inlined again where it is next reached
    under conditions its earlier copies do not cover (for example outside any #if).
    """
    seen = emitted.setdefault(rel, [])
    if covered(seen, conds):
        return
    seen.append(tuple(conds))
    path = INCLUDE / rel
    if not path.is_file():
        sys.exit(f"amalgamate: {rel} is included but {path} does not exist")
    guard = "LOTUS_AMALGAMATED_" + re.sub(r"[^A-Za-z0-9]", "_", rel).upper()
    out.append(f"// ---- begin {rel} ----\n#ifndef {guard}\n#define {guard}\n")
    local = []
    for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
        if PRAGMA.match(line):
            continue
        m = LOCAL.match(line)
        if m:
            expand(m.group(1), emitted, out, tuple(conds) + tuple(local))
            continue
        text = " ".join(line.split())
        if IF_OPEN.match(line):
            local.append(text)
        elif IF_ELSE.match(line) and local:
            local[-1] = local[-1] + " | " + text
        elif IF_CLOSE.match(line) and local:
            local.pop()
        out.append(line)
    out.append(f"#endif  // {guard}\n// ---- end {rel} ----\n")


def generate():
    version = VERSION.search((INCLUDE / "lotus" / "version.hpp").read_text(encoding="utf-8"))
    out = [
        "// lotus — single-header build of the lotus library\n",
        "// SPDX-License-Identifier: MIT\n",
        f"// lotus {version.group(1) if version else '?'}: generated from include/lotus by "
        "tools/scripts/amalgamate.py — do not edit\n",
        "#pragma once\n",
    ]
    expand("lotus/lotus.hpp", {}, out)
    return "".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if the committed file is stale")
    args = parser.parse_args()
    text = generate()
    if args.check:
        current = OUTPUT.read_text(encoding="utf-8") if OUTPUT.is_file() else ""
        if current != text:
            diff = difflib.unified_diff(current.splitlines(), text.splitlines(), "committed",
                                        "generated", lineterm="", n=1)
            for i, line in enumerate(diff):
                if i > 40:
                    break
                print(line, file=sys.stderr)
            print("single_include/lotus/lotus.hpp is stale: run tools/scripts/amalgamate.py",
                  file=sys.stderr)
            return 1
        return 0
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=OUTPUT.parent, delete=False, encoding="utf-8") as tmp:
        tmp.write(text)
    pathlib.Path(tmp.name).replace(OUTPUT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
