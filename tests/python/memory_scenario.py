# SPDX-License-Identifier: MIT
"""A traced DataLoader whose fork workers each keep 150 MiB of private memory (run by
test_memory.py in a fresh process).

argv[1]: JSON {"trace": prefix, "workers": N, "context": "fork"|"spawn"|"forkserver" (default fork)}. One epoch of 48 samples, batch size 4. Each worker
allocates and writes 150 MiB at its first sample and keeps it to the end of the epoch. While the
epoch runs, a thread of the main process samples every 20 ms the Pss of the main process and of
each of its children (/proc/<pid>/smaps_rollup) and keeps the largest sum: the job's measured
peak physical memory, printed as JSON.

argv[1] {"planted": [1, 2, 3, 4]} (test_memory_model.py): memory planted in fork workers, no
trace. The main process writes a 64 MiB array before the workers start (SHARED: every worker reads
all of it at its first sample, so its pages are in every process, shared); each worker writes
24 MiB of its own at its first sample (PRIVATE) and 2 MiB more in every batch it collates (GROWTH,
kept). One epoch of 96 samples, batch size 4 (24 batches). lotus.torch.autotune runs that epoch
at 1 worker; its decision's memory model inputs (measured from /proc at the epoch's boundaries)
are printed with, for each worker count, the tree's summed Pss measured when the last batch is
taken (all batches prepared, the workers alive): deterministic, no timing.
"""
import json
import os
import sys
import threading
import time
import zlib

import torch
from torch.utils.data import DataLoader, Dataset

import lotus
import lotus.torch
from tree_memory import children, pss, tree_pss

CFG = json.loads(sys.argv[1])
KEEP = 150 << 20
_kept = []


class Keeps150MiB(Dataset):
    def __len__(self):
        return 48

    def __getitem__(self, i):
        if not _kept:
            _kept.append(bytearray(b"\x01") * KEEP)  # written: private pages of this worker
        time.sleep(0.02)
        return torch.tensor([i])


def main():
    torch.set_num_threads(1)
    lotus.torch.instrument(log_file=CFG["trace"])
    me = os.getpid()
    peak = [0, 0]  # bytes, processes
    done = threading.Event()

    def tree(pid):  # a forkserver's workers are its server's children
        kids = children(pid)
        return kids + [g for k in kids for g in tree(k)]

    def sample():
        while not done.wait(0.02):
            procs = [me] + tree(me)
            total = sum(pss(p) for p in procs)
            if total > peak[0]:
                peak[0], peak[1] = total, len(procs)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    loader = DataLoader(Keeps150MiB(), batch_size=4, num_workers=CFG["workers"],
                        multiprocessing_context=CFG.get("context", "fork"))
    n = 0
    for _ in loader:
        time.sleep(0.01)
        n += 1
    done.set()
    t.join()
    lotus.flush()
    print(json.dumps({"batches": n, "peak_pss": peak[0], "processes": peak[1]}))


SHARED = 64 << 20
PRIVATE = 24 << 20
GROWTH = 2 << 20
_shared = None
_grown = []


class Planted(Dataset):
    def __len__(self):
        return 96

    def __getitem__(self, i):
        if not _kept:
            _kept.append(bytearray(b"\x01") * PRIVATE)  # written: this worker's own pages
            _kept.append(zlib.crc32(memoryview(_shared)))  # read: the shared pages mapped
        return torch.tensor([i])


def grow(samples):
    _grown.append(bytearray(b"\x03") * GROWTH)  # written, kept: grows with every batch
    return torch.stack(samples)


def planted():
    global _shared
    import lotus.autotune
    torch.set_num_threads(1)
    _shared = bytearray(b"\x02") * SHARED
    loader = DataLoader(Planted(), batch_size=4, num_workers=1, collate_fn=grow)
    tuned = lotus.torch.autotune(loader, memory_budget="1T", verbose=False)
    for _ in tuned:
        pass
    d = tuned.decisions[0]
    tuned.close()
    out = {"inputs": d["memory"], "predicted": {}, "measured": {}}
    for n in CFG["planted"]:
        out["predicted"][n] = lotus.autotune.predict_memory(d["memory"], n, 2)
        plain = DataLoader(Planted(), batch_size=4, num_workers=n, collate_fn=grow)
        it = iter(plain)
        for k in range(len(plain)):
            next(it)
            if k == len(plain) - 1:
                out["measured"][n] = tree_pss()
        del it, plain
        for _ in range(200):  # the workers of this count end before the next count starts
            if not children(os.getpid()):
                break
            time.sleep(0.05)
    print(json.dumps(out))


if __name__ == "__main__":
    if "planted" in CFG:
        planted()
    else:
        main()
