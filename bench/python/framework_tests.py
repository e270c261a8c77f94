#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The frameworks' own tests, plain and with lotus on: every difference is a lotus bug or a limit.

    nice -n 19 /usr/bin/python3 bench/python/framework_tests.py [--cache DIR] [--files F ...] [--keep]

1. Finds the installed torch and torchvision (the Debian packages python3-torch and
   python3-torchvision of the interpreter /usr/bin/python3) and their source packages and versions
   (dpkg-query: pytorch and pytorch-vision on Debian 12).
2. Fetches those source packages' files with apt, in a private apt state under the cache
   directory: a `deb-src` entry is made for every `deb` entry of the machine's own sources
   (/etc/apt/sources.list, /etc/apt/sources.list.d/*.list and *.sources) that serves the installed
   binary packages (`apt-cache madison`), then `apt-get update` and
   `apt-get source --download-only <source package>=<version>`. /etc/apt and /var/lib/apt are not
   touched. Only the `.orig` tarball is needed (it holds the upstream tests); from it the test files
   and the helpers they import from the test tree are extracted (PyTorch: test/test_dataloader.py,
   test/conftest.py, test/pytest_shard_custom.py (2.x's conftest.py imports it), pytest.ini;
   torch.testing._internal is part of the installed torch;
   torchvision: test/*.py, test/assets/, pytest.ini), and the tarballs are deleted. With
   --cache DIR the extracted tree is kept there and a later run downloads nothing; without it
   everything goes to a temporary directory that is removed at the end.
3. Runs each test file twice with pytest, from the extracted tree (so its pytest.ini applies):
   plain, and with lotus on. Lotus on: a sitecustomize.py (in a directory put first on PYTHONPATH
   for both runs; it chains to the sitecustomize it shadows) calls
   `lotus.torch.instrument(log_file=<tmp>/trace/lotustrace_log)` at start-up of every Python
   process of the run: the pytest process, spawned/forkserver DataLoader workers and any
   interpreter a test starts. lotus comes from --lotus-path (default <repo>/build/python; built with
   `cmake --build build --target lotus_python` when it is missing). LOTUS_* variables of the calling
   environment are removed from both runs. pytest-timeout, when installed, gives each test 300 s;
   the whole run of a file is limited to --timeout seconds (default 1500) in any case. CUDA tests
   skip themselves in both runs when there is no GPU.
4. Each test's outcome is written as it finishes by a small pytest plugin (so a run cut short by
   the timeout still counts what ran); the script prints a Markdown table per file (tests,
   passed/failed/skipped/errors plain and with lotus on) and lists every test whose outcome differs,
   with the failure message of the failing side. Exit status: 0 no difference, 1 differences,
   2 the sources or the lotus module could not be had.
5. Disk: the traces go to a temporary directory, removed unless --keep; its size is checked every
   2 s and a run whose traces pass --max-trace-mb (default 256) is stopped (and reported).

If the machine's Python lacks `expecttest` (torch.testing._internal imports it; Debian 12 does not
package it), a stand-in with the two names torch uses (ACCEPT, TestCase) is put on PYTHONPATH for
both runs; test_dataloader.py does not use its expect-file assertions.
"""
import argparse
import glob
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]

# Source package (as Debian names it) -> the files it is fetched for.
BINARIES = {"torch": "python3-torch", "torchvision": "python3-torchvision"}
DEFAULT_FILES = {
    "torch": ["test/test_dataloader.py"],
    "torchvision": ["test/test_transforms.py", "test/test_transforms_tensor.py",
                    "test/test_transforms_v2.py"],
}

SITECUSTOMIZE = r'''# Written by lotus bench/python/framework_tests.py: lotus on, in every process of the run.
import importlib.machinery as _m
import os as _os
import sys as _sys

_here = _os.path.dirname(_os.path.abspath(__file__))
_spec = _m.PathFinder.find_spec(
    "sitecustomize", [p for p in _sys.path if _os.path.abspath(p or ".") != _here])
if _spec is not None and _spec.loader is not None:  # the one this file shadows (Debian's)
    try:
        exec(compile(open(_spec.origin).read(), _spec.origin, "exec"), {"__name__": "sitecustomize"})
    except Exception:
        pass
if _os.environ.get("LOTUS_FT_LOG"):
    import lotus.torch as _lt
    _lt.instrument(log_file=_os.environ["LOTUS_FT_LOG"])
'''

PLUGIN = r'''# Written by lotus bench/python/framework_tests.py: each test's reports, one JSON line each.
import json as _json
import os as _os
import re as _re

_OUT = _os.environ["LOTUS_FT_RESULTS"]


def _write(d):
    with open(_OUT, "a") as f:
        f.write(_json.dumps(d) + "\n")


def _msg(report):
    if report.outcome == "skipped" and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2])[:300]
    text = getattr(report, "longreprtext", "") or ""
    lines = [l for l in text.splitlines() if l.strip()]
    for l in lines:  # a missing fixture (pytest-mock's mocker): the line that names it
        m = _re.match(r"^E\s+(fixture '[^']+' not found)", l)
        if m:
            return m.group(1)
    # from the last exception line ("E   ValueError: ..." or, with --tb=native, "ValueError: ...")
    for i in range(len(lines) - 1, -1, -1):
        if _re.match(r"^(E\s+)?[A-Za-z_][\w.]*(Error|Exception|Failure|Exit|Interrupt|Warning)\b",
                     lines[i]):
            return "\n".join(lines[i:i + 3])[:600]
    return "\n".join(lines[-3:])[-600:]


def pytest_runtest_logreport(report):
    if report.when == "call" or report.outcome != "passed":
        _write({"id": report.nodeid, "when": report.when, "outcome": report.outcome,
                "xfail": hasattr(report, "wasxfail"), "msg": _msg(report) if report.outcome != "passed" else ""})


def pytest_collectreport(report):
    if report.outcome == "failed":
        _write({"id": report.nodeid or "<collection>", "when": "collect", "outcome": "failed",
                "xfail": False, "msg": _msg(report)})
'''

EXPECTTEST_STANDIN = '''# Stand-in written by lotus bench/python/framework_tests.py: the installed Python has no expecttest.
import unittest

ACCEPT = False


class TestCase(unittest.TestCase):
    pass
'''


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def sh(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


# ---- 1. versions -----------------------------------------------------------------------------

def installed(python):
    """{'torch': (module version, binary package, source package, source version), ...}."""
    out = {}
    for mod, binary in BINARIES.items():
        r = sh([python, "-c", f"import {mod}; print({mod}.__version__)"])
        modver = r.stdout.strip().splitlines()[-1] if r.returncode == 0 else None
        q = sh(["dpkg-query", "-W", "-f", "${source:Package}\t${source:Version}\t${Status}", binary])
        src = srcver = None
        if q.returncode == 0 and "installed" in q.stdout:
            src, srcver = q.stdout.split("\t")[:2]
        out[mod] = (modver, binary, src, srcver)
    return out


# ---- 2. sources ------------------------------------------------------------------------------

def apt_entries():
    """The machine's enabled `deb` entries: dicts of uris, suites, components, options."""
    entries = []
    files = ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list"))
    for path in files:
        try:
            lines = open(path).read().splitlines()
        except OSError:
            continue
        for line in lines:
            line = line.split("#", 1)[0].strip()
            m = re.match(r"^deb\s+(\[[^\]]*\]\s+)?(\S+)\s+(\S+)\s*(.*)$", line)
            if m:
                opts = {}
                for kv in (m.group(1) or "").strip(" []").split():
                    if "=" in kv:
                        k, v = kv.split("=", 1)
                        opts[{"signed-by": "Signed-By", "arch": "Architectures"}.get(k, k)] = v
                entries.append({"URIs": m.group(2), "Suites": m.group(3),
                                "Components": m.group(4), **opts})
    for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
        try:
            text = open(path).read()
        except OSError:
            continue
        for stanza in re.split(r"\n\s*\n", text):
            fields, key = {}, None
            for line in stanza.splitlines():
                if line.startswith("#") or not line.strip():
                    continue
                if line[0] in " \t" and key:
                    fields[key] += "\n " + line.strip()  # deb822 continuation (inline keys)
                    continue
                if ":" in line:
                    key, v = line.split(":", 1)
                    fields[key.strip()] = v.strip()
            if "deb" not in fields.get("Types", "").split():
                continue
            if fields.get("Enabled", "yes").lower() == "no":
                continue
            fields.pop("Types")
            entries.append(fields)
    return entries


def deb_src_file(binaries):
    """deb822 text: a deb-src entry for each deb entry that serves the installed packages."""
    entries = apt_entries()
    serving = set()
    for b in binaries:
        for line in sh(["apt-cache", "madison", b]).stdout.splitlines():
            parts = [p.strip() for p in line.split("|")]
            if len(parts) == 3:
                serving.add(parts[2].split()[0].rstrip("/"))
    chosen = [e for e in entries if any(u.rstrip("/") in serving for u in e["URIs"].split())]
    stanzas = []
    for e in chosen or entries:
        stanzas.append("Types: deb-src\n" + "".join(
            f"{k}: {v}\n" for k, v in e.items() if k in
            ("URIs", "Suites", "Components", "Signed-By", "Trusted", "Check-Valid-Until")))
    return "\n".join(stanzas)


def apt_opts(state):
    return ["-o", "Dir::Etc::SourceList=/dev/null", "-o", f"Dir::Etc::SourceParts={state}/sources",
            "-o", f"Dir::State::Lists={state}/lists", "-o", f"Dir::Cache={state}/cache",
            "-o", "Dir::Etc::Preferences=/dev/null", "-o", f"Dir::Etc::PreferencesParts={state}/none"]


TREE_MEMBERS = {
    # test/pytest_shard_custom.py: PyTorch 2.x's test/conftest.py imports it.
    "torch": lambda rel: rel in ("pytest.ini", "test/conftest.py", "test/pytest_shard_custom.py",
                                 "test/test_dataloader.py"),
    "torchvision": lambda rel: rel == "pytest.ini" or re.fullmatch(r"test/[^/]+\.py", rel)
    or rel.startswith("test/assets/"),
}


def extract(tarball, which, dest):
    """The needed regular files of the tarball (its top folder removed) into dest."""
    n = 0
    with tarfile.open(tarball, "r:*") as tf:
        for m in tf:
            parts = m.name.split("/", 1)
            if len(parts) < 2 or not m.isfile():
                continue
            rel = parts[1]
            if rel.startswith("/") or ".." in rel.split("/") or not TREE_MEMBERS[which](rel):
                continue
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            with tf.extractfile(m) as src, open(target, "wb") as out:
                shutil.copyfileobj(src, out)
            n += 1
    return n


def fetch_tree(which, src, srcver, cache):
    """The extracted test tree of (src, srcver) under cache, downloading it if not there yet."""
    tree = cache / f"{src}_{srcver}"
    if (tree / ".complete").exists():
        log(f"{src} {srcver}: cached in {tree}")
        return tree
    state = cache / "apt"
    for d in ("sources", "lists/partial", "cache/archives/partial", "none", "download"):
        (state / d).mkdir(parents=True, exist_ok=True)
    srcfile = state / "sources" / "lotus-framework-tests-src.sources"
    if not srcfile.exists():
        text = deb_src_file(list(BINARIES.values()))
        if not text:
            sys.exit("no deb entry found in /etc/apt/sources.list{,.d/*}: cannot make a deb-src entry")
        srcfile.write_text(text)
        log("deb-src entries (private apt state " + str(state) + "):\n" + text)
        r = sh(["apt-get", *apt_opts(state), "update"])
        log(r.stdout.strip()[-2000:])
    dl = state / "download"
    r = sh(["apt-get", *apt_opts(state), "source", "--download-only", f"{src}={srcver}"], cwd=dl)
    upstream = srcver.split(":", 1)[-1].rsplit("-", 1)[0]
    orig = sorted(dl.glob(f"{src}_{upstream}.orig.tar.*"))
    orig = [p for p in orig if not p.name.endswith(".asc")]
    if not orig:
        log(f"apt-get source --download-only {src}={srcver} (exit {r.returncode}):\n{r.stdout}")
        sys.exit(f"no {src}_{upstream}.orig.tar.* from apt: cannot get the {which} tests")
    if r.returncode != 0:  # e.g. the .debian.tar missing on the mirror: the tests are upstream's
        log(f"apt-get source exited {r.returncode} but the .orig tarball came (tests are in it):\n"
            + "\n".join(l for l in r.stdout.splitlines() if l.startswith(("E:", "W:"))))
    tmp = cache / f".{src}_{srcver}.part"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    n = extract(orig[0], which, tmp)
    (tmp / ".complete").write_text(orig[0].name + "\n")
    shutil.rmtree(tree, ignore_errors=True)
    tmp.rename(tree)
    for p in dl.glob(f"{src}_*"):  # keep only the extracted files
        p.unlink()
    log(f"{src} {srcver}: {n} files from {orig[0].name} into {tree}")
    return tree


# ---- 3. runs ---------------------------------------------------------------------------------

def dir_bytes(path):
    total = 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_size
            except OSError:
                pass
    return total


def run_pytest(python, tree, testfile, env, results, logpath, timeout, trace_dir, max_trace):
    """One pytest run of one file; returns (wall seconds, note)."""
    cmd = [python, "-m", "pytest", "-p", "no:cacheprovider", "-p", "lotus_ft_report", "-q", "-rA"]
    if sh([python, "-c", "import pytest_timeout"]).returncode == 0:
        cmd += ["--timeout", "300"]
    cmd.append(testfile)
    t0 = time.monotonic()
    note = ""
    with open(logpath, "w") as out:
        p = subprocess.Popen(cmd, cwd=tree, env=env, stdout=out, stderr=subprocess.STDOUT,
                             start_new_session=True)
        peak = 0
        while True:
            try:
                p.wait(timeout=2)
                break
            except subprocess.TimeoutExpired:
                pass
            if trace_dir is not None:
                peak = max(peak, dir_bytes(trace_dir))
                if peak > max_trace:
                    note = f"stopped: traces over {max_trace >> 20} MiB"
            if time.monotonic() - t0 > timeout:
                note = f"stopped: over {timeout} s"
            if note:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                break
    try:  # whatever the run left behind in its session (workers of a killed run)
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    return time.monotonic() - t0, note or f"pytest exit {p.returncode}"


def outcomes(results):
    """{test id: (outcome, message)}: error (setup/teardown/collection failed), failed, skipped
    (xfail included), passed."""
    per = {}
    if not results.exists():
        return per
    for line in results.read_text().splitlines():
        try:
            d = json.loads(line)
        except ValueError:
            continue
        tid, when, oc = d["id"], d["when"], d["outcome"]
        if oc == "passed" and when == "call":
            new = "xpassed" if d["xfail"] else "passed"
        elif oc == "skipped":
            new = "skipped"
        elif when == "call":
            new = "failed"
        else:
            new = "error"
        rank = {"passed": 0, "xpassed": 0, "skipped": 1, "failed": 2, "error": 3}
        if tid not in per or rank[new] > rank[per[tid][0]]:
            per[tid] = (new, d["msg"])
    return per


def counts(per):
    c = {"passed": 0, "failed": 0, "skipped": 0, "error": 0}
    for oc, _ in per.values():
        c["passed" if oc == "xpassed" else oc] += 1
    return c


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--cache", help="keep the extracted tests here (default: a temporary directory)")
    ap.add_argument("--files", nargs="+", help="test files to run, by name (test_dataloader.py, "
                    "test_transforms.py, test_transforms_tensor.py, test_transforms_v2.py)")
    ap.add_argument("--keep", action="store_true", help="keep the traces and logs; print where")
    ap.add_argument("--timeout", type=int, default=1500, help="seconds per file and run (1500)")
    ap.add_argument("--max-trace-mb", type=int, default=256)
    ap.add_argument("--lotus-path", default=str(ROOT / "build" / "python"))
    args = ap.parse_args()

    lotus_path = pathlib.Path(args.lotus_path)
    if not list((lotus_path / "lotus").glob("_lotus*.so")):
        log(f"no lotus module in {lotus_path}: cmake --build {ROOT / 'build'} --target lotus_python")
        r = sh(["cmake", "--build", str(ROOT / "build"), "--target", "lotus_python"])
        if r.returncode != 0 or not list((lotus_path / "lotus").glob("_lotus*.so")):
            log(r.stdout[-3000:])
            return 2

    vers = installed(args.python)
    for mod, (modver, binary, src, srcver) in vers.items():
        log(f"{mod} {modver}: {binary}, source package {src} {srcver}")

    work = pathlib.Path(tempfile.mkdtemp(prefix="lotus-framework-tests-"))
    cache = pathlib.Path(args.cache).resolve() if args.cache else work / "sources"
    cache.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    try:
        wanted = [(mod, f) for mod, fs in DEFAULT_FILES.items() for f in fs
                  if not args.files or os.path.basename(f) in args.files]
        trees = {}
        for mod in sorted({m for m, _ in wanted}):
            modver, binary, src, srcver = vers[mod]
            if not modver or not src:
                log(f"{mod}: not installed as a Debian package ({binary}) for {args.python}")
                return 2
            trees[mod] = fetch_tree(mod, src, srcver, cache)

        hook = work / "hook"
        hook.mkdir()
        (hook / "sitecustomize.py").write_text(SITECUSTOMIZE)
        (hook / "lotus_ft_report.py").write_text(PLUGIN)
        if sh([args.python, "-c", "import expecttest"]).returncode != 0:
            (hook / "expecttest.py").write_text(EXPECTTEST_STANDIN)
            log("expecttest is not installed: a stand-in (ACCEPT, TestCase) is used in both runs")

        base_env = {k: v for k, v in os.environ.items()
                    if not k.startswith("LOTUS_") and k != "PYTHONPATH"}
        rows, diffs, notes, common = [], [], [], {}
        for mod, rel in wanted:
            tree = trees[mod]
            if not (tree / rel).exists():
                log(f"{rel}: not in {vers[mod][2]} {vers[mod][3]}, skipped")
                continue
            name = os.path.basename(rel)
            res = {}
            for mode in ("plain", "lotus"):
                env = dict(base_env)
                results = work / f"{name}.{mode}.jsonl"
                env["LOTUS_FT_RESULTS"] = str(results)
                trace_dir = None
                if mode == "lotus":
                    trace_dir = work / f"trace-{name}"
                    trace_dir.mkdir()
                    env["LOTUS_FT_LOG"] = str(trace_dir / "lotustrace_log")
                    env["PYTHONPATH"] = f"{hook}{os.pathsep}{lotus_path}"
                else:
                    env["PYTHONPATH"] = str(hook)
                logpath = work / f"{name}.{mode}.log"
                log(f"{name}, {mode}: running ...")
                wall, note = run_pytest(args.python, tree, rel, env, results, logpath,
                                        args.timeout, trace_dir, args.max_trace_mb << 20)
                per = outcomes(results)
                size = dir_bytes(trace_dir) if trace_dir else 0
                nfiles = sum(len(f) for _, _, f in os.walk(trace_dir)) if trace_dir else 0
                log(f"{name}, {mode}: {len(per)} tests in {wall:.0f} s ({note})"
                    + (f"; traces {size / 2**20:.1f} MiB in {nfiles} files" if trace_dir else ""))
                if note.startswith("stopped"):
                    notes.append(f"{name} {mode}: {note}")
                res[mode] = (per, wall, size, nfiles)
            (pp, pw, _, _), (lp, lw, ls, ln) = res["plain"], res["lotus"]
            cp, cl = counts(pp), counts(lp)
            fmt = lambda c: f"{c['passed']} / {c['failed']} / {c['skipped']} / {c['error']}"
            ids = sorted(set(pp) | set(lp))
            changed = [(t, pp.get(t, ("not run", ""))[0], lp.get(t, ("not run", ""))[0],
                        (lp.get(t) if lp.get(t, ("",))[0] not in ("passed", "xpassed", "skipped")
                         else pp.get(t, ("", "")))[1])
                       for t in ids if pp.get(t, ("not run",))[0] != lp.get(t, ("not run",))[0]]
            diffs += [(name,) + c for c in changed]
            for t in ids:  # failing alike in both runs: not lotus's; counted by message
                a, b = pp.get(t, ("", "")), lp.get(t, ("", ""))
                if a[0] == b[0] and a[0] in ("failed", "error"):
                    first = (a[1].splitlines() or [""])[0]
                    key = (name, a[0], re.sub(r"^E\s+", "", first)[:160])
                    common[key] = common.get(key, 0) + 1
            rows.append(f"| {vers[mod][2]} {vers[mod][3]} `{name}` | {len(ids)} | {fmt(cp)} | "
                        f"{fmt(cl)} | {len(changed)} | {pw:.0f} / {lw:.0f} | "
                        f"{ls / 2**20:.1f} MiB, {ln} files |")

        print()
        print(f"torch {vers['torch'][0]}, torchvision {vers['torchvision'][0]}, "
              f"{args.python}; wall time {time.monotonic() - started:.0f} s")
        print()
        print("| file | tests | plain: passed / failed / skipped / errors | lotus on: passed / "
              "failed / skipped / errors | outcomes that differ | wall s, plain / lotus | traces |")
        print("| --- | ---: | --- | --- | ---: | --- | --- |")
        for r in rows:
            print(r)
        for n in notes:
            print(f"\n{n}")
        if common:
            print("\nFailing alike in both runs (the frameworks' tests on this machine), by message:\n")
            print("| file | outcome | tests | message |")
            print("| --- | --- | ---: | --- |")
            for (name, oc, msg), n in sorted(common.items(), key=lambda kv: (kv[0][0], -kv[1])):
                print(f"| {name} | {oc} | {n} | {msg.replace('|', chr(92) + '|')} |")
        if diffs:
            print("\nTests whose outcome differs:\n")
            print("| file | test | plain | lotus on | message |")
            print("| --- | --- | --- | --- | --- |")
            for name, t, a, b, msg in diffs:
                m = " ".join(msg.split())[:300].replace("|", "\\|")
                print(f"| {name} | `{t}` | {a} | {b} | {m} |")
        else:
            print("\nNo test's outcome differs.")
        return 1 if diffs or notes else 0
    finally:
        if args.keep:
            log(f"kept: traces, pytest logs and outcomes in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
