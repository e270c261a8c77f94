# SPDX-License-Identifier: MIT
"""``python -m lotus.torch preflight``: a script stopped at its first DataLoader iterator, and what
spawn, forkserver and fork will make of its workers.

Planted problems, each named: an unpicklable lambda ``collate_fn`` and a local function deep in the
dataset's transforms (their attribute paths), a plugin imported by the main process at run time
whose registry a spawned worker lacks (the module named), CUDA initialised before the workers start
(``torch.cuda.is_initialized`` monkeypatched where there is no CUDA). No training step runs (a
planted step writes a file that must not exist). No false alarm on the project's own scripts that
use a DataLoader. Exit statuses: a script without a loader, a script that raises, bad arguments.
The prediction's arithmetic against lotus-tool's start-up model on hand-worked figures; nothing
timed is asserted (bench/python/preflight_truth.py measures the prediction against real runs).
"""

import json
import pathlib
import subprocess
import sys
import textwrap

import pytest

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent

torch = pytest.importorskip("torch")


def preflight(*args, cwd=None, timeout=600):
    return subprocess.run([sys.executable, "-m", "lotus.torch", "preflight", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, cwd=cwd)


def report(*args, **kw):
    r = preflight("--json", *args, **kw)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)


def write(path, text):
    path.write_text(textwrap.dedent(text))
    return path


# A dataset whose transforms hold, at transforms[2], a local function; a lambda collate_fn; a
# planted training step that writes a file.
PICKLES = """\
    import sys
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Step:
        def __init__(self, fn):
            self.fn = fn
        def __call__(self, x):
            return self.fn(x)

    class Compose:
        def __init__(self, transforms):
            self.transforms = transforms
        def __call__(self, x):
            for t in self.transforms:
                x = t(x)
            return x

    def plus_one(x):
        return x + 1

    class Items(Dataset):
        def __init__(self, n, transform):
            self.n, self.transform = n, transform
        def __len__(self):
            return self.n
        def __getitem__(self, i):
            return self.transform(torch.tensor([float(i)]))

    def main():
        def halve(x):  # a local function: pickled by name, unreachable
            return x / 2
        ds = Items(32, Compose([Step(plus_one), Step(plus_one), Step(halve)]))
        loader = DataLoader(ds, batch_size=4, num_workers=2, collate_fn=lambda b: torch.stack(b))
        for batch in loader:
            open(sys.argv[1], "w").write("a training step ran\\n")

    if __name__ == "__main__":
        main()
"""


def test_unpicklable_members_named_by_path_and_no_step_runs(tmp_path):
    script = write(tmp_path / "pickles.py", PICKLES)
    step = tmp_path / "step-ran"
    rep = report(script, step)
    assert not step.exists(), "a training step ran"
    assert rep["stopped"] and rep["loader"]["num_workers"] == 2 and rep["workers"] == 2
    paths = {q["path"]: q["what"] for q in rep["unpicklable"]}
    assert set(paths) == {"loader.collate_fn", "loader.dataset.transform.transforms[2].fn"}, paths
    assert "lambda" in paths["loader.collate_fn"]
    assert "local function halve" in paths["loader.dataset.transform.transforms[2].fn"]
    kinds = [(q["kind"], q.get("path")) for q in rep["problems"]]
    assert ("unpicklable", "loader.collate_fn") in kinds
    for q in rep["problems"]:
        if q["kind"] == "unpicklable":
            assert q["methods"] == ["spawn", "forkserver"]
    members = {m["path"]: m for m in rep["members"]}
    assert not members["loader.collate_fn"]["ok"] and not members["loader.dataset"]["ok"]
    assert members["loader.worker_init_fn"]["ok"]
    # The sampler holds the dataset (it does not pickle either) but stays in the main process.
    assert not members["loader.sampler"]["sent"]
    assert not any("sampler" in q.get("path", "") for q in rep["problems"])
    # The dataset does not pickle: spawn and forkserver are not predicted, fork is.
    assert rep["predictions"]["fork"]["known"]
    assert not rep["predictions"]["spawn"]["known"]
    assert any("module level" in r for r in rep["remedies"])
    # The text report says the same.
    r = preflight(script, step)
    assert r.returncode == 0, r.stderr
    assert "loader.collate_fn: a lambda" in r.stdout
    assert "loader.dataset.transform.transforms[2].fn: a local function halve" in r.stdout
    assert not step.exists()


def test_plugin_imported_at_run_time_is_named(tmp_path):
    write(tmp_path / "plug_registry.py", """\
        REGISTRY = {}
        def register(name):
            def deco(fn):
                REGISTRY[name] = fn
                return fn
            return deco
    """)
    write(tmp_path / "plug_double.py", """\
        from plug_registry import register

        @register("double")
        def double(x):
            return 2 * x
    """)
    script = write(tmp_path / "plugged.py", """\
        import importlib
        import sys
        import torch
        from torch.utils.data import DataLoader, Dataset
        from plug_registry import REGISTRY

        class Items(Dataset):
            def __len__(self):
                return 16
            def __getitem__(self, i):
                return torch.tensor([REGISTRY["double"](i)])

        def main():
            importlib.import_module("plug_double")  # the plugin the config names
            loader = DataLoader(Items(), batch_size=4, num_workers=2)
            for b in loader:
                open(sys.argv[1], "w").write("step")

        if __name__ == "__main__":
            main()
    """)
    step = tmp_path / "step-ran"
    rep = report("--start-method", "spawn", "--workers", "3", script, step, cwd=tmp_path)
    assert not step.exists()
    assert rep["start_method"] == "spawn" and rep["workers"] == 3
    assert rep["missing_modules"] == ["plug_double"], rep["missing_modules"]
    mods = [q for q in rep["problems"] if q["kind"] == "modules"]
    assert len(mods) == 1 and mods[0]["modules"] == ["plug_double"]
    assert "plug_double" in mods[0]["message"]
    # The worker's first batch, in the fresh interpreter, meets the empty registry.
    assert "KeyError" in rep["probe"]["errors"].get("first_batch", "")
    assert any("set_forkserver_preload" in r and "plug_double" in r for r in rep["remedies"])
    assert not rep["unpicklable"] and not rep["cuda_initialized"]
    for m in ("fork", "spawn", "forkserver"):
        p = rep["predictions"][m]
        assert p["known"] and p["workers"] == 3 and p["first_ttfb_ms"] > 0


CUDA_SCRIPT = """\
    import sys
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    if sys.argv[2] == "fake":  # no CUDA here: the message path, by the check's own function
        torch.cuda.is_initialized = lambda: True
    else:
        torch.zeros(1, device="cuda")

    def main():
        loader = DataLoader(TensorDataset(torch.arange(16.0)), batch_size=4, num_workers=2,
                            multiprocessing_context="fork")
        for b in loader:
            open(sys.argv[1], "w").write("step")

    if __name__ == "__main__":
        main()
"""


@pytest.mark.parametrize("mode", ["fake", "real"])
def test_cuda_initialised_before_workers(tmp_path, mode):
    if mode == "real" and not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    script = write(tmp_path / "cuda_first.py", CUDA_SCRIPT)
    step = tmp_path / "step-ran"
    rep = report(script, step, mode)
    assert not step.exists()
    assert rep["cuda_initialized"] is True
    cuda = [q for q in rep["problems"] if q["kind"] == "cuda"]
    assert len(cuda) == 1 and cuda[0]["methods"] == ["fork"]
    assert "Cannot re-initialize CUDA in forked subprocess" in cuda[0]["message"]
    r = preflight(script, step, mode)
    assert "CUDA initialised before the workers start: yes" in r.stdout


def _example_cases(tmp):
    return [
        ("examples/python_pipeline/pipeline.py", ["-o", tmp / "pipe", "-n", "8", "-w", "2"]),
        ("examples/python_pipeline/pipeline.py",
         ["-o", tmp / "pipe", "-n", "8", "-w", "2", "--no-trace", "--context", "spawn"]),
        ("tests/python/startup_scenario.py", [tmp / "startup", "--workers", "2", "--paths", "100"]),
        ("tests/python/memory_scenario.py",
         [json.dumps({"trace": str(tmp / "mem" / "t"), "workers": 2})]),
        ("tests/python/causes_scenario.py",
         [json.dumps({"trace": str(tmp / "mem" / "c"), "cause": "compute"})]),
        ("tests/python/diagnosis_scenario.py",
         [json.dumps({"trace": str(tmp / "mem" / "d"), "case": "offcpu", "workers": 2,
                      "data": str(tmp / "data")})]),
    ]


@pytest.mark.parametrize("case", range(6))
def test_no_false_alarm_on_the_projects_scripts(tmp_path, case):
    rel, args = _example_cases(tmp_path)[case]
    (tmp_path / "mem").mkdir()
    rep = report(ROOT / rel, *args, cwd=tmp_path)
    assert rep["problems"] == [], rep["problems"]
    assert rep["unpicklable"] == [] and rep["missing_modules"] == [], rep
    assert rep["cuda_initialized"] is False
    assert all(p["known"] for p in rep["predictions"].values())
    assert "error" not in rep["probe"], rep["probe"]


def test_script_without_a_loader_exits_non_zero(tmp_path):
    script = write(tmp_path / "noloader.py", """\
        import torch
        print("no loader here")
    """)
    r = preflight(script)
    assert r.returncode == 3, r.stdout + r.stderr
    assert "without creating a DataLoader iterator" in r.stderr
    script = write(tmp_path / "exits.py", "import sys\nsys.exit(0)\n")
    r = preflight("--json", script)
    assert r.returncode == 3 and r.stdout == ""
    assert "exited (status 0) without creating a DataLoader iterator" in r.stderr
    script = write(tmp_path / "raises.py", "raise ValueError('planted')\n")
    r = preflight(script)
    assert r.returncode == 4 and "ValueError: planted" in r.stderr


def test_script_whose_top_level_starts_a_loader(tmp_path):
    # No __main__ guard: a spawned worker that imports the script would start a loader itself.
    script = write(tmp_path / "unguarded.py", """\
        import sys
        import torch
        from torch.utils.data import DataLoader, TensorDataset
        loader = DataLoader(TensorDataset(torch.arange(8.0)), batch_size=2, num_workers=1)
        for b in loader:
            open(sys.argv[1], "w").write("step")
    """)
    step = tmp_path / "step-ran"
    rep = report(script, step)
    assert not step.exists()
    assert "no `if __name__" in rep["probe"]["errors"].get("main", ""), rep["probe"]


@pytest.mark.parametrize("args", [[], ["--workers", "x", "s.py"], ["--workers", "-1", "s.py"],
                                  ["--start-method", "thread", "s.py"], ["no/such/script.py"],
                                  ["--bogus", "s.py"]])
def test_bad_arguments_exit_2(tmp_path, args):
    (tmp_path / "s.py").write_text("pass\n")
    r = preflight(*args, cwd=tmp_path)
    assert r.returncode == 2, (args, r.stdout, r.stderr)
    assert "usage: python -m lotus.torch preflight" in r.stderr


HELD = """\
    import gc
    import sys
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Items(Dataset):
        def __len__(self):
            return 16
        def __getitem__(self, i):
            return torch.tensor([i])

    def main():
        held = [[i] for i in range(1_500_000)]  # the main process's objects: 1.5 M tracked lists
        if sys.argv[1] == "freeze":
            gc.freeze()
        loader = DataLoader(Items(), batch_size=4, num_workers=2)
        for b in loader:
            pass
        return held

    if __name__ == "__main__":
        main()
"""


def test_a_forked_workers_full_collection_is_named_with_gc_freeze(tmp_path):
    """A main process that holds 1.5 M tracked objects, planned with fork: the pre-flight's fork
    measures a full collection in the child (tens of MiB copied) and names gc.freeze() as the
    remedy; where the script freezes them first, the child copies under a quarter and nothing is
    named."""
    script = write(tmp_path / "held.py", HELD)
    got = {}
    for mode in ("plain", "freeze"):
        rep = report("--start-method", "fork", "--workers", "2", script, mode)
        f = rep["fork_probe"]
        assert "error" not in f and f["gc_auto"] == 1, f
        got[mode] = (f["gc_copy_bytes"], [r for r in rep["remedies"] if "gc.freeze()" in r])
    assert got["plain"][0] >= 32 << 20 and got["freeze"][0] * 4 < got["plain"][0], got
    assert len(got["plain"][1]) == 1 and "full garbage collection" in got["plain"][1][0], got
    assert got["freeze"][1] == [], got


def test_prediction_is_lotus_tools_start_up_model():
    """Hand-worked figures of WHATIF.md §6's terms: a 100 KiB pickle (larger than a pipe's
    buffer: the worker's start is serial), a small one (workers start side by side)."""
    from lotus.loaders import _preflight as pf
    c = dict(cores=2.0, gap_ms=1.0, bytes=100 * 1024.0, pickle0_ms=10.0,
             pickle_later_ms=10.0, server_preloads_main=True, server_running=False,
             boot_ms=500.0, import_ms=0.0, unpickle_ms=5.0, init_fn_ms=0.0, init_cpu_ms=0.0,
             setup_ms=4.0, first_batch_ms=20.0)
    p = pf.predict(c, "spawn", 4)
    serial = 500 + 0 + 5 + 1  # the worker's start (boot, imports, unpickling) + its queues
    started = [(i + 1) * serial + 10 + i * 10 for i in range(4)]
    rest0 = 4 * 2  # setup, 4 workers on 2 cores
    assert p["init_ms"] == pytest.approx(started[3])
    assert p["ttfb_ms"] == pytest.approx(max(started[3], started[0] + rest0) + 20)
    assert p["first_ttfb_ms"] == p["ttfb_ms"]
    f = pf.predict(c, "forkserver", 4)  # the server imports the script once: its start apart
    serial = 20 + 5 + 1
    started = [(i + 1) * serial + 10 + i * 10 for i in range(4)]
    assert f["server_ms"] == 500
    assert f["ttfb_ms"] == pytest.approx(max(started[3], started[0] + rest0) + 20)
    assert f["first_ttfb_ms"] == pytest.approx(f["ttfb_ms"] + 500)
    c2 = dict(c, server_preloads_main=False)
    f2 = pf.predict(c2, "forkserver", 4)
    assert f2["server_ms"] == 40 and "does not preload" in f2["basis"]
    small = dict(c, bytes=1000.0)  # below the pipe's buffer: workers import side by side
    s = pf.predict(small, "spawn", 2)
    serial = 40 + 1
    started = [(i + 1) * serial + 10 + i * 10 for i in range(2)]
    assert s["ttfb_ms"] == pytest.approx(max(started[1], started[0] + 4 + 505) + 20)
    # fork: a fork of this process measured (the parent's fork() call, the child's start and
    # setup, its first batch), none estimated from constants.
    fk = dict(fork_ms=7.0, start_ms=3.0, setup_ms=4.0, init_fn_ms=0.0, init_cpu_ms=0.0,
              first_batch_ms=30.0)
    k = pf.predict(dict(c, fork=fk), "fork", 1)
    assert k["init_ms"] == pytest.approx(7 + 1)
    assert k["ttfb_ms"] == pytest.approx(7 + 1 + 3 + 4 + 30)
    assert "measured" in k["basis"]
    assert "ttfb_with_full_gc_ms" not in k
    # A probe whose batch ran a full collection (12 of its 30 ms): the prediction is the batch
    # without one; with one, the child's measured collection added.
    gk = dict(fk, batch_full_gc_ms=12.0, full_gc_ms=200.0, gc_auto=1)
    g = pf.predict(dict(c, fork=gk), "fork", 1)
    assert g["ttfb_ms"] == pytest.approx(7 + 1 + 3 + 4 + 18)
    assert g["ttfb_with_full_gc_ms"] == pytest.approx(g["ttfb_ms"] + 200)
    assert "ttfb_with_full_gc_ms" not in pf.predict(dict(c, fork=dict(gk, gc_auto=0)), "fork", 1)
    assert "ttfb_ms" not in pf.predict(dict(c, fork=None), "fork", 1)
    assert pf.predict(c, "spawn", 0)["ttfb_ms"] == 20
