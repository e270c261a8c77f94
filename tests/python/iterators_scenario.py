# SPDX-License-Identifier: MIT
"""DataLoader iterators started together on threads (tests/python/test_startup.py, test_stateful.py).

    python3 iterators_scenario.py OUT_DIR '<json>'

json keys: method (fork|spawn|forkserver), loaders: [{workers, batches, init_s, hang_batch,
hang_s, stateful, resume_after, offset}], each loader's iter() run at the same moment on a thread of
its own (a barrier), each loop to its epoch's end. A loader's dataset sleeps hang_s in the first item
of batch hang_batch; its worker_init_fn sleeps init_s. A stateful loader (torchdata's
StatefulDataLoader) with resume_after K is first run for K batches on the main thread and
resumed from its state_dict() in a new loader: the resumed one is the loader started on the
thread. A torch DataLoader with `offset` K numbers its batches from K as a resumed loader does:
lotus's iterator wrapper (dataloader.main_side, as stateful.py builds it for torchdata's) is given
a resume offset, K for the iterator its thread starts. Prints one JSON line: the main pid and per loader the batches its thread got (the first
sample of each) and its iter()'s time (time.time_ns()).
"""

import json
import multiprocessing
import os
import sys
import threading
import time

import torch
from torch.utils.data import Dataset

import lotus.torch

BATCH_SIZE = 2


class Items(Dataset):
    def __init__(self, n, log_file, hang_item=-1, hang_s=0.0):
        self.n = n
        self.log_file = log_file
        self.hang_item = hang_item
        self.hang_s = hang_s

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.hang_item:
            time.sleep(self.hang_s)
        return torch.tensor([i])


class SlowInit:
    def __init__(self, seconds):
        self.seconds = seconds

    def __call__(self, worker_id):
        time.sleep(self.seconds)


def make(spec, log, ctx):
    batches = spec.get("batches", 6)
    hang = spec["hang_batch"] * BATCH_SIZE if spec.get("hang_s") else -1
    ds = Items(batches * BATCH_SIZE, log, hang, spec.get("hang_s", 0.0))
    kw = dict(batch_size=BATCH_SIZE, num_workers=spec.get("workers", 2),
              multiprocessing_context=ctx,
              worker_init_fn=SlowInit(spec["init_s"]) if spec.get("init_s") else None)
    if spec.get("stateful"):
        from torchdata.stateful_dataloader import StatefulDataLoader
        return StatefulDataLoader(ds, **kw)
    return torch.utils.data.DataLoader(ds, **kw)


_offsets = threading.local()


def offset_from_thread():
    """torch's DataLoader iterators resumed at the offset their thread gives (main_side's
    resume_offset, which stateful.py reads from a StatefulDataLoader's state)."""
    from lotus.loaders import dataloader as lotus_dl
    from torch.utils.data import dataloader
    init = lotus_dl.main_side("_MultiProcessingDataLoaderIter",
                              resume_offset=lambda args, kwargs: getattr(_offsets, "k", 0))[0]
    dataloader._MultiProcessingDataLoaderIter.__init__ = init


def import_what_forked_workers_import():
    """A fork() while another thread imports a module leaves that module's import lock held in
    the child for ever (CPython's, with or without lotus): a thread receiving its first batch
    imports hmac (multiprocessing's connection answers the fd sharer's challenge) while another
    forks its workers, and each worker's numpy.random (imported lazily by NumPy 2, seeded by
    torch's worker loop) imports secrets, then hmac, and waits. A program that forks workers
    from threads imports them first, as here."""
    import hmac  # noqa: F401
    import secrets  # noqa: F401
    try:
        import numpy.random  # noqa: F401
    except ImportError:
        pass


def main():
    out = sys.argv[1]
    cfg = json.loads(sys.argv[2])
    os.makedirs(out, exist_ok=True)
    log = os.path.join(out, "lotustrace_log")
    lotus.torch.instrument(log_file=log)
    if any("offset" in spec for spec in cfg["loaders"]):
        offset_from_thread()
    ctx = multiprocessing.get_context(cfg["method"])
    loaders = []
    for spec in cfg["loaders"]:
        loader = make(spec, log, ctx)
        if spec.get("resume_after"):  # K batches first, then a new loader resumed from there
            it = iter(loader)
            for _ in range(spec["resume_after"]):
                next(it)
            state = loader.state_dict()
            del it
            loader = make(spec, log, ctx)
            loader.load_state_dict(state)
        loaders.append(loader)
    if cfg["method"] == "fork":
        import_what_forked_workers_import()
    barrier = threading.Barrier(len(loaders))
    got = [None] * len(loaders)

    def run(k):
        _offsets.k = cfg["loaders"][k].get("offset", 0)
        barrier.wait()
        t0 = time.time_ns()
        it = iter(loaders[k])
        firsts = [int(b.flatten()[0]) for b in it]
        got[k] = {"t0_ns": t0, "firsts": firsts}

    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(loaders))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lotus.flush()
    print(json.dumps({"pid": os.getpid(), "loaders": got}))


if __name__ == "__main__":
    main()
