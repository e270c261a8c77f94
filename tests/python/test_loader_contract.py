# SPDX-License-Identifier: MIT
"""The loader families (lotus.loaders) against their one record contract (``_contract.py``).

* every registered family's ``--check`` run, a real small run in a fresh interpreter, keeps the
  contract (a family whose library is not installed here is skipped, with the reason);
* the contract's checker finds each kind of breach in a planted trace;
* the families are the modules that declare ``FAMILY`` (no second list), and no module of lotus
  imports itself back through another (each imports alone in a fresh interpreter);
* a new family is one module: a copy of the package with ``data/loader_family/family_batchlist.py``
  dropped into lotus/loaders/ checks, installs on its library's import and keeps the contract.

The ctest of this file and of every test_loader_*.py is registered by tests/python/CMakeLists.txt's
glob: a family's own test file needs no edit there.
"""
import ast
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from conftest import run_python

import lotus
from lotus import loaders
from lotus.loaders import _check, _contract

HERE = pathlib.Path(__file__).resolve().parent
PACKAGE = pathlib.Path(lotus.__file__).resolve().parent
EXAMPLE = HERE / "data" / "loader_family"
CHECKED = [f for f in loaders.families() if f.check is not None]


@pytest.mark.parametrize("family", CHECKED, ids=[f.name for f in CHECKED])
def test_every_family_keeps_the_record_contract(family, tmp_path):
    row = _check.check_family(family, str(tmp_path))
    if row["status"] == "not installed":
        pytest.skip(f"{family.check.needs} is not installed in {sys.executable}")
    assert row["status"] == "ok", row
    assert row["problems"] == [], row
    main, worker = row["records"]["main"], row["records"]["worker"]
    # Every batch of the epoch reached the training loop, and was made by a producer.
    assert main["Consumed"] == _contract.BATCHES, row
    assert main["Wait"] >= _contract.BATCHES and worker["Preprocessed"] >= _contract.BATCHES, row
    assert (main.get("Queued", 0) >= _contract.BATCHES) == family.check.hands_out, row
    # What check_family read is what is on disk, and the contract holds for it.
    files = _contract.read(tmp_path / family.name / "trace")
    assert files and _contract.summary(files)["main"] == main
    assert any("_main_pid_" in n for n in files) and any("_worker_pid_" in n for n in files)


M = _contract.MARKER_NS


def kept():
    """A trace that keeps the contract: 2 batches from one worker, handed out (queued)."""
    main = []
    work = []
    for k in range(2):
        t = 1_000_000 * (k + 1)
        main += [(f"SBatchQueued_{k}", t, M), (f"SBatchWait_{k}", t + 10, 5000),
                 (f"SBatchConsumed_{k}", t + 6000, M)]
        work += [("SCollation", t + 100, 200), (f"SBatchPreprocessed_{k}", t + 50, 1000)]
    return {"p_main_pid_1": main, "p_worker_pid_2": work}


def breach(edit):
    files = kept()
    edit(files)
    return _contract.check(files)


def test_the_contract_finds_each_kind_of_breach():
    assert _contract.check(kept()) == []
    assert _contract.check(kept(), epochs=2) == [
        "batch 0: consumed 1 times, expected 2", "batch 1: consumed 1 times, expected 2"]
    # A loader that hands no work out need not queue; one that does must.
    no_queue = kept()
    no_queue["p_main_pid_1"] = [r for r in no_queue["p_main_pid_1"] if "Queued" not in r[0]]
    assert _contract.check(no_queue, queued=False) == []
    assert _contract.check(no_queue) == [
        "p_main_pid_1: SBatchConsumed_0 without an SBatchQueued_0 before it",
        "p_main_pid_1: SBatchConsumed_1 without an SBatchQueued_1 before it"]

    def drop_wait(f):
        f["p_main_pid_1"] = [r for r in f["p_main_pid_1"] if r[0] != "SBatchWait_1"]

    def long_marker(f):
        f["p_main_pid_1"][2] = ("SBatchConsumed_0", f["p_main_pid_1"][2][1], 2 * M)

    def op_outside(f):
        f["p_worker_pid_2"][0] = ("SCollation", 10, 200)

    def produced_in_main(f):
        f["p_main_pid_1"].append(("SBatchPreprocessed_1", 9_000_000, 100))

    def consumed_in_worker(f):
        f["p_worker_pid_2"].append(("SBatchConsumed_1", 9_000_000, M))

    def not_produced(f):
        f["p_worker_pid_2"] = f["p_worker_pid_2"][:2]

    assert breach(drop_wait) == ["p_main_pid_1: SBatchConsumed_1 without an SBatchWait_1 before it"]
    assert breach(long_marker) == [
        f"p_main_pid_1: SBatchConsumed_0 lasts {2 * M} ns, not the {M} ns marker"]
    assert breach(op_outside) == [
        "p_worker_pid_2: SCollation at 10 is outside SBatchPreprocessed_0"]
    assert breach(produced_in_main) == ["p_main_pid_1: SBatchPreprocessed_1 in a consumer's file"]
    assert breach(consumed_in_worker) == ["p_worker_pid_2: SBatchConsumed_1 in a producer's file"]
    assert breach(not_produced) == ["batch 1: consumed 1 times, preprocessed 0"]


def test_the_families_are_the_modules_that_declare_one():
    fams = loaders.families()
    names = [f.name for f in fams]
    assert {"torchvision", "dataloader", "stateful", "nodes"} <= set(names), names
    declared = sorted(p.stem for p in (PACKAGE / "loaders").glob("*.py")
                      if not p.stem.startswith("_") and "\nFAMILY = " in p.read_text())
    assert sorted(names) == declared
    assert [f.order for f in fams] == sorted(f.order for f in fams)
    for f in fams:
        assert f is getattr(sys.modules[f"lotus.loaders.{f.name}"], "FAMILY")
        assert callable(f.install) and (f.check is None or callable(f.check.run)), f
    # torch's DataLoader and torchdata's StatefulDataLoader hand work out; torchdata.nodes does not.
    by = {f.name: f for f in fams}
    assert by["dataloader"].check.hands_out and by["stateful"].check.hands_out
    assert not by["nodes"].check.hands_out and by["torchvision"].library == "torchvision"


def imports(path, name, is_pkg):
    """The lotus modules `path` (module `name`) imports anywhere in it (functions too)."""
    pkg = name if is_pkg else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = pkg.split(".")[:len(pkg.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)
    return out


def test_no_module_of_lotus_imports_itself_back():
    modules = {}
    for p in PACKAGE.rglob("*.py"):
        parts = list(p.relative_to(PACKAGE.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        modules[".".join(parts[:-1] if is_pkg else parts)] = (p, is_pkg)
    # A module's own packages are imported before it: an import of one is no circle.
    edges = {n: {m for m in imports(p, n, pkg) if m in modules and m != n
                 and not n.startswith(m + ".")}
             for n, (p, pkg) in modules.items()}
    circles = []

    def walk(start, node, path):
        for m in sorted(edges[node]):
            if m == start:
                circles.append(" -> ".join(path + [m]))
            elif m not in path:
                walk(start, m, path + [m])

    for start in sorted(modules):
        walk(start, start, [start])
    # The front and the loaders (other circles of the package are their rooms' business).
    assert [c for c in circles if "lotus.torch" in c or "lotus.loaders" in c] == []
    # Each loader module, and lotus.torch, imports alone in a fresh interpreter.
    alone = sorted(n for n in modules if n.startswith("lotus.loaders.")) + ["lotus.torch"]
    r = run_python(["-c", "import sys\nfor m in sys.argv[1:]:\n"
                    "    r = __import__('subprocess').run([sys.executable, '-c', 'import ' + m])\n"
                    "    print(m, r.returncode)", *alone])
    assert r.stdout.split() == [w for m in alone for w in (m, "0")], r.stdout + r.stderr


def copy_with_example(tmp_path):
    """The lotus package under tmp_path/pkg with batchlist's family as lotus/loaders/batchlist.py,
    and the batchlist library under tmp_path/lib; the environment that imports both."""
    pkg = tmp_path / "pkg" / "lotus"
    shutil.copytree(PACKAGE, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(EXAMPLE / "family_batchlist.py", pkg / "loaders" / "batchlist.py")
    (tmp_path / "lib").mkdir()
    shutil.copy(EXAMPLE / "batchlist.py", tmp_path / "lib" / "batchlist.py")
    path = [str(tmp_path / "pkg"), str(tmp_path / "lib")]
    return {"PYTHONPATH": os.pathsep.join(path + [os.environ.get("PYTHONPATH", "")]),
            "PYTHONDONTWRITEBYTECODE": "1"}


def test_a_new_family_is_one_module(tmp_path):
    env = copy_with_example(tmp_path)
    r = run_python(["-m", "lotus.torch", "--check", "--json"], env=env, check=False, timeout=600)
    out = json.loads(r.stdout)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "batchlist 0.1" in out["versions"], out["versions"]
    rows = {row["family"]: row for row in out["families"]}
    assert list(rows)[-1] == "batchlist", list(rows)  # after the torch families (order 50)
    row = rows["batchlist"]
    assert row["status"] == "ok" and row["problems"] == [], row
    assert row["records"]["main"] == {"Wait": 6, "Consumed": 6}, row
    assert row["records"]["worker"] == {"Preprocessed": 6} and row["records"]["ops"] == {
        "Collate": 6}, row
    # instrument() does not import batchlist; the program's import of it installs the family.
    trace = tmp_path / "run" / "lotustrace_log"
    r = run_python(f"""
import sys, lotus.torch
lotus.torch.instrument(log_file={str(trace)!r})
assert 'batchlist' not in sys.modules
import batchlist
print(sum(batchlist.Loader(range(9), 4), []))
print(batchlist.Loader.__iter__.__module__)
lotus.torch.uninstrument()
print(batchlist.Loader.__iter__.__module__)
""", env=env)
    assert r.stdout.split("\n")[:3] == [str([2 * i for i in range(9)]), "lotus.loaders.batchlist",
                                         "batchlist"], r.stdout
    files = _contract.read(trace.parent)
    assert _contract.check(files, queued=False) == []
    counts = _contract.summary(files)
    assert counts["main"] == {"Wait": 3, "Consumed": 3} and counts["ops"] == {"Collate": 3}
    # A batchlist whose Loader.__iter__ is not what the family wraps: one warning, naming
    # batchlist's version beside torch's, and that group left untraced.
    r = run_python("""
import warnings, batchlist, lotus.torch
batchlist.Loader.__iter__ = lambda self, shuffle: iter(())
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    lotus.torch.instrument(log_file=%r)
print("|".join(str(w.message) for w in caught if "lotus" in str(w.message)))
print(batchlist.Loader.__iter__.__module__)
""" % str(tmp_path / "broken" / "lotustrace_log"), env=env)
    warning, module = r.stdout.splitlines()[:2]
    assert "batchlist 0.1" in warning and warning.startswith(
        "lotus.torch does not support this version (torch "), warning
    assert "Loader.__iter__: parameters (self, shuffle), expected (self, ...)" in warning, warning
    assert module == "__main__", module  # the library's own function stays

