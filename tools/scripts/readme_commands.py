#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# lotus — extracts the shell blocks a Markdown file marks as tested and runs them, in order, in one
# scratch directory, so the README cannot drift from the code.
"""Run the marked shell blocks of a Markdown file.

A block is marked by the line `<!-- readme-test -->` directly above its opening fence, which must
be ```sh or ```bash. The blocks run one after another with `bash -e -o pipefail`, in one scratch
directory that looks like the repository root after a build: every top-level entry of the source
tree is linked there, `build` links to the build directory, and the build's lotus-tool directory
is first on PATH (so `lotus-tool ...` means the freshly built tool). A block fails on a non-zero
status or when it outlives --timeout; the run stops at the first failure, prints the block, its
line and its output, and exits 1. Exit 2: bad command line or a malformed marker/fence.

    readme_commands.py --list README.md                    print the marked blocks
    readme_commands.py --build build README.md             run them
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

MARKER = "<!-- readme-test -->"
FENCE_OPEN = re.compile(r"^(```+|~~~+)\s*([A-Za-z0-9_+-]*)\s*$")
SHELLS = {"sh", "bash", "shell"}


class ExtractError(Exception):
    pass


def extract(text, name="<markdown>"):
    """Returns [(line_number_of_first_code_line, code)] for every marked block.

    Raises ExtractError for a marker that is not directly followed by a sh/bash fence, and for a
    fence that is never closed.
    """
    lines = text.split("\n")
    blocks = []
    i = 0
    in_fence = None  # the closing fence while inside any fenced block
    while i < len(lines):
        line = lines[i]
        if in_fence is not None:
            if line.strip() == in_fence:
                in_fence = None
            i += 1
            continue
        m = FENCE_OPEN.match(line.strip())
        if m:
            in_fence = m.group(1)
            i += 1
            continue
        if line.strip() == MARKER:
            if i + 1 >= len(lines):
                raise ExtractError(f"{name}:{i + 1}: marker at the end of the file")
            m = FENCE_OPEN.match(lines[i + 1].strip())
            if not m:
                raise ExtractError(f"{name}:{i + 1}: marker not directly followed by a fenced block")
            if m.group(2) not in SHELLS:
                raise ExtractError(f"{name}:{i + 2}: a marked block must be sh or bash, not "
                                   f"'{m.group(2) or '(none)'}'")
            close = m.group(1)
            start = i + 2
            j = start
            while j < len(lines) and lines[j].strip() != close:
                j += 1
            if j >= len(lines):
                raise ExtractError(f"{name}:{i + 2}: fenced block never closed")
            blocks.append((start + 1, "\n".join(lines[start:j]) + "\n"))
            i = j + 1
            continue
        i += 1
    if in_fence is not None:
        raise ExtractError(f"{name}: a fenced block is never closed")
    return blocks


def make_scratch(source, build):
    """A scratch directory that looks like the source root after a build into build/."""
    scratch = tempfile.mkdtemp(prefix="lotus-readme-")
    for entry in sorted(os.listdir(source)):
        if entry in (".git", "build") or entry.startswith("build-"):
            continue
        os.symlink(os.path.join(source, entry), os.path.join(scratch, entry))
    if build:
        os.symlink(os.path.abspath(build), os.path.join(scratch, "build"))
    return scratch


def run(blocks, name, source, build, timeout, keep):
    scratch = make_scratch(source, build)
    env = dict(os.environ)
    for var in list(env):
        if var.startswith("LOTUS_"):
            del env[var]  # the blocks set what they need, like a user's shell
    if build:
        tool_dir = os.path.join(os.path.abspath(build), "tools", "lotus-tool")
        env["PATH"] = tool_dir + os.pathsep + env.get("PATH", "")
    status = 0
    try:
        for n, (line, code) in enumerate(blocks, 1):
            print(f"--- {name}:{line} (block {n} of {len(blocks)})", flush=True)
            try:
                p = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", code], cwd=scratch,
                                   env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   timeout=timeout, check=False)
                out, rc = p.stdout.decode("utf-8", "replace"), p.returncode
            except subprocess.TimeoutExpired as e:
                out = (e.stdout or b"").decode("utf-8", "replace")
                rc = f"timeout after {timeout} s"
            sys.stdout.write(out)
            if rc != 0:
                why = f"exit {rc}" if isinstance(rc, int) else rc
                print(f"{name}:{line}: block {n} failed ({why}):", file=sys.stderr)
                sys.stderr.write("".join("    " + l + "\n" for l in code.rstrip("\n").split("\n")))
                status = 1
                break
        if status == 0:
            print(f"{name}: {len(blocks)} marked block(s) passed")
    finally:
        if keep:
            print(f"scratch directory kept: {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    return status


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("markdown")
    ap.add_argument("--list", action="store_true", help="print the marked blocks and exit")
    ap.add_argument("--build", help="build directory (linked as build/, its lotus-tool on PATH)")
    ap.add_argument("--source", help="source root (default: the Markdown file's directory)")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per block (default 300)")
    ap.add_argument("--min-blocks", type=int, default=1,
                    help="fail when fewer blocks are marked (default 1: a README without marks "
                         "would pass silently)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = ap.parse_args(argv)
    try:
        with open(args.markdown, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        print(f"readme_commands: {e}", file=sys.stderr)
        return 2
    name = os.path.basename(args.markdown)
    try:
        blocks = extract(text, name)
    except ExtractError as e:
        print(f"readme_commands: {e}", file=sys.stderr)
        return 2
    if args.list:
        for line, code in blocks:
            print(f"--- {name}:{line}")
            sys.stdout.write(code)
        return 0
    if len(blocks) < args.min_blocks:
        print(f"readme_commands: {name}: {len(blocks)} marked block(s), expected at least "
              f"{args.min_blocks}", file=sys.stderr)
        return 1
    source = os.path.abspath(args.source or os.path.dirname(os.path.abspath(args.markdown)))
    if args.build and not os.path.isdir(args.build):
        print(f"readme_commands: build directory not found: {args.build}", file=sys.stderr)
        return 2
    return run(blocks, name, source, args.build, args.timeout, args.keep)


if __name__ == "__main__":
    sys.exit(main())
