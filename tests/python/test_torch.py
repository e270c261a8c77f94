# SPDX-License-Identifier: MIT
"""lotus.torch on stock PyTorch/torchvision: exact Lotus record sets, worker and main files."""
import json
import os
import subprocess

import pytest

from conftest import HERE, read_trace, run_python

OPS = ["SAddOne", "SDouble"]


def scenario(tmp_path, **cfg):
    trace = tmp_path / "trace"
    flags = tmp_path / "flags"
    flags.mkdir()
    cfg.setdefault("trace", str(trace / "lotustrace_log"))
    cfg.setdefault("flags", str(flags))
    cfg.setdefault("data", str(tmp_path / "data"))
    r = run_python([str(HERE / "scenario.py"), json.dumps(cfg)], timeout=300)
    info = json.loads(r.stdout.strip().splitlines()[-1])
    files = read_trace(trace) if trace.exists() else {}
    return info, files


def expected_main(batches, workers, order="in", prefetch=2):
    """The main file of one epoch by Lotus's _next_data rules, arrivals forced as in scenario.py."""
    q = min(prefetch * workers, batches)
    out = [f"SBatchQueued_{i}" for i in range(q)]
    for k in range(batches):
        queued = [f"SBatchQueued_{q + k}"] if q + k < batches else []
        if order == "swap01" and k == 0:
            out += ["SBatchWait_1"] + queued + ["SBatchWait_0", "SBatchConsumed_0"]
        elif order == "swap01" and k == 1:
            out += queued + ["SBatchConsumed_1"]  # served from the cache: no wait record
        else:
            out += queued + [f"SBatchWait_{k}", f"SBatchConsumed_{k}"]
    return out


def expected_worker(batch_ids, batch_size, per_sample=OPS, collation=True):
    out = []
    for k in batch_ids:
        out += per_sample * batch_size
        out += (["SCollation"] if collation else []) + [f"SBatchPreprocessed_{k}"]
    return out


def split(files, pid):
    main = {n: r for n, r in files.items() if "_main_pid_" in n}
    workers = {n: r for n, r in files.items() if "_worker_pid_" in n}
    assert all(n.endswith(f"_{pid}") for n in main), main.keys()
    return main, workers


def check_markers(rows):
    for name, _, dur in rows:
        if name.startswith(("SBatchQueued_", "SBatchConsumed_")):
            assert dur == 1000, (name, dur)


def check_nesting(rows):
    """Every record of a batch lies inside its SBatchPreprocessed span (one clock, no timing)."""
    group = []
    for name, start, dur in rows:
        if name.startswith("SBatchPreprocessed_"):
            for n2, s2, d2 in group:
                assert start <= s2 and s2 + d2 <= start + dur, (name, n2)
            group = []
        else:
            group.append((name, start, dur))


def batches_of(rows):
    return [int(n.split("_")[1]) for n, _, _ in rows if n.startswith("SBatchPreprocessed_")]


@pytest.mark.parametrize("order", ["in", "swap01"])
def test_fork_workers_two_epochs_exact(tmp_path, order):
    info, files = scenario(tmp_path, context="fork", workers=2, epochs=2, batches=6, order=order)
    assert info["samples"] == 2 * 12
    main, workers = split(files, info["pid"])
    assert len(main) == 1
    rows = next(iter(main.values()))
    names = [r[0] for r in rows]
    assert names == expected_main(6, 2, order) * 2
    check_markers(rows)
    if order == "swap01":
        wait1 = [r for r in rows if r[0] == "SBatchWait_1"]
        assert [r[2] for r in wait1] == [1000, 1000]  # the out-of-order marker, each epoch
    # A fresh worker process per epoch and worker: batches go round-robin, each file in order.
    assert len(workers) == 4
    assert sorted(tuple(batches_of(r)) for r in workers.values()) == [(0, 2, 4), (0, 2, 4),
                                                                        (1, 3, 5), (1, 3, 5)]
    for name, r in workers.items():
        assert [x[0] for x in r] == expected_worker(batches_of(r), 2), name
        check_nesting(r)
        assert not name.endswith(f"_{info['pid']}")
    s = info["stats"]
    assert s[0] == s[1] and s[2] == 0  # main process: recorded == written, nothing dropped


def test_spawn_workers_out_of_order(tmp_path):
    info, files = scenario(tmp_path, context="spawn", workers=2, epochs=2, batches=4,
                           order="swap01")
    main, workers = split(files, info["pid"])
    names = [r[0] for r in next(iter(main.values()))]
    assert names == expected_main(4, 2, "swap01") * 2
    assert len(workers) == 4
    for name, r in workers.items():
        assert [x[0] for x in r] == expected_worker(batches_of(r), 2), name
    assert sorted(tuple(batches_of(r)) for r in workers.values()) == [(0, 2), (0, 2), (1, 3),
                                                                        (1, 3)]


def test_persistent_workers_keep_their_files(tmp_path):
    info, files = scenario(tmp_path, context="fork", workers=2, epochs=2, batches=4,
                           persistent=True)
    main, workers = split(files, info["pid"])
    assert [r[0] for r in next(iter(main.values()))] == expected_main(4, 2) * 2
    assert len(workers) == 2  # the same two processes serve both epochs; indices restart at 0
    assert sorted(tuple(batches_of(r)) for r in workers.values()) == [(0, 2, 0, 2), (1, 3, 1, 3)]
    for r in workers.values():
        assert [x[0] for x in r] == expected_worker(batches_of(r), 2)


def test_num_workers_0_main_process_only(tmp_path):
    info, files = scenario(tmp_path, workers=0, epochs=2, batches=3)
    assert list(files) == [f"lotustrace_log_worker_pid_{info['pid']}"]
    names = [r[0] for r in files[f"lotustrace_log_worker_pid_{info['pid']}"]]
    # No SBatch* records and no main file without workers, as Lotus.
    assert names == (OPS * 2 + ["SCollation"]) * 6


def test_imagefolder_lotus_keywords(tmp_path):
    info, files = scenario(tmp_path, style="keywords", dataset="folder", workers=2, batches=2)
    main, workers = split(files, info["pid"])
    # ImageFolder has no arrival gate: batch 1 may arrive first (then it gets the 1 us marker).
    assert [r[0] for r in next(iter(main.values()))] in (expected_main(2, 2),
                                                          expected_main(2, 2, "swap01"))
    per_sample = ["SResize", "SToTensor", "SLoader", "STransform"]  # Compose's lines first, as Lotus writes them
    for r in workers.values():
        assert [x[0] for x in r] == expected_worker(batches_of(r), 2, per_sample)
        check_nesting(r)
        # STransform spans its Compose steps; SLoader ends before STransform starts.
        for i in range(0, len(r) - 1):
            if r[i][0] == "STransform":
                first, last, load, tr = r[i - 3], r[i - 2], r[i - 1], r[i]
                assert tr[1] <= first[1] and last[1] + last[2] <= tr[1] + tr[2]
                assert load[1] + load[2] <= tr[1]


def test_custom_dataset_lotus_keywords(tmp_path):
    # Lotus README's custom dataset: `log_file` and a Compose given log_transform_elapsed_time.
    info, files = scenario(tmp_path, style="keywords", workers=2, batches=4, order="swap01")
    main, workers = split(files, info["pid"])
    assert [r[0] for r in next(iter(main.values()))] == expected_main(4, 2, "swap01")
    for r in workers.values():
        assert [x[0] for x in r] == expected_worker(batches_of(r), 2)


def test_keyword_mode_traces_only_what_lotus_would(tmp_path):
    # instrument() with no log file and no keywords: Lotus would write nothing, so does lotus.
    info, files = scenario(tmp_path, style="none", workers=2, batches=2)
    assert info["samples"] == 4
    assert files == {}


def test_iterable_dataset(tmp_path):
    info, files = scenario(tmp_path, dataset="iterable", workers=2, batches=2, flags=None)
    main, workers = split(files, info["pid"])
    # Lotus records no SCollation for iterable datasets; the batch spans are there.
    for r in workers.values():
        assert [x[0] for x in r] == expected_worker(batches_of(r), 2, collation=False)
    assert sorted(b for r in workers.values() for b in batches_of(r)) == [0, 1]


def test_uninstrument_restores_everything(tmp_path):
    info, files = scenario(tmp_path, workers=2, batches=2, uninstrument=True)
    assert info["samples"] == 8  # both runs delivered every sample
    main, workers = split(files, info["pid"])
    # Only the instrumented run is in the trace.
    assert [r[0] for r in next(iter(main.values()))] == expected_main(2, 2)
    assert sorted(b for r in workers.values() for b in batches_of(r)) == [0, 1]


def test_uninstrument_identity_and_keywords():
    code = r"""
import torch.utils.data.dataloader as dl, torch.utils.data._utils.worker as wk
import torch.utils.data._utils.fetch as fe
from torchvision import transforms as T, datasets as D
import lotus.torch
def snapshot():
    it = dl._MultiProcessingDataLoaderIter
    return [it.__dict__[k] for k in ("__init__", "_try_put_index", "_next_data", "_get_data",
            "_process_data")] + [wk._worker_loop, fe._MapDatasetFetcher.__dict__["fetch"],
            fe._MapDatasetFetcher.__init__, fe._IterableDatasetFetcher.__dict__["fetch"],
            T.Compose.__dict__["__call__"], T.Compose.__dict__["__init__"],
            D.DatasetFolder.__dict__["__getitem__"], D.DatasetFolder.__dict__["__init__"],
            D.ImageFolder.__dict__["__init__"]]
before = snapshot()
with lotus.torch.instrument():
    during = snapshot()
    assert lotus.torch.instrumented()
    T.Compose([], log_transform_elapsed_time=None)
assert not lotus.torch.instrumented()
after = snapshot()
assert all(a is b for a, b in zip(before, after)), "not restored"
assert all(a is not b for a, b in zip(before, during))
try:
    T.Compose([], log_transform_elapsed_time="x")
except TypeError:
    print("keyword gone")
lotus.torch.uninstrument()  # idempotent
"""
    r = run_python(code)
    assert r.stdout.strip() == "keyword gone"


def test_bad_arguments_are_python_exceptions():
    code = r"""
import lotus.torch
def err(f):
    try:
        f()
    except (TypeError, ValueError) as e:
        return type(e).__name__
    return "no error"
print(err(lambda: lotus.torch.instrument(log_file=3)))
print(err(lambda: lotus.torch.instrument(log_file="/tmp/x", ring_capacity=1)))
print(err(lambda: lotus.torch.instrument(log_file="/tmp/x", bogus=1)))
print(lotus.torch.instrumented())
"""
    r = run_python(code)
    assert r.stdout.split() == ["TypeError", "ValueError", "TypeError", "False"]


def test_lotus_keywords_set_the_prefix_once(tmp_path):
    code = f"""
import os, warnings
import lotus, lotus.torch
from torchvision import transforms as T
lotus.torch.instrument()
assert not lotus.tracing_enabled()
T.Compose([], log_transform_elapsed_time={str(tmp_path / 'a' / 'log')!r})
assert lotus.tracing_enabled()
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    T.Compose([], log_transform_elapsed_time={str(tmp_path / 'b' / 'log')!r})
print(lotus._last_options["log_file"], w[0].category.__name__, len(w))
"""
    prefix, category, count = run_python(code).stdout.split()
    assert (prefix, category, count) == (str(tmp_path / "a" / "log"), "RuntimeWarning", "1")


EXIT_WITH_WORKERS = """
import sys, torch
from torch.utils.data import DataLoader, Dataset
import lotus, lotus.torch
class D(Dataset):
    def __len__(self): return 16
    def __getitem__(self, i): return torch.tensor([float(i)])
if __name__ == "__main__":
    lotus.torch.instrument(log_file=sys.argv[1])
    # A module global and persistent workers: the workers are still alive at interpreter exit,
    # where multiprocessing's exit handler SIGTERMs them and torch's worker handler _exit()s.
    loader = DataLoader(D(), batch_size=2, num_workers=2, persistent_workers=True,
                        multiprocessing_context=sys.argv[2])
    consumed = sum(1 for _ in loader)
    print(consumed)
"""


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_workers_sigtermed_at_exit_keep_their_records(tmp_path, context):
    # A 60 s writer period: without the SIGTERM flush no worker record reached disk at all.
    script = tmp_path / "exit_with_workers.py"
    script.write_text(EXIT_WITH_WORKERS)
    trace = tmp_path / "trace"
    r = run_python([str(script), str(trace / "lotustrace_log"), context],
                   env={"LOTUS_FLUSH_INTERVAL_MS": "60000"}, timeout=300)
    assert r.stdout.strip() == "8"
    files = read_trace(trace)
    main = [rows for n, rows in files.items() if "_main_pid_" in n]
    workers = [rows for n, rows in files.items() if "_worker_pid_" in n]
    assert len(main) == 1 and len(workers) == 2, sorted(files)
    consumed = sorted(int(n.split("_")[1]) for n, _, _ in main[0]
                      if n.startswith("SBatchConsumed_"))
    preprocessed = sorted(int(n.split("_")[1]) for rows in workers for n, _, _ in rows
                          if n.startswith("SBatchPreprocessed_"))
    assert consumed == list(range(8))
    assert preprocessed == consumed  # every batch the main process consumed, on disk


# ---- torch 2.x: exact main-side records whatever the DataLoader's private methods do -----------

def _has_in_order():
    import inspect

    from torch.utils.data import DataLoader
    return "in_order" in inspect.signature(DataLoader.__init__).parameters


needs_in_order = pytest.mark.skipif(not _has_in_order(), reason="DataLoader(in_order=) needs torch 2.6+")


def expected_main_unordered(batches, workers, order="in", prefetch=2):
    """in_order=False: every batch is used when it arrives, with its real wait (no marker)."""
    q = min(prefetch * workers, batches)
    out = [f"SBatchQueued_{i}" for i in range(q)]
    arrivals = list(range(batches))
    if order == "swap01":
        arrivals[0], arrivals[1] = 1, 0
    for k, idx in enumerate(arrivals):
        queued = [f"SBatchQueued_{q + k}"] if q + k < batches else []
        out += queued + [f"SBatchWait_{idx}", f"SBatchConsumed_{idx}"]
    return out


def check_main_and_workers(info, files, batches, workers, epochs, order, in_order, persistent,
                           prefetch=2, batch_size=2):
    main, worker_files = split(files, info["pid"])
    rows = next(iter(main.values()))
    names = [r[0] for r in rows]
    if in_order:
        assert names == expected_main(batches, workers, order, prefetch) * epochs
    else:
        assert names == expected_main_unordered(batches, workers, order, prefetch) * epochs
    check_markers(rows)
    waits = {r[0]: r[2] for r in rows if r[0].startswith("SBatchWait_")}
    if order == "swap01":
        # In order: batch 1 arrived first and waited in torch's store (the 1 us marker); unordered:
        # it was used at once, so its wait is real (it spans batch 1's preprocessing).
        assert (waits["SBatchWait_1"] == 1000) == in_order
    assert len(worker_files) == (workers if persistent else workers * epochs)
    per_epoch = list(range(batches))
    preprocessed = sorted(b for r in worker_files.values() for b in batches_of(r))
    assert preprocessed == sorted(per_epoch * epochs)
    for name, r in worker_files.items():
        assert [x[0] for x in r] == expected_worker(batches_of(r), batch_size), name
        check_nesting(r)


@pytest.mark.parametrize("in_order", [True, pytest.param(False, marks=needs_in_order)])
@pytest.mark.parametrize("persistent", [False, True])
@pytest.mark.parametrize("order", ["in", "swap01"])
def test_fork_main_records_exact(tmp_path, order, persistent, in_order):
    cfg = dict(context="fork", workers=2, epochs=2, batches=6, order=order, persistent=persistent)
    if not in_order:
        cfg["in_order"] = False
    info, files = scenario(tmp_path, **cfg)
    assert info["samples"] == 2 * 12
    check_main_and_workers(info, files, 6, 2, 2, order, in_order, persistent)


# (spawn, not persistent, in order) is test_spawn_workers_out_of_order.
@pytest.mark.parametrize("context,persistent,in_order", [
    pytest.param("spawn", False, False, marks=needs_in_order),
    ("spawn", True, True),
    pytest.param("spawn", True, False, marks=needs_in_order),
    ("forkserver", False, True)])
def test_spawn_and_forkserver_main_records_exact(tmp_path, context, persistent, in_order):
    cfg = dict(context=context, workers=2, epochs=2, batches=4, order="swap01",
               persistent=persistent)
    if not in_order:
        cfg["in_order"] = False
    info, files = scenario(tmp_path, **cfg)
    check_main_and_workers(info, files, 4, 2, 2, "swap01", in_order, persistent)


def test_loader_options_exact(tmp_path):
    # prefetch_factor 3, pin_memory, drop_last (13 samples, batches of 2: 6 batches), a custom
    # collate_fn, dict samples.
    info, files = scenario(tmp_path, context="fork", workers=2, batches=6, samples=13,
                           drop_last=True, prefetch=3, pin_memory=True, collate="custom",
                           sample="dict")
    assert info["samples"] == 12
    check_main_and_workers(info, files, 6, 2, 1, "in", True, False, prefetch=3)


def test_batch_sampler_exact(tmp_path):
    info, files = scenario(tmp_path, context="fork", workers=2, batches=5, samples=9,
                           batch_sampler=True, order="swap01")
    assert info["samples"] == 9
    main, worker_files = split(files, info["pid"])
    assert [r[0] for r in next(iter(main.values()))] == expected_main(5, 2, "swap01")
    preprocessed = sorted(b for r in worker_files.values() for b in batches_of(r))
    assert preprocessed == [0, 1, 2, 3, 4]
    for r in worker_files.values():  # the last batch holds one sample
        got = [x[0] for x in r]
        want = []
        for k in batches_of(r):
            want += OPS * (1 if k == 4 else 2) + ["SCollation", f"SBatchPreprocessed_{k}"]
        assert got == want


@needs_in_order
def test_unordered_waits_are_the_loops_blocked_time(tmp_path):
    # Even batches take 60 ms, odd ones 4 ms: with in_order=False the odd batches overtake and are
    # used at once. The waits lotus records must add up to the time the loop spent blocked.
    info, files = scenario(tmp_path, context="fork", workers=2, batches=12, in_order=False,
                           sleep_ms=[30, 2], flags=None)
    main, _ = split(files, info["pid"])
    rows = next(iter(main.values()))
    waits = [r for r in rows if r[0].startswith("SBatchWait_")]
    consumed = [int(r[0].split("_")[1]) for r in rows if r[0].startswith("SBatchConsumed_")]
    assert sorted(consumed) == list(range(12))
    assert sorted(int(r[0].split("_")[1]) for r in waits) == list(range(12))
    assert consumed != sorted(consumed)  # the set-up did deliver out of order
    total = sum(r[2] for r in waits)
    assert abs(total - info["blocked_ns"]) <= 0.10 * info["blocked_ns"], (total, info["blocked_ns"])


def _has_v2():
    try:
        from torchvision.transforms import v2  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(not _has_v2(), reason="transforms.v2 needs torchvision 0.15+")
def test_transforms_v2_compose_nested_and_plain_callables(tmp_path):
    info, files = scenario(tmp_path, context="fork", workers=2, batches=4, compose="v2")
    assert info["samples"] == 8
    # The nested Compose writes its lines when it returns, before its parent's (as the classic one).
    per_sample = ["SDouble", "Sadd_one", "SAddOne", "SCompose", "SLambda"]
    _, worker_files = split(files, info["pid"])
    for r in worker_files.values():
        assert [x[0] for x in r] == expected_worker(batches_of(r), 2, per_sample)
        check_nesting(r)


def test_classic_compose_and_folder_records_names_order_and_errors(tmp_path):
    """The classic Compose and DatasetFolder spans (timed in C, _lotus._compose and
    _folder_sample): each step's name as lotus.loaders.torchvision.step_name gives it (class,
    function, lambda, builtin, partials of each), a nested Compose's lines before its parent's,
    nothing for a call whose step (or loader) raises, and the next call recorded again."""
    code = f"""
import functools, os, lotus, lotus.torch
lotus.torch.instrument(log_file={str(tmp_path / 't' / 'log')!r})
from torchvision import datasets, transforms as T
from lotus.loaders.torchvision import step_name

class AddOne:
    def __call__(self, x):
        return x + 1

def double(x):
    return x * 2

def fail_on_7(x, limit=7):
    if x == limit:
        raise ValueError("planted")
    return x

steps = [AddOne(), double, lambda x: x - 1, abs, functools.partial(fail_on_7, limit=7),
         functools.partial(functools.partial(AddOne())), T.Compose([double, AddOne()])]
c = T.Compose(steps)
print([step_name(s) for s in steps])
print(c(1))          # (((1 + 1) * 2) - 1) = 3, abs, +1 = 4, inner: 8, 9
try:
    c(3)             # (3 + 1) * 2 - 1 = 7: fail_on_7 raises
except ValueError as e:
    print("raised", e)
print(c(2))          # 5, 6, 12, 13

root = {str(tmp_path / 'folder')!r}
os.makedirs(os.path.join(root, "a"))
for i in range(2):
    open(os.path.join(root, "a", f"{{i}}.txt"), "w").write(str(i))
def load(path):
    v = int(open(path).read())
    if v == 1:
        raise OSError("planted loader failure")
    return v
ds = datasets.DatasetFolder(root, load, extensions=(".txt",), transform=T.Compose([AddOne()]))
print(ds[0])
try:
    ds[1]
except OSError as e:
    print("raised", e)
bare = datasets.DatasetFolder(root, load, extensions=(".txt",))
print(bare[0])
print(T.Compose([AddOne()] * 20)(0))  # past the 16 spans kept on the stack
lotus.flush()
"""
    out = run_python(code).stdout.splitlines()
    assert out[0] == str(["AddOne", "double", "<lambda>", "abs", "fail_on_7", "AddOne",
                          "Compose"])
    assert out[1:] == ["9", "raised planted", "13", "(1, 0)", "raised planted loader failure",
                       "(0, 0)", "20"]
    (rows,) = read_trace(tmp_path / "t").values()
    call = ["SAddOne", "Sdouble", "S<lambda>", "Sabs", "Sfail_on_7", "SAddOne"]
    inner = ["Sdouble", "SAddOne"]
    assert [r[0] for r in rows] == (
        inner + call + ["SCompose"]            # c(1)
        + inner + call + ["SCompose"]          # c(2): c(3) raised, nothing recorded
        + ["SAddOne", "SLoader", "STransform"]  # ds[0]: its Compose's line first
        + ["SLoader", "STransform"]             # bare[0]: STransform without a transform
        + ["SAddOne"] * 20)
    for name, start, dur in rows:
        assert start > 0 and dur >= 0, (name, start, dur)


def test_iterable_dataset_main_side(tmp_path):
    # Each of 2 workers streams its half (6 samples: 3 batches); indices go to workers round-robin
    # and a worker's end arrives as a stop marker, so which index each batch gets depends on timing:
    # every consumed batch was preprocessed, once, with one wait record or marker.
    info, files = scenario(tmp_path, dataset="iterable", workers=2, batches=6, flags=None)
    assert info["samples"] == 12
    main, worker_files = split(files, info["pid"])
    rows = next(iter(main.values()))
    consumed = sorted(int(r[0].split("_")[1]) for r in rows if r[0].startswith("SBatchConsumed_"))
    waited = sorted(int(r[0].split("_")[1]) for r in rows if r[0].startswith("SBatchWait_"))
    preprocessed = sorted(b for r in worker_files.values() for b in batches_of(r))
    assert len(consumed) == 6 and consumed == preprocessed == waited
    queued = [int(r[0].split("_")[1]) for r in rows if r[0].startswith("SBatchQueued_")]
    assert queued == list(range(len(queued))) and set(consumed) <= set(queued)
    for r in worker_files.values():
        assert [x[0] for x in r] == expected_worker(batches_of(r), 2, collation=False)


CHANGED_TORCH = r"""
import sys, warnings
import torch
from torch.utils.data import DataLoader, Dataset
from torch.utils.data import dataloader as dl
import lotus, lotus.torch
it = dl._MultiProcessingDataLoaderIter
orig = it._process_data
def _process_data(self, batch, *rest):  # a torch whose private method changed shape
    return orig(self, batch, *rest)
it._process_data = _process_data
class D(Dataset):
    def __len__(self): return 8
    def __getitem__(self, i): return torch.tensor([float(i)])
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    lotus.torch.instrument(log_file=sys.argv[1])
    lotus.torch.instrument(log_file=sys.argv[1])  # warned once per process
print(sum(len(b) for b in DataLoader(D(), batch_size=2, num_workers=2)))
lotus.torch.uninstrument()
assert it._process_data is _process_data
for x in w:
    print(x.category.__name__, x.message)
"""


def test_changed_private_api_is_named_not_mis_recorded(tmp_path):
    script = tmp_path / "changed.py"
    script.write_text(CHANGED_TORCH)
    trace = tmp_path / "trace"
    r = run_python([str(script), str(trace / "lotustrace_log")])
    lines = r.stdout.strip().splitlines()
    assert lines[0] == "8"
    assert len(lines) == 2, lines
    import torch
    assert lines[1].startswith("RuntimeWarning lotus.torch does not support this version "
                               f"(torch {torch.__version__}")
    assert "_process_data: parameters (self, batch, *rest)" in lines[1]
    assert "main-process records" in lines[1]
    files = read_trace(trace)
    assert not [n for n in files if "_main_pid_" in n]  # no main file rather than a wrong one
    assert sorted(b for n, r in files.items() for b in batches_of(r)) == [0, 1, 2, 3]


INTERNED = r"""
import sys, time, warnings
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info
import lotus, lotus.torch
class Ints(IterableDataset):
    # Every batch is a small int (batch_size=None): interned, so batches share one identity.
    # Worker 0 is slow, so worker 1's batches arrive early and are stored out of order.
    def __iter__(self):
        w = get_worker_info().id
        for i in range(6):
            if w == 0:
                time.sleep(0.05)
            yield i % 2
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    lotus.torch.instrument(log_file=sys.argv[1])
    for epoch in range(2):
        print(len(list(DataLoader(Ints(), batch_size=None, num_workers=2))))
    lotus.torch.uninstrument()
for x in caught:
    # (Python 3.12+ warns that fork() from a threaded process may deadlock: not lotus's.)
    if not (x.category is DeprecationWarning and "fork()" in str(x.message)):
        print(x.category.__name__, x.message)
"""


def test_interned_batches_each_get_their_records(tmp_path):
    """Issue #53 (item 12): batches that are one interned object (small ints, batch_size=None over
    an IterableDataset) are matched to their arrivals by index, never by identity alone."""
    script = tmp_path / "interned.py"
    script.write_text(INTERNED)
    trace = tmp_path / "trace"
    r = run_python([str(script), str(trace / "lotustrace_log")])
    assert r.stdout.strip().splitlines() == ["12", "12"], r.stdout + r.stderr
    files = read_trace(trace)
    (main,) = [rows for n, rows in files.items() if "_main_pid_" in n]
    names = [row[0] for row in main]
    preprocessed = sorted(b for n, rows in files.items() if "_worker_pid_" in n
                          for b in batches_of(rows))
    assert preprocessed == sorted(list(range(12)) * 2)
    for kind in ("SBatchConsumed", "SBatchWait"):
        got = sorted(int(n.split("_")[1]) for n in names if n.startswith(kind + "_"))
        assert got == preprocessed, (kind, names)


SCRIPTED = r"""
import json, sys
import torch
import torchvision.transforms as T
if sys.argv[1] == "on":
    import lotus.torch
    lotus.torch.instrument(log_file=sys.argv[2])
out = []
for steps in ([lambda x: x], [T.CenterCrop(10), T.Normalize((0.5,), (0.5,))]):
    try:
        torch.jit.script(T.Compose(steps))
        out.append(["ok"])
    except Exception as e:
        out.append([type(e).__name__, str(e)])
# The transforms themselves, scripted as torchvision's test_compose does, and the Compose run.
seq = torch.jit.script(torch.nn.Sequential(T.CenterCrop(10), T.Normalize((0.5,), (0.5,))))
x = torch.rand(1, 26, 34)
c = T.Compose([T.CenterCrop(10), T.Normalize((0.5,), (0.5,))])
out.append(bool(torch.equal(seq(x), c(x))))
print(json.dumps(out))
"""


def test_jit_script_of_compose_is_unchanged(tmp_path):
    """Issue #53 (item 13): torch.jit.script(transforms.Compose([...])) behaves as without lotus
    (torchvision's test_compose): the same outcome, error type and message."""
    script = tmp_path / "scripted.py"
    script.write_text(SCRIPTED)
    trace = tmp_path / "trace"
    plain = json.loads(run_python([str(script), "off", "-"]).stdout.strip().splitlines()[-1])
    on = json.loads(run_python([str(script), "on", str(trace / "lotustrace_log")])
                    .stdout.strip().splitlines()[-1])
    assert on == plain
    assert plain[-1] is True
    # Instrumented, the Compose still records its steps.
    files = read_trace(trace)
    names = [r[0] for rows in files.values() for r in rows]
    assert names.count("SCenterCrop") == 1 and names.count("SNormalize") == 1, names


@pytest.mark.skipif(not os.environ.get("LOTUS_TOOL"), reason="needs lotus-tool (LOTUS_TOOL)")
def test_report_gives_the_input_bound_verdict_on_a_traced_run(tmp_path):
    """The planted truth: every sample sleeps 15 ms in the workers and the loop does nothing, so
    the loop waits for most of its time. On every torch the main-process records must carry that
    to `lotus-tool report --json`'s first finding (no records, no verdict)."""
    info, files = scenario(tmp_path, workers=2, batches=8, epochs=2, sleep_ms=[15])
    assert info["samples"] == 32
    r = subprocess.run([os.environ["LOTUS_TOOL"], "report", "--json", str(tmp_path / "trace")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    first = json.loads(r.stdout)["findings"][0]
    assert first["kind"] == "input_bound", first
    assert first["numbers"]["waits"] == 16 and first["numbers"]["wait_share"] > 0.3, first


@pytest.mark.skipif(not os.environ.get("LOTUS_TOOL"), reason="needs lotus-tool (LOTUS_TOOL)")
def test_no_in_order_advice_for_a_torch_without_it(tmp_path):
    """The sidecar says `loader torch <torch.__version__>`; batch 1 is forced to arrive before
    batch 0 (an out-of-order arrival each epoch), so the model predicts in_order=False: report and
    tune name it only on a torch that has the argument (2.6+), never on an older one (1.13)."""
    import torch
    info, files = scenario(tmp_path, workers=2, batches=6, epochs=2, order="swap01")
    trace = tmp_path / "trace"
    lines = [ln for p in trace.glob(".lotustrace_log.lotus-meta_*")
             for ln in p.read_text().splitlines() if ln.startswith("loader ")]
    assert lines and all(ln == f"loader torch {torch.__version__}" for ln in lines), lines
    major, minor = (int(x) for x in torch.__version__.split(".")[:2])
    has_in_order = (major, minor) >= (2, 6)
    tool = os.environ["LOTUS_TOOL"]
    r = subprocess.run([tool, "report", "--json", str(trace)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    findings = {f["kind"]: f for f in json.loads(r.stdout)["findings"]}
    assert findings["out_of_order"]["numbers"]["count"] >= 2, findings["out_of_order"]
    said = json.dumps(list(findings.values()))
    assert ("in_order" in said) == has_in_order, said
    r = subprocess.run([tool, "tune", "--json", str(trace)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    t = json.loads(r.stdout)
    assert t["torch_version"] == torch.__version__ and t["in_order_false_searched"] == has_in_order
    assert any(not c["in_order"] for c in t["candidates"]) == has_in_order, t["candidates"]
    r = subprocess.run([tool, "tune", str(trace)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    if not has_in_order:
        assert (f"in order only: torch {torch.__version__} has no in_order, added in PyTorch 2.6"
                in r.stdout), r.stdout


def test_instrument_imports_torchvision_only_when_the_program_does(tmp_path):
    """issue #71: instrument() does not import torchvision into a program that never imports it (nor
    into its workers); a program that imports it after instrument() gets its Compose steps and
    ImageFolder samples traced all the same."""
    without = tmp_path / "without" / "lotustrace_log"
    r = run_python(f"""
import sys, torch.utils.data as tud, lotus.torch
lotus.torch.instrument(log_file={str(without)!r})
def seen(_):
    assert 'torchvision' not in sys.modules, 'a worker imported torchvision'
for _ in tud.DataLoader(list(range(8)), batch_size=2, num_workers=2, worker_init_fn=seen): pass
lotus.torch.uninstrument()
print('torchvision' in sys.modules)
""")
    assert r.stdout.split() == ["False"], r.stdout + r.stderr
    files = read_trace(without.parent)
    assert sum(n.startswith("SBatchPreprocessed_") for rows in files.values()
               for n, _, _ in rows) == 4, files
    later = tmp_path / "later" / "lotustrace_log"
    r = run_python(f"""
import sys, torch, torch.utils.data as tud, lotus.torch
lotus.torch.instrument(log_file={str(later)!r})
assert 'torchvision' not in sys.modules
from torchvision import transforms
class AddOne:
    def __call__(self, x): return x + 1
class Data(tud.Dataset):
    def __init__(self): self.t = transforms.Compose([AddOne()])
    def __len__(self): return 4
    def __getitem__(self, i): return self.t(torch.tensor([float(i)]))
for _ in tud.DataLoader(Data(), batch_size=2, num_workers=2): pass
print(type(transforms.Compose.__dict__['__call__']).__module__)
""")
    assert r.stdout.split() == ["lotus.loaders._patch"], r.stdout + r.stderr
    ops = [n for rows in read_trace(later.parent).values() for n, _, _ in rows]
    assert ops.count("SAddOne") == 4, ops


def test_check_fails_in_one_line_when_torch_does_not_import(tmp_path):
    """issue #71: `python -m lotus.torch --check` where torch is not installed (site-packages off:
    -S) or does not import (a torch whose import raises, as a broken install's missing library
    does) exits 1 with one line saying why, never 0 having checked nothing, never a traceback."""
    broken = tmp_path / "broken" / "torch"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text(
        'raise OSError("libtorch_cpu.so: cannot open shared object file")\n')
    pythonpath = os.environ.get("PYTHONPATH", "")
    cases = [(["-S"], {}, "torch is not installed in "),
             ([], {"PYTHONPATH": f"{broken.parent}{os.pathsep}{pythonpath}"},
              "torch fails to import (OSError: libtorch_cpu.so: cannot open shared object file)")]
    for flags, env, why in cases:
        r = run_python([*flags, "-m", "lotus.torch", "--check"], env=env, check=False)
        assert r.returncode == 1, (flags, r.returncode, r.stdout, r.stderr)
        assert r.stdout == "", r.stdout
        lines = r.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("lotus.torch --check: " + why), r.stderr
        assert lines[0].endswith("; nothing was checked"), r.stderr
        assert "Traceback" not in r.stderr


def test_a_step_whose_name_cannot_be_taken_runs_under_a_placeholder(tmp_path):
    """A Compose step whose name lotus cannot take (a function named with a lone surrogate, as a
    file name that is not UTF-8 decodes; a functools.partial subclass whose `func` raises) runs
    as without lotus and is recorded as S<UNNAMED_STEP>, in the C path (classic Compose) and the
    Python one (run_steps, transforms.v2's); a KeyboardInterrupt from a name is not swallowed, and
    a step's own exception has no frame of lotus in its traceback."""
    code = f"""
import functools, os, lotus, lotus.torch
lotus.torch.instrument(log_file={str(tmp_path / 't' / 'log')!r})
from torchvision import transforms as T
from lotus.loaders import torchvision as tv

def add_one(x):
    return x + 1
add_one.__name__ = os.fsdecode(b"step_\\xff")  # 'step_\\udcff'

class Broken(functools.partial):
    @property
    def func(self):
        raise AttributeError("no func here")

class Interrupting(functools.partial):
    @property
    def func(self):
        raise KeyboardInterrupt

def double(x):
    return x * 2

steps = [add_one, Broken(double), double]
print([tv.step_name(s) for s in steps])
print(T.Compose(steps)(1))                                   # C path: (1 + 1) * 2 * 2 = 8
print(tv.run_steps(steps, lambda step, x: step(x), 2))       # Python path: 12
for run in (T.Compose([Interrupting(double)]), lambda x: tv.run_steps([Interrupting(double)],
                                                                       lambda s, v: s(v), x)):
    try:
        run(1)
    except KeyboardInterrupt:
        print("interrupted")
try:
    from torchvision.transforms import v2
except ImportError:
    print(16)
    composes = [T.Compose]
else:
    print(v2.Compose(steps)(3))                              # 16
    composes = [T.Compose, v2.Compose]
def planted(x):
    raise ValueError("planted step failure")
import traceback
for cls in composes:  # a step's own exception: no frame of lotus in its traceback
    try:
        cls([Broken(double), planted])(1)
    except ValueError as e:
        files = [f.filename for f in traceback.extract_tb(e.__traceback__)]
        print(os.path.join("lotus", "loaders") not in " ".join(files), files[-1] == "<string>")
lotus.flush()
"""
    out = run_python(code).stdout.splitlines()
    assert out[:6] == [str(["lotus_unnamed_step", "lotus_unnamed_step", "double"]), "8", "12",
                       "interrupted", "interrupted", "16"], out
    assert out[6:] in (["True True"], ["True True"] * 2), out  # classic, and v2 where it is
    (rows,) = read_trace(tmp_path / "t").values()
    names = [r[0] for r in rows]
    one_call = ["Slotus_unnamed_step", "Slotus_unnamed_step", "Sdouble"]
    assert names[:6] == one_call * 2, names
    assert names[6:] in ([], one_call), names  # transforms.v2 where torchvision has it


INIT_JOB = """
import gc, json, sys, torch
from torch.utils.data import DataLoader
from initfns import Seq, failing_init, slow_init
if sys.argv[1] != "-":
    import lotus, lotus.torch
    lotus.torch.instrument(log_file=sys.argv[1])
kw = dict(batch_size=2, num_workers=2, multiprocessing_context=sys.argv[2])
failed = iter(DataLoader(Seq(), worker_init_fn=failing_init, **kw))
try:
    next(failed)
except ValueError as e:
    message = str(e)
# The failed iterator is in a reference cycle (torch's reraise frame holds its exception): shut
# its workers down now, by torch's own shutdown while its queues are whole. Left to a later
# collection, during the next loader's run, a spawn worker of it still starting finds its
# semaphores gone and exits 1, and torch's SIGCHLD handler, which still lists it, fails the next
# loader (seen once under load on Python 3.14, without lotus); left to gc.collect() here, the
# cycle's queues may be finalized first and each worker's join waits out its 5 s timeout (10-20 s
# a run, untraced as traced).
failed._shutdown_workers()
del failed
gc.collect()
print(sum(int(b.sum()) for b in DataLoader(Seq(), worker_init_fn=slow_init, **kw)))
print(json.dumps(message))
"""


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_a_worker_init_fn_error_has_no_lotus_frame(tmp_path, context):
    """An exception of worker_init_fn reaches the main process as torch's "Caught ... Original
    Traceback" message: under lotus it is the message without lotus, word for word (no frame of
    lotus's timing of the call), and a worker_init_fn that returns is still timed (startup_boot's
    init figures)."""
    (tmp_path / "initfns.py").write_text(
        "import time\n"
        "from torch.utils.data import Dataset\n"
        "class Seq(Dataset):\n"
        "    def __len__(self): return 4\n"
        "    def __getitem__(self, i): return i\n"
        "def failing_init(worker_id):\n"
        "    raise ValueError(f'planted init failure {worker_id}')\n"
        "def slow_init(worker_id):\n"
        "    time.sleep(0.01)\n")
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    trace = tmp_path / "trace"
    plain_run = run_python(["-c", INIT_JOB, "-", context], env=env)
    traced_run = run_python(["-c", INIT_JOB, str(trace / "log"), context], env=env)
    said = f"untraced:\n{plain_run.stderr}\ntraced:\n{traced_run.stderr}"
    plain, traced = plain_run.stdout.splitlines(), traced_run.stdout.splitlines()
    assert plain[0] == traced[0] == "6", said
    message = json.loads(traced[1])
    assert "Original Traceback" in message and "planted init failure" in message, message
    assert os.path.join("lotus", "loaders") not in message, message  # no frame of lotus's
    assert message == json.loads(plain[1]), said
    boots = [line.split() for p in trace.glob(".log.lotus-meta_*")
             for line in p.read_text().splitlines() if line.startswith("startup_boot ")]
    timed = [b for b in boots if int(b[6]) > 0]  # init_ns, init_dur_ns: the slow_init runs
    assert timed and all(int(b[7]) > 0 for b in timed), (boots, said)


IDLE_WORKERS_JOB = """
import sys, torch
from torch.utils.data import DataLoader
import lotus, lotus.torch
lotus.torch.instrument(log_file=sys.argv[1])
loader = DataLoader(list(range(4)), batch_size=2, num_workers=4,
                    multiprocessing_context=sys.argv[2])
print(sum(int(b.sum()) for b in loader))
"""


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_a_worker_that_never_gets_a_batch_still_writes_its_start(tmp_path, context):
    """4 workers, 2 batches: the 2 workers that never get an index record nothing, yet each has
    its sidecar with its startup_boot line (its start-up is in stats and whatif)."""
    trace = tmp_path / "trace"
    out = run_python(["-c", IDLE_WORKERS_JOB, str(trace / "log"), context]).stdout.split()
    assert out == ["6"]
    boots = {}
    for p in trace.glob(".log.lotus-meta_*"):
        for line in p.read_text().splitlines():
            if line.startswith("startup_boot "):
                boots.setdefault(p.name.rsplit("_", 1)[1], []).append(line.split()[1:])
    workers = [line.split() for p in trace.glob(".log.lotus-meta_*")
               for line in p.read_text().splitlines() if line.startswith("startup_worker ")]
    assert len(workers) == 4, workers
    assert sorted(boots) == sorted(w[3] for w in workers), (boots, workers)  # every worker's pid
    assert sorted(int(b[0][1]) for b in boots.values()) == [0, 1, 2, 3]  # slots
    working = {f.name.rsplit("_", 1)[1] for f in trace.glob("log_worker_pid_*")}
    assert len(working) == 2 and working < set(boots), (working, boots)
