# SPDX-License-Identifier: MIT
"""A real DataLoader run with one planted problem, traced by lotus.torch (run by
test_diagnosis_real.py in a fresh process; its figures go to bench/README.md's diagnosis table).

argv[1]: JSON {"trace": prefix, "case": offcpu|startup|drift|borderline|collate|heavytail|
coldstore|wstate|stalls, "workers": N, "persistent": bool, "epochs": N, "data": directory
(coldstore), "stalls": "random"|"periodic"|"none" and "slow_start": bool (stalls: the startup
case's worker_init_fn too), "method": a start method (else the platform's)}. Prints
{"batches": n, "epoch_s": [wall time of each epoch], "cpu_s": the process tree's CPU time}.

The first four cases plant sleeps (the offcpu case's ~0.3 ms of CPU aside): a CPU-bound cost would
make the verdict depend on the load of the machine running it (a shared CI host). The worker
model's cases (collate, heavytail) plant CPU work measured as the thread's CPU time (the same
work whatever the load); their tests compare the load of the runs and skip when it moved.

* offcpu: each sample waits 8 ms for "storage" (a sleep inside the Load op) and computes ~0.3 ms.
* startup: workers started afresh each epoch (persistent_workers=False, PyTorch's default) with
  a worker_init_fn that takes 1.5 s; each sample takes 4 ms.
* drift: an op (Degrade) whose cost grows from 0.5 ms to 5.6 ms over the run, beside a constant
  1 ms op (Load).
* wstate: the same op growing with each worker's own state instead: 0.5 ms plus 0.03 ms for every
  sample that worker prepared before (a cache or a leak of its own), so more workers each grow
  less.
* borderline: one worker, 24 ms a batch (one sleep in its first sample), a 21 ms training step:
  training waits ~12-17 % of its time (the loader is barely behind).
* collate: a CPU-heavy collate_fn in the worker (12 ms of CPU a batch), a 1 ms Load per sample.
* heavytail: every 50th sample (2 %) costs 40x the median: 1 ms of CPU a sample, 40 ms for those.
* stalls: 1 ms a sample (a sleep), a 3 ms training step (a sleep) that stalls 60 ms now and then:
  "random": at planted steps that differ from epoch to epoch (1, 6 and 3 stalls in the first
  three epochs: their lengths differ by whole stalls), "periodic": every 8th step (4 an epoch,
  the epochs alike), "none": never.
* coldstore: each sample reads 64 KiB of its own file through mmap after dropping the file's
  pages from the page cache (posix_fadvise DONTNEED; 16 major faults a sample), on an emulated
  storage device: a lock shared by every process (flock) held 4 ms per read, so the device
  serves one read per 4 ms whatever the worker count: with 2 workers it is the limit, known by
  construction.
"""
import fcntl
import json
import mmap
import os
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms as T

import lotus
import lotus.torch

CFG = json.loads(sys.argv[1])
CASE = CFG["case"]
EPOCHS = CFG.get("epochs", 3)
SAMPLES = {"offcpu": 64, "startup": 32, "drift": 256, "borderline": 320, "collate": 384,
           "heavytail": 400, "coldstore": 256, "wstate": 256, "stalls": 128}[CASE]
# stalls, "random": the steps of each epoch that stall (its batches 0-31).
RANDOM_STALLS = [{5}, {2, 7, 11, 19, 23, 30}, {9, 15, 26}]
BATCH = 4
FILE_BYTES = 64 * 1024  # coldstore: one file per sample
DEVICE_S = 0.004  # coldstore: the emulated device's service time per read


def spin(seconds):
    end = time.thread_time() + seconds  # CPU time: the same work when the machine is busy
    x = 0
    while time.thread_time() < end:
        x += 1
    return x


class Load:
    """Reads a sample: the planted storage wait (offcpu), or a constant cost."""

    def __call__(self, x):
        if CASE == "offcpu":
            time.sleep(0.008)
            spin(0.0003)
        elif CASE == "startup":
            time.sleep(0.004)
        elif CASE in ("drift", "collate", "wstate", "stalls"):
            time.sleep(0.001)
        elif CASE == "heavytail":
            spin(0.040 if int(x[0]) % 50 == 7 else 0.001)
        elif CASE == "coldstore":
            read_cold(int(x[0]))
        elif int(x[0]) % BATCH == 0:
            time.sleep(0.024)  # borderline: one wait a batch (a sleep's wake-up late once)
        return x


def read_cold(i):
    """One read from the emulated device: its pages dropped from the page cache first, then read
    through mmap (each 4 KiB page a major fault) while holding the device's lock for its
    service time."""
    path = os.path.join(CFG["data"], f"{i}.bin")
    with open(os.path.join(CFG["data"], "device.lock"), "rb") as lock, open(path, "rb") as f:
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            t0 = time.monotonic()
            with mmap.mmap(f.fileno(), FILE_BYTES, prot=mmap.PROT_READ) as m:
                m.madvise(mmap.MADV_RANDOM)  # no read-ahead: one fault a page
                total = sum(m[k] for k in range(0, FILE_BYTES, 4096))
            left = DEVICE_S - (time.monotonic() - t0)
            if left > 0:
                time.sleep(left)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return total


def make_data():
    """coldstore: the files (written and synced once: DONTNEED drops clean pages only)."""
    os.makedirs(CFG["data"], exist_ok=True)
    open(os.path.join(CFG["data"], "device.lock"), "ab").close()
    for i in range(SAMPLES):
        path = os.path.join(CFG["data"], f"{i}.bin")
        if os.path.exists(path):
            continue
        with open(path, "wb") as f:
            f.write(os.urandom(FILE_BYTES))
            f.flush()
            os.fsync(f.fileno())


def heavy_collate(samples):
    """collate: the batch's own CPU work in the worker (a costly collate_fn)."""
    spin(0.012)
    return torch.utils.data.default_collate(samples)


class Degrade:
    """The drift case's op: 0.5 ms at the run's start, 5.6 ms at its end (each worker counts the
    samples it prepared, persistent across epochs)."""

    calls = 0

    def __call__(self, x):
        if CASE == "drift":
            per_worker = SAMPLES * EPOCHS / max(1, CFG["workers"])
            frac = min(1.0, Degrade.calls / max(1.0, per_worker - 1))
            Degrade.calls += 1
            time.sleep((0.5 + 5.1 * frac) / 1e3)
        elif CASE == "wstate":
            time.sleep((0.5 + 0.03 * Degrade.calls) / 1e3)
            Degrade.calls += 1
        return x


class Planted(Dataset):
    def __init__(self):
        self.transforms = T.Compose([Load(), Degrade()])

    def __len__(self):
        return SAMPLES

    def __getitem__(self, i):
        return self.transforms(torch.tensor([i]))


def slow_init(_):
    time.sleep(1.5)  # the planted start-up: a worker_init_fn opening a database, say


def main():
    torch.set_num_threads(1)
    lotus.torch.instrument(log_file=CFG["trace"])
    extra = {}
    if CASE == "startup":
        extra["worker_init_fn"] = slow_init
    if CASE == "stalls" and CFG.get("slow_start"):
        extra["worker_init_fn"] = slow_init  # the start-up planted beside the stalls
    if CFG.get("method"):
        extra["multiprocessing_context"] = CFG["method"]
    if CASE == "collate":
        extra["collate_fn"] = heavy_collate
    if CASE == "coldstore":
        make_data()
    loader = DataLoader(Planted(), batch_size=BATCH, num_workers=CFG["workers"],
                        persistent_workers=CFG.get("persistent", True), **extra)
    n = 0
    epochs = []
    for epoch in range(EPOCHS):
        t0 = time.monotonic()
        for step, _ in enumerate(loader):
            n += 1
            if CASE == "borderline":
                time.sleep(0.021)  # the training step
            elif CASE == "stalls":
                plan = CFG.get("stalls", "random")
                stalled = (plan == "random" and step in RANDOM_STALLS[epoch % 3]) or \
                    (plan == "periodic" and step % 8 == 7)
                time.sleep(0.063 if stalled else 0.003)
        epochs.append(time.monotonic() - t0)
    del loader
    lotus.flush()
    t = os.times()
    cpu = t.user + t.system + t.children_user + t.children_system
    print(json.dumps({"batches": n, "epoch_s": epochs, "cpu_s": cpu}))


if __name__ == "__main__":
    main()
