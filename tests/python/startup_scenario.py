# SPDX-License-Identifier: MIT
"""A DataLoader job with planted start-up costs (tests/python/test_startup.py, bench/startup).

    python3 startup_scenario.py OUT_DIR --method spawn --workers 4 --paths 400000 \
        [--init-s 1.0 [--init-epoch K]] [--persistent] [--epochs 2] [--batches 12]
        [--hang-epoch K[,K...] --hang-s 6] [--no-lotus] [--stateful] [--preload]

The dataset holds `--paths` file paths as a Python list (as ImageFolder holds ImageNet): spawn and
forkserver pickle it once per worker. Items are cheap (a small tensor). It prints one JSON line:
the pickle size `pickle.dumps` gives, and per epoch its start (t0_ns: iter(loader)), the time to
first batch and the epoch's wall time (time.time_ns(), from iter(loader)). `--init-epoch K`: the
worker_init_fn sleeps in epoch K only; `--hang-epoch`: batch 0 of each epoch listed hangs.
"""

import argparse
import json
import os
import pickle
import sys
import time


class PathsDataset:
    def __init__(self, n, item_ms, hang_epoch=(), hang_s=0.0, log_file=None, flag_file=None):
        # Distinct strings (as real paths are): ~50 bytes each pickled.
        self.paths = [f"/data/imagenet/train/n{i % 1000:08d}/img_{i:09d}.JPEG" for i in range(n)]
        self.item_ms = item_ms
        self.hang_epoch = hang_epoch
        self.hang_s = hang_s
        self.flag_file = flag_file  # the epoch in progress, written by the main process
        if log_file:
            self.log_file = log_file

    def __len__(self):
        return 10 ** 9  # the sampler below decides the length

    def __getitem__(self, i):
        import torch
        if self.hang_s and i == 0 and self.flag_file:
            with open(self.flag_file) as f:
                if int(f.read()) in self.hang_epoch:
                    time.sleep(self.hang_s)
        if self.item_ms:
            time.sleep(self.item_ms / 1e3)
        n = len(self.paths)
        return torch.full((4,), float(len(self.paths[i % n])) if n else 1.0)


class Sampler:
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self):
        return self.n


class SlowInit:
    def __init__(self, seconds, epoch=-1, flag_file=None):
        self.seconds = seconds
        self.epoch = epoch  # -1: every epoch
        self.flag_file = flag_file

    def __call__(self, worker_id):
        if self.epoch >= 0:
            with open(self.flag_file) as f:
                if int(f.read()) != self.epoch:
                    return
        time.sleep(self.seconds)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--method", default="")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--paths", type=int, default=0)
    ap.add_argument("--init-s", type=float, default=0.0)
    ap.add_argument("--persistent", action="store_true")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batches", type=int, default=12)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--item-ms", type=float, default=0.0)
    ap.add_argument("--step-ms", type=float, default=0.0)
    ap.add_argument("--init-epoch", type=int, default=-1)
    ap.add_argument("--hang-epoch", default="")
    ap.add_argument("--hang-s", type=float, default=0.0)
    ap.add_argument("--no-lotus", action="store_true")
    ap.add_argument("--stateful", action="store_true")
    ap.add_argument("--preload", action="store_true", help="forkserver: preload torch")
    a = ap.parse_args()

    import torch  # noqa: F401
    os.makedirs(a.out, exist_ok=True)
    log = None if a.no_lotus else os.path.join(a.out, "lotustrace_log")
    if log:
        import lotus.torch
        lotus.torch.instrument(log_file=log)
    if a.stateful:
        from torchdata.stateful_dataloader import StatefulDataLoader as Loader
    else:
        from torch.utils.data import DataLoader as Loader

    epochs_out = []
    flag = os.path.join(a.out, "epoch-flag")
    hang = tuple(int(k) for k in a.hang_epoch.split(",") if k)
    ds = PathsDataset(a.paths, a.item_ms, hang, a.hang_s, log, flag)
    kw = {}
    if a.method:
        import multiprocessing
        ctx = multiprocessing.get_context(a.method)
        if a.preload:
            ctx.set_forkserver_preload(["torch"])
        kw["multiprocessing_context"] = ctx
    loader = Loader(ds, batch_size=a.batch_size, sampler=Sampler(a.batches * a.batch_size),
                    num_workers=a.workers, persistent_workers=a.persistent and a.workers > 0,
                    worker_init_fn=SlowInit(a.init_s, a.init_epoch, flag) if a.init_s else None,
                    **kw)
    t_job = time.time_ns()
    for e in range(a.epochs):
        with open(flag, "w") as f:
            f.write(str(e))
        t0 = time.time_ns()
        first = None
        n = 0
        for _ in loader:
            last = time.time_ns()
            if first is None:
                first = last
            n += 1
            if a.step_ms:
                time.sleep(a.step_ms / 1e3)
        t1 = time.time_ns()
        # epoch_s: to the end of the loop (the workers' shutdown included); to_last_s: to the
        # last batch (what lotus-tool calls the epoch: iter(loader) to its last batch).
        epochs_out.append({"t0_ns": t0, "ttfb_s": (first - t0) / 1e9, "epoch_s": (t1 - t0) / 1e9,
                           "to_last_s": (last - t0) / 1e9, "batches": n})
    wall = (time.time_ns() - t_job) / 1e9
    pickled = len(pickle.dumps(ds)) if a.paths else 0
    import multiprocessing
    method = a.method or multiprocessing.get_start_method()
    print(json.dumps({"pickle_bytes": pickled, "epochs": epochs_out, "wall_s": wall,
                      "method": method, "python": sys.version.split()[0]}))


if __name__ == "__main__":
    main()
