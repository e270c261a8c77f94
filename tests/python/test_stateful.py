# SPDX-License-Identifier: MIT
"""torchdata's StatefulDataLoader traced by lotus.torch: the DataLoader's exact record set, and
records that continue the epoch across state_dict()/load_state_dict() in a restarted process."""
import json

import pytest

from conftest import read_trace, run_python
from test_torch import batches_of, check_main_and_workers, needs_in_order, scenario, split

stateful = pytest.importorskip("torchdata.stateful_dataloader",
                               reason="torchdata's StatefulDataLoader is not installed")


@pytest.mark.parametrize("in_order", [True, pytest.param(False, marks=needs_in_order)])
@pytest.mark.parametrize("persistent", [False, True])
@pytest.mark.parametrize("order", ["in", "swap01"])
def test_stateful_main_records_exact(tmp_path, order, persistent, in_order):
    cfg = dict(context="fork", workers=2, epochs=2, batches=6, order=order, persistent=persistent,
               loader="stateful")
    if not in_order:
        cfg["in_order"] = False
    info, files = scenario(tmp_path, **cfg)
    assert info["samples"] == 2 * 12
    check_main_and_workers(info, files, 6, 2, 2, order, in_order, persistent)


def test_stateful_spawn_workers(tmp_path):
    info, files = scenario(tmp_path, context="spawn", workers=2, epochs=1, batches=4,
                           order="swap01", loader="stateful")
    check_main_and_workers(info, files, 4, 2, 1, "swap01", True, False)


def test_stateful_and_dataloader_same_counts(tmp_path):
    """Same seed, same data: the same records, name for name, from both loaders."""
    counts = []
    for loader in ("torch", "stateful"):
        d = tmp_path / loader
        d.mkdir()
        info, files = scenario(d, context="fork", workers=2, epochs=2, batches=5, loader=loader,
                               order="swap01")
        main, workers = split(files, info["pid"])
        names = sorted(r[0] for rows in files.values() for r in rows)
        counts.append(names)
    assert counts[0] == counts[1]


RESUME = r"""
import json, os, pickle, sys
import torch
from torch.utils.data import Dataset
from torchdata.stateful_dataloader import StatefulDataLoader
import lotus, lotus.torch

class Samples(Dataset):
    def __len__(self): return 16
    def __getitem__(self, i): return torch.tensor([i])

prefix, state_file, phase, interval, take = sys.argv[1:6]
lotus.torch.instrument(log_file=prefix)
loader = StatefulDataLoader(Samples(), batch_size=2, num_workers=2,
                            snapshot_every_n_steps=int(interval))
got = []
if phase == "first":
    it = iter(loader)
    for _ in range(int(take)):
        got.append(next(it).flatten().tolist())
    with open(state_file, "wb") as f:
        pickle.dump(loader.state_dict(), f)
    del it
else:
    with open(state_file, "rb") as f:
        loader.load_state_dict(pickle.load(f))
    got = [b.flatten().tolist() for b in loader]
lotus.flush()
print(json.dumps({"pid": os.getpid(), "batches": got}))
"""


@pytest.mark.parametrize("interval,take", [(1, 3), (3, 4)])
def test_resume_mid_epoch_continues_the_epochs_indices(tmp_path, interval, take):
    """A job checkpoints after `take` batches, restarts and resumes: every batch the resumed
    loader yields has its wait and consumed records under its index in the epoch, the same index
    its worker's SBatchPreprocessed carries; batches torchdata replays to reach a position between
    snapshots (interval 3) are loaded again but never reported as consumed."""
    script = tmp_path / "resume.py"
    script.write_text(RESUME)
    state = tmp_path / "state.pkl"
    runs = {}
    for phase in ("first", "resumed"):
        trace = tmp_path / phase
        r = run_python([str(script), str(trace / "lotustrace_log"), str(state), phase,
                        str(interval), str(take)], timeout=300)
        runs[phase] = (json.loads(r.stdout.strip().splitlines()[-1]), read_trace(trace))
    first, resumed = runs["first"][0], runs["resumed"][0]
    # torchdata's own resume: the batches after the first `take`, in the epoch's order.
    assert first["batches"] == [[2 * k, 2 * k + 1] for k in range(take)]
    assert resumed["batches"] == [[2 * k, 2 * k + 1] for k in range(take, 8)]

    main, workers = split(runs["resumed"][1], resumed["pid"])
    rows = next(iter(main.values()))
    names = [r[0] for r in rows]
    consumed = [int(n.split("_")[1]) for n in names if n.startswith("SBatchConsumed_")]
    assert consumed == list(range(take, 8))
    for k in consumed:  # its wait (or out-of-order marker) comes before it
        assert names.index(f"SBatchWait_{k}") < names.index(f"SBatchConsumed_{k}")
    queued = [int(n.split("_")[1]) for n in names if n.startswith("SBatchQueued_")]
    snapshot = take - take % interval  # where torchdata restarts: the last snapshot
    assert queued == list(range(snapshot, 8))
    preprocessed = sorted(b for r in workers.values() for b in batches_of(r))
    assert preprocessed == list(range(snapshot, 8))  # replayed ones too, under their index

    main1, _ = split(runs["first"][1], first["pid"])
    names1 = [r[0] for r in next(iter(main1.values()))]
    assert [n for n in names1 if n.startswith("SBatchConsumed_")] == [
        f"SBatchConsumed_{k}" for k in range(take)]


def test_a_resumed_loader_beside_a_fresh_one_numbers_its_own_batches(tmp_path):
    """A StatefulDataLoader resumed after 5 of 8 batches and a fresh one, iter() at the same
    moment on two threads (iterators_scenario.py): each worker numbers its batches from its own
    iterator's offset (the resumed one's workers 5 to 7, the fresh one's 0 to 7), so every
    SBatchConsumed has its SBatchPreprocessed and check passes."""
    import os
    import pathlib
    import subprocess
    tool = os.environ.get("LOTUS_TOOL")
    if not tool:
        pytest.skip("LOTUS_TOOL not set")
    here = pathlib.Path(__file__).resolve().parent
    out = tmp_path / "t"
    cfg = {"method": "fork", "loaders": [
        {"stateful": True, "workers": 2, "batches": 8, "resume_after": 5},
        {"stateful": True, "workers": 2, "batches": 8}]}
    r = run_python([str(here / "iterators_scenario.py"), str(out), json.dumps(cfg)], timeout=300)
    job = json.loads(r.stdout.strip().splitlines()[-1])
    assert [g["firsts"] for g in job["loaders"]] == [[10, 12, 14], [0, 2, 4, 6, 8, 10, 12, 14]]
    # Each iterator's workers (its startup_worker lines) and the batches they prepared.
    by_seq = {}
    for p in out.glob(".lotustrace_log.lotus-meta_*"):
        for line in p.read_text().splitlines():
            if line.startswith("startup_worker "):
                f = line.split()
                by_seq.setdefault(int(f[1]), []).append(int(f[3]))
    files = read_trace(out)
    prepared = []
    for seq in sorted(by_seq)[1:]:  # the first: the run of 5 batches before the resume
        prepared.append(sorted(b for pid in by_seq[seq]
                               for b in batches_of(files.get(f"lotustrace_log_worker_pid_{pid}",
                                                             []))))
    assert sorted(prepared) == [[0, 1, 2, 3, 4, 5, 6, 7], [5, 6, 7]], prepared
    c = subprocess.run([tool, "check", str(out)], capture_output=True, text=True, timeout=120)
    assert c.returncode == 0, c.stdout + c.stderr
