# SPDX-License-Identifier: MIT
"""A DataLoader run that plants one cause of slow batches (run by test_causes.py in a fresh process).

argv[1]: JSON {"trace": prefix, "cause": compute|contention|blocked|faults|cold|warm|none,
"step": seconds, "sample_cpu": seconds}. Two fork workers, batch size 4, lotus.torch traced; each sample does the planted
work (none: nothing), the loop sleeps `step` (default 0) after each batch; compute and contention spin `sample_cpu`
(default 0.01) of CPU time a sample. cold and warm: each
sample reads a file of its own (512 KiB, in the trace's directory's sibling `data`) with read(2):
cold after the files were written, synced and dropped from the page cache (from the device), warm
after they were read once (from the page cache).
"""
import json
import mmap
import os
import subprocess
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset

import lotus
import lotus.torch

CFG = json.loads(sys.argv[1])
CAUSE = CFG["cause"]
HOG_CPU = CFG.get("cpu", 0)
SAMPLE_CPU = CFG.get("sample_cpu", 0.01)
DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(CFG["trace"]))), "data")
FILE_BYTES = 512 << 10


def spin(seconds):
    end = time.thread_time() + seconds  # CPU time, not wall time: the same work when contended
    x = 0
    while time.thread_time() < end:
        x += 1
    return x


class Planted(Dataset):
    def __len__(self):
        return 32

    def __getitem__(self, i):
        if CAUSE in ("compute", "contention"):
            spin(SAMPLE_CPU)
        elif CAUSE == "blocked":
            time.sleep(0.02)
        elif CAUSE == "faults":
            m = mmap.mmap(-1, 48 << 20)
            if hasattr(mmap, "MADV_NOHUGEPAGE"):
                m.madvise(mmap.MADV_NOHUGEPAGE)  # 4 KiB pages: one fault each
            m.write(b"\1" * (48 << 20))
            m.close()
        elif CAUSE in ("cold", "warm"):
            with open(os.path.join(DATA, f"{i:04d}.bin"), "rb", buffering=0) as f:
                n = len(f.read())
            return torch.tensor([n])
        return torch.tensor([i])


def make_files(cold):
    os.makedirs(DATA, exist_ok=True)
    for i in range(32):
        path = os.path.join(DATA, f"{i:04d}.bin")
        with open(path, "wb") as f:
            f.write(os.urandom(FILE_BYTES))
            f.flush()
            os.fsync(f.fileno())
        fd = os.open(path, os.O_RDONLY)
        try:
            if cold:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            else:
                while os.read(fd, 1 << 20):
                    pass
        finally:
            os.close(fd)


def pin_worker(_):
    os.sched_setaffinity(0, {HOG_CPU})


def main():
    torch.set_num_threads(1)
    lotus.torch.instrument(log_file=CFG["trace"])
    hog = None
    extra = {}
    if CAUSE in ("cold", "warm"):
        make_files(CAUSE == "cold")
    if CAUSE == "contention":
        # A CPU hog on the workers' one CPU: they are runnable but wait for it.
        hog = subprocess.Popen([sys.executable, "-c",
                                f"import os\nos.sched_setaffinity(0, {{{HOG_CPU}}})\nwhile True: pass"])
        extra["worker_init_fn"] = pin_worker
    try:
        loader = DataLoader(Planted(), batch_size=4, num_workers=2, **extra)
        n = 0
        for _ in loader:
            n += 1
            time.sleep(CFG.get("step", 0))
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()
    lotus.flush()
    print(json.dumps({"batches": n}))


if __name__ == "__main__":
    main()
