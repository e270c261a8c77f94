#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What tools/scripts/test-all.sh makes of tools/scripts/test-matrix.txt, and what it reads back from
the logs of a run: one command a question, its answer on stdout (stdlib only, Python 3.7+).

  test-matrix.py [--matrix FILE] [--variants "V..."] COMMAND ARGS
    check                   every cell one of its column's words (exit 2 naming the bad rows)
    defaults COLUMN         the default variants of a release column (deb12, deb13)
    selection VARIANT       the [variants] table's selection of a variant ("" for all)
    ctest VARIANT           its ctest arguments, the [python] rows it leaves out in this run added
    files STACK VALUE       the pytest files of the [python] rows marked VALUE for a stack, each once
    deselect STACK          --deselect arguments of the stack's [deselect] rows
    cmake VARIANT           a built variant's CMake arguments, one a line ([build] table)
    targets VARIANT | what VARIANT   what it builds when not everything | its stage's line
    plan                    the dry run: what each variant of --variants would run (exit 2: unknown)
    count ctest|pytest LOG  "failed total" of a log's closing line (exit 1 when it has none)
    totals COUNTS           the sum of those lines, as the run's closing "tests:" line
    failures OUT            the failed tests of the run's logs in OUT, with the end of their output, then
                            each log's slowest tests (where the time went)
"""
import argparse
import glob
import os
import re
import shlex
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
# The [python] table's column of each stack; the words each [python] column takes.
PY_COL = {"gcc": 2, "stack": 3, "pip-middle": 4, "pip-newest": 5, "wheel": 6}
PY_WORDS = {2: ("yes", "no", "not-with-newest", "not-with-pips"), 3: ("yes", "no"),
            4: ("yes", "no"), 5: ("yes", "alone", "no"), 6: ("yes", "no")}
RELEASE_COL = {"deb12": 1, "deb13": 2}
OWN_SCRIPT = ("lint", "demo", "fresh", "fresh13", "conan")  # variants without a test selection


def rows(matrix, section):
    """(fields, line) of each row of a section: the line without its comment, and its fields."""
    out, on = [], False
    with open(matrix, encoding="utf-8") as f:
        for line in f.read().splitlines():
            if line.startswith("["):
                on = line.split()[0] == f"[{section}]"
                continue
            line = line.split("#", 1)[0]
            if on and line.split():
                out.append((line.split(), line))
    return out


def check(m):
    bad = []
    for f, line in rows(m, "variants"):
        if len(f) < 4 or f[1] not in ("yes", "no") or f[2] not in ("yes", "no"):
            bad.append("[variants] " + line)
    for f, line in rows(m, "python"):
        if len(f) != 7 or any(f[c] not in words for c, words in PY_WORDS.items()):
            bad.append("[python] " + line)
    for f, line in rows(m, "deselect"):
        if len(f) != 2 or f[0] not in ("pip-middle", "pip-newest", "wheel"):
            bad.append("[deselect] " + line)
    variants = {f[0] for f, _ in rows(m, "variants")}
    for f, line in rows(m, "build"):
        if len(f) < 3 or f[1] not in ("what", "targets", "cmake") or f[0] not in variants:
            bad.append("[build] " + line)
    if bad:
        sys.stderr.write("test-all: %s: bad row: %s\n" % (m, "\n".join(bad)))
        sys.exit(2)


def selection(m, variant):
    for f, _ in rows(m, "variants"):
        if f[0] == variant:
            sel = " ".join(f[3:])
            return "" if sel in ("all", "-") else sel
    return ""


def ctest(m, variant, run):
    if variant == "stack" and os.environ.get("LOTUS_STACK_CTEST"):
        return os.environ["LOTUS_STACK_CTEST"]
    sel = selection(m, variant)
    if variant not in PY_COL:
        return sel
    c = PY_COL[variant]
    newest = "pip-newest" in run
    pips = newest and "pip-middle" in run
    names = []
    for f, _ in rows(m, "python"):
        cell = f[c]
        if f[0] != "-" and (cell == "no" or (cell == "not-with-newest" and newest)
                            or (cell == "not-with-pips" and pips)) and f[0] not in names:
            names.append(f[0])
    if names:  # as regular expressions: `.` literal, a row's `*` (python.loader_*) any name
        regex = "|".join(n.replace(".", "\\.").replace("*", ".*") for n in names)
        sel = (sel + " " if sel else "") + "-E ^(%s)$" % regex
    return sel


def files(m, stack, value):
    """A row's glob (test_loader_*.py) is every such file of tests/python, in name order."""
    out = []
    for f, _ in rows(m, "python"):
        if f[1] != "-" and f[PY_COL[stack]] == value:
            names = [f[1]]
            if "*" in f[1]:
                names = sorted(os.path.basename(g)
                               for g in glob.glob(os.path.join(ROOT, "tests", "python", f[1])))
            out += [n for n in names if n not in out]
    return " ".join(out)


def deselect(m, stack):
    return " ".join("--deselect " + f[1] for f, _ in rows(m, "deselect") if f[0] == stack)


def build(m, variant, key):
    """A [build] row's value: the rest of its line (cmake: shell words, the rows of a variant added)."""
    out = []
    for _, line in rows(m, "build"):
        name, k, value = line.strip().split(None, 2)
        if name == variant and k == key:
            out += shlex.split(value) if key != "what" else [value.strip()]
    return out


def plan(m, run):
    variants = [f[0] for f, _ in rows(m, "variants")]
    for v in run:
        if v in ("pip-newest", "pip-middle"):
            lines = ["%s: pytest -n 2 %s %s %s" % (v, selection(m, v), deselect(m, v), files(m, v, "yes"))]
            alone = files(m, v, "alone")
            if alone:
                lines.append("%s: then alone: pytest %s %s" % (v, selection(m, v), alone))
        elif v == "wheel":
            n = sum(1 for f, _ in rows(m, "deselect") if f[0] == "wheel")
            lines = ["wheel: on Python 3.14: pytest -n 2 %s (%d deselected)" % (files(m, "wheel", "yes"), n)]
        elif v in OWN_SCRIPT:
            lines = [v + ": its own script, no test selection"]
        elif v in variants:
            lines = ["%s: ctest %s" % (v, ctest(m, v, run) or "(every test its build has)")]
        else:
            sys.stdout.flush()
            sys.stderr.write("unknown variant: %s\n" % v)
            sys.exit(2)
        for line in lines:
            print(re.sub(" +", " ", "dry-run: " + line))


def count(kind, log):
    try:
        with open(log, encoding="utf-8", errors="replace") as f:
            text = f.read().splitlines()
    except OSError:
        return 1
    if kind == "ctest":
        found = [l for l in text if re.search(r"tests passed, [0-9]+ tests? failed out of [0-9]+", l)]
        if not found:
            return 1
        failed, total = re.search(r".* ([0-9]+) tests? failed out of ([0-9]+)", found[-1]).groups()
        print(failed, total)
        return 0
    # pytest's closing "12 passed, 1 failed, 3 skipped in 9.1s" (framed by "=" without -q); failures
    # and errors count as failed, skipped and deselected tests not at all.
    closing = re.compile(r"^(=+ )?[0-9]+ (passed|failed|skipped|errors?|deselected|xfailed|xpassed"
                         r"|warnings?)(,.*)? in [0-9.]+s")
    found = [l for l in text if closing.search(l)]
    if not found:
        return 1
    passed = failed = 0
    words = found[-1].split()
    for i in range(1, len(words)):
        k = words[i].rstrip(",=")
        n = int(words[i - 1]) if re.fullmatch(r"[0-9]+", words[i - 1]) else 0
        if k == "passed":
            passed += n
        elif k in ("failed", "error", "errors"):
            failed += n
    print(failed, passed + failed)
    return 0


def totals(counts):
    failed = total = 0
    with open(counts, encoding="utf-8") as f:
        for line in f:
            if line.split():
                failed += int(line.split()[0])
                total += int(line.split()[1])
    print("tests: %d passed, %d failed" % (total - failed, failed))


def test_output(last, test):
    """The failed checks of a test (Catch2's, first lines of each) and the end of its output."""
    on, left, fail, buf = False, 0, [], []
    start = re.compile(r"^[0-9]+/[0-9]+ Testing: ")
    for line in last:
        if start.match(line) and line[line.index("Testing: ") + 9:] == test:
            on, buf = True, []
            continue
        if on and line.startswith('"%s" end time:' % test):
            on = False
        if on and re.search(r"(: FAILED:|: error: )$", line) and len(fail) < 24:
            left = 5
        if on and left > 0 and len(fail) < 24:
            fail.append(line)
            left -= 1
        if on:
            buf.append(line)
    out = []
    if fail:
        out += ["  the failed checks (Catch2, first lines of each):"] + ["  " + l for l in fail]
        out.append("  the end of its output:")
    return out + ["  " + l for l in buf[-25:]]


def failures(out):
    """CI shows only the end of the run: each variant's failed tests (ctest's LastTest.log, at most 8
    a variant), then each pytest log's FAILED/ERROR lines (20 at most)."""
    failed = re.compile(r"^\s*[0-9]+ - (.*) \((Failed|Timeout|SEGFAULT|Subprocess aborted|Exception"
                        r"|Child aborted|Not Run)\)$")
    for log in sorted(glob.glob(os.path.join(out, "*.ctest.log"))):
        v = os.path.basename(log)[:-len(".ctest.log")]
        with open(log, encoding="utf-8", errors="replace") as f:
            text = f.read().splitlines()
        on = False
        for line in text:
            if on or "The following tests FAILED:" in line:
                print("%s: %s" % (v, line))
                on = not (on and line == "")
        last = os.path.join(out, v, "Testing", "Temporary", "LastTest.log")
        if not os.path.isfile(last):
            continue
        with open(last, encoding="utf-8", errors="replace") as f:
            last_lines = f.read().splitlines()
        for test in [m.group(1) for m in map(failed.match, text) if m][:8]:
            print('%s: the end of "%s":' % (v, test))
            for line in test_output(last_lines, test):
                print(line)
    for log in sorted(glob.glob(os.path.join(out, "*.pytest.log"))):
        name = os.path.basename(log)[:-len(".pytest.log")]
        with open(log, encoding="utf-8", errors="replace") as f:
            found = [l for l in f.read().splitlines() if re.match(r"(FAILED|ERROR) ", l)]
        for line in found[:20]:
            print("%s: %s" % (name, line[:300]))


def slowest(out, n=6):
    """Where each variant's time went: its n slowest ctest tests and pytest durations (CI shows the
    end of the run only), one line a variant."""
    ctest = re.compile(r"Test +#[0-9]+: (\S+) .*?(Passed|Failed|\*\*\*\w+).*? ([0-9.]+) sec$")
    pytest = re.compile(r"^([0-9.]+)s (call|setup|teardown) +(\S+)")
    for log in sorted(glob.glob(os.path.join(out, "*.ctest.log")) +
                      glob.glob(os.path.join(out, "*.pytest.log"))):
        name = os.path.basename(log).split(".")[0]
        rows = []
        with open(log, encoding="utf-8", errors="replace") as f:
            for line in f:
                m = ctest.search(line)
                if m:
                    rows.append((float(m.group(3)), m.group(1)))
                    continue
                m = pytest.match(line)
                if m:
                    rows.append((float(m.group(1)), m.group(3).split("::", 1)[-1][:60]))
        rows.sort(reverse=True)
        if rows:
            print("slowest %s: %s" % (name, ", ".join("%s %.0f s" % (t, s) for s, t in rows[:n])))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--matrix", default=os.path.join(HERE, "test-matrix.txt"))
    p.add_argument("--variants", default="")
    p.add_argument("command")
    p.add_argument("args", nargs="*")
    a = p.parse_args()
    m, run, args = a.matrix, a.variants.split(), a.args
    answer = None
    if a.command == "check":
        check(m)
    elif a.command == "defaults":
        c = RELEASE_COL[args[0]]
        answer = " ".join(f[0] for f, _ in rows(m, "variants") if f[c] == "yes")
    elif a.command == "selection":
        answer = selection(m, args[0])
    elif a.command == "ctest":
        answer = ctest(m, args[0], run)
    elif a.command == "files":
        answer = files(m, args[0], args[1])
    elif a.command == "deselect":
        answer = deselect(m, args[0])
    elif a.command in ("cmake", "targets", "what"):
        answer = "\n".join(build(m, args[0], a.command)) if a.command == "cmake" else \
            " ".join(build(m, args[0], a.command))
    elif a.command == "plan":
        plan(m, run)
    elif a.command == "count":
        return count(args[0], args[1])
    elif a.command == "totals":
        totals(args[0])
    elif a.command == "failures":
        failures(args[0])
        slowest(args[0])
    else:
        p.error("unknown command: " + a.command)
    if answer is not None:
        print(answer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
