#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generate single_include/lotus/lotus.hpp from include/lotus (deterministic, no timestamp).

Starts at include/lotus/lotus.hpp, then the probe headers (collector.hpp, map_region.hpp), and ends
with the implementation: lotus.hpp's one `#if defined(LOTUS_IMPLEMENTATION) ...` block (the door to
lotus/runtime/implementation.hpp) is moved to the end of the file, the one implementation fence, as
stb and doctest end. The one
file holds the whole API but lotus/options.hpp (lotus::options, for configure), which lotus.hpp
leaves out of a recording file and holds only in the implementation file: single_include/lotus/
options.hpp is the single header plus that part. Inlines every "lotus/..." include once in include order, leaves system
includes alone and keeps one #pragma once. Beside it, lotus/collector.hpp and lotus/map_region.hpp
forward to it, so a probe's includes work with either include directory. `--check` exits non-zero
when a committed file differs from what the sources generate.
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
DOOR = "LOTUS_IMPLEMENTATION"  # the macro of the one implementation fence


def atoms(cond):
    """The conjuncts of an #if/#ifdef line (`defined(X)` for `#ifdef X`), or None when it is not a
    plain conjunction (an #else part, `||`, `!`)."""
    m = re.match(r"#\s*ifdef\s+(\w+)$", cond)
    if m:
        return {f"defined({m.group(1)})"}
    m = re.match(r"#\s*if\s+(.*)$", cond)
    if not m or "|" in cond or "!" in cond:
        return None
    out = set()
    for part in m.group(1).split("&&"):
        part = re.sub(r"^defined\s+(\w+)$", r"defined(\1)", part.strip())
        out.add(re.sub(r"^defined\s*\(\s*(\w+)\s*\)$", r"defined(\1)", part))
    return out


def covered(emitted, conds):
    """True when a copy emitted under `emitted` conditions is active wherever `conds` holds: each
    of its conditions is one of `conds`, or a conjunction whose parts `conds` all assert."""
    held = set().union(*(atoms(c) or set() for c in conds))

    def implied(c):
        a = atoms(c)
        return c in conds or (a is not None and a <= held)

    return any(all(implied(c) for c in e) for e in emitted)


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
    door = None  # the implementation fence's lines while inside it (deferred to the end)
    for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
        if door is not None:
            door.append(line)
            depth = sum(1 for l in door if IF_OPEN.match(l)) - sum(1 for l in door if IF_CLOSE.match(l))
            if depth == 0:
                fences.append((rel, door))
                door = None
            continue
        if IF_OPEN.match(line) and DOOR in line:
            door = [line]
            continue
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
    emitted = {}
    fences.clear()
    for rel in ROOTS:
        expand(rel, emitted, out)
    # The one implementation fence, last: the door of lotus.hpp and what it lists.
    if len(fences) != 1 or fences[0][0] != "lotus/lotus.hpp":
        sys.exit(f"amalgamate: expected one {DOOR} block, in lotus/lotus.hpp; found "
                 f"{[rel for rel, _ in fences]}")
    rel, lines = fences[0]
    cond = " ".join(lines[0].split())
    out.append(f"// ---- the implementation (the door of {rel}) ----\n{lines[0]}")
    for line in lines[1:-1]:
        m = LOCAL.match(line)
        if m:
            expand(m.group(1), emitted, out, (cond,))
        elif line.strip() and not line.lstrip().startswith("//"):
            sys.exit(f"amalgamate: the {DOOR} block of {rel} holds more than includes: {line!r}")
    out.append(lines[-1])
    return "".join(out), emitted


ROOTS = ("lotus/lotus.hpp", "lotus/collector.hpp", "lotus/map_region.hpp")
fences = []  # (header, lines) of each implementation fence met, deferred to the file's end


# Headers that <lotus/lotus.hpp> leaves out of a recording file (the implementation file has them):
# beside the single header, each is the single header plus its own part.
COMPANIONS = ("lotus/options.hpp",)


def forwarders(emitted):
    """single_include/lotus/<probe header>: one line that includes the single header; and each
    companion: the single header, then what of the companion it holds only in the implementation
    file (under the same guards, so either order of includes defines each part once)."""
    files = {OUTPUT.parent / pathlib.PurePath(rel).name:
             f"// lotus — {rel} in the single-header build: everything is in lotus.hpp\n"
             "// SPDX-License-Identifier: MIT\n"
             "// Generated by tools/scripts/amalgamate.py — do not edit\n"
             "#pragma once\n"
             '#include "lotus/lotus.hpp"\n'
             for rel in ROOTS[1:]}
    # What the single header holds outside any #if is not repeated.
    always = {rel: [c for c in conds if not c] for rel, conds in emitted.items()}
    for rel in COMPANIONS:
        out = [f"// lotus — {rel} in the single-header build: lotus.hpp, then this part of the API\n",
               "// SPDX-License-Identifier: MIT\n",
               "// Generated by tools/scripts/amalgamate.py — do not edit\n",
               "#pragma once\n",
               '#include "lotus/lotus.hpp"\n']
        expand(rel, {k: list(v) for k, v in always.items()}, out)
        files[OUTPUT.parent / pathlib.PurePath(rel).name] = "".join(out)
    return files


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if the committed file is stale")
    args = parser.parse_args()
    text, emitted = generate()
    companions = forwarders(emitted)
    if args.check:
        for path, body in companions.items():
            if not path.is_file() or path.read_text(encoding="utf-8") != body:
                print(f"{path.relative_to(ROOT)} is stale: run tools/scripts/amalgamate.py",
                      file=sys.stderr)
                return 1
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
    for path, body in companions.items():
        path.write_text(body, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
