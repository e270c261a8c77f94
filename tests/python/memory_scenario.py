# SPDX-License-Identifier: MIT
"""A traced DataLoader whose fork workers each keep 150 MiB of private memory (run by
test_memory.py in a fresh process).

argv[1]: JSON {"trace": prefix, "workers": N, "context": "fork"|"spawn" (default fork)}. One epoch of 48 samples, batch size 4. Each worker
allocates and writes 150 MiB at its first sample and keeps it to the end of the epoch. While the
epoch runs, a thread of the main process samples every 20 ms the Pss of the main process and of
each of its children (/proc/<pid>/smaps_rollup) and keeps the largest sum: the job's measured
peak physical memory, printed as JSON.
"""
import json
import os
import sys
import threading
import time

import torch
from torch.utils.data import DataLoader, Dataset

import lotus
import lotus.torch

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


def pss(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def children(pid):
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return out


def main():
    torch.set_num_threads(1)
    lotus.torch.instrument(log_file=CFG["trace"])
    me = os.getpid()
    peak = [0, 0]  # bytes, processes
    done = threading.Event()

    def sample():
        while not done.wait(0.02):
            procs = [me] + children(me)
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


if __name__ == "__main__":
    main()
