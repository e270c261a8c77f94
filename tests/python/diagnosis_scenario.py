# SPDX-License-Identifier: MIT
"""A real DataLoader run with one planted problem, traced by lotus.torch (run by
test_diagnosis_real.py in a fresh process; its figures go to bench/README.md's diagnosis table).

argv[1]: JSON {"trace": prefix, "case": offcpu|startup|drift|borderline, "workers": N,
"persistent": bool, "epochs": N}. Prints {"batches": n, "epoch_s": [wall time of each epoch]}.

Every planted cost is a sleep (the offcpu case's ~0.3 ms of CPU aside): a CPU-bound cost would
make the verdict depend on the load of the machine running it (a shared CI host).

* offcpu: each sample waits 8 ms for "storage" (a sleep inside the Load op) and computes ~0.3 ms.
* startup: workers started afresh each epoch (persistent_workers=False, PyTorch's default) with
  a worker_init_fn that takes 1.5 s; each sample takes 4 ms.
* drift: an op (Degrade) whose cost grows from 0.5 ms to 5.6 ms over the run, beside a constant
  1 ms op (Load).
* borderline: one worker, 24 ms a batch (one sleep in its first sample), a 21 ms training step:
  training waits ~12-17 % of its time (the loader is barely behind).
"""
import json
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
SAMPLES = {"offcpu": 64, "startup": 32, "drift": 64, "borderline": 320}[CASE]
BATCH = 4


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
        elif CASE == "drift":
            time.sleep(0.001)
        elif int(x[0]) % BATCH == 0:
            time.sleep(0.024)  # borderline: one wait a batch (a sleep's wake-up late once)
        return x


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
    loader = DataLoader(Planted(), batch_size=BATCH, num_workers=CFG["workers"],
                        persistent_workers=CFG.get("persistent", True), **extra)
    n = 0
    epochs = []
    for _ in range(EPOCHS):
        t0 = time.monotonic()
        for _ in loader:
            n += 1
            if CASE == "borderline":
                time.sleep(0.021)  # the training step
        epochs.append(time.monotonic() - t0)
    del loader
    lotus.flush()
    print(json.dumps({"batches": n, "epoch_s": epochs}))


if __name__ == "__main__":
    main()
