# SPDX-License-Identifier: MIT
"""A traced fork DataLoader with one planted cause of memory (run by test_memory_causes.py).

argv[1]: JSON {"trace": prefix, "mode": "copy" | "new" | "held", "workers": N}. One epoch.
- copy: the dataset is a list of 800 k Python str (about 90 MiB of objects, built before the
  workers fork, the collector frozen: gc.freeze()), each worker reads its share of them in shuffled
  order: reading an object writes its reference count, so each worker copies the pages of the
  strings it reads (about all of them). PLANTED: the main process's RssAnon growth while it built
  them.
- new: each worker allocates and writes 96 MiB of its own at its first sample (PLANTED) and keeps
  it to the end of the epoch; the dataset is a few ints.
- held: each sample is a 1 MiB float tensor, batches of 4 (4 MiB, sent in shared memory by the
  workers); the training loop touches every batch and keeps the last 16 (PLANTED: 64 MiB of
  shared memory held in the main process) for 2 s after the loop.
Also "epochs" (default 1) and "persistent" (default false): the loop runs that many epochs; and
"measure": true samples the process tree's summed Pss every 20 ms (/proc/<pid>/smaps_rollup of
this process and its children) and reports the largest sum as "peak_pss".
The last line of stdout is JSON: {"planted": bytes, "batches": n, "workers": N[, "peak_pss"]}.
"""
import gc
import json
import sys
import threading
import time

import torch
from torch.utils.data import DataLoader, Dataset

import lotus
import lotus.torch
from tree_memory import tree_pss

CFG = json.loads(sys.argv[1])
MIB = 1 << 20
NEW = 96 * MIB
HELD = 16
_kept = []
_held = []


def rss_anon():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no RssAnon in /proc/self/status")


class Strings(Dataset):
    def __init__(self, n):
        self.items = [f"{i:012d}:" + "s" * 40 for i in range(n)]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return len(self.items[i])


class Keeps(Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        if not _kept:
            _kept.append(bytearray(b"\x01") * NEW)  # written: this worker's own new pages
        return i


class Tensors(Dataset):
    def __len__(self):
        return 96

    def __getitem__(self, i):
        return torch.full((MIB // 4,), float(i))


class TreePss:
    """The largest summed Pss of this process and its children, sampled every 20 ms."""

    def __init__(self):
        self.peak = 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.done.wait(0.02):
            self.peak = max(self.peak, tree_pss())

    def stop(self):
        self.done.set()
        self.thread.join()
        return self.peak


def main():
    torch.set_num_threads(1)
    if CFG.get("trace"):  # (null: untraced, the truth whatif is held to)
        lotus.torch.instrument(log_file=CFG["trace"])
    mode = CFG["mode"]
    if mode == "copy":
        before = rss_anon()
        ds = Strings(800_000)
        planted = rss_anon() - before
        gc.freeze()  # the workers' collections leave the inherited objects alone
        loader = DataLoader(ds, batch_size=1000, shuffle=True, num_workers=CFG["workers"],
                            multiprocessing_context="fork",
                            persistent_workers=bool(CFG.get("persistent")))
    elif mode == "new":
        planted = NEW
        loader = DataLoader(Keeps(), batch_size=4, num_workers=CFG["workers"],
                            multiprocessing_context="fork")
    else:
        planted = HELD * 4 * MIB
        loader = DataLoader(Tensors(), batch_size=4, num_workers=CFG["workers"],
                            multiprocessing_context="fork")
    tree = TreePss() if CFG.get("measure") else None
    n = 0
    for _ in range(int(CFG.get("epochs", 1))):
        for batch in loader:
            if mode == "held":
                float(batch.sum())  # its pages touched in this process
                _held.append(batch)
                del _held[:-HELD]
            n += 1
    if mode == "held":
        time.sleep(2.0)  # held: the main process's readings (every 500 ms at most) see them
    out = {"planted": planted, "batches": n, "workers": CFG["workers"]}
    if tree is not None:
        del loader  # persistent workers: shut down before the sampler stops
        out["peak_pss"] = tree.stop()
    lotus.flush()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
