# SPDX-License-Identifier: MIT
"""A torch DataLoader job (2 fork workers) traced by lotus.torch, for test_live.py.

    /usr/bin/python3 live_job.py '<json>'

json keys: trace (prefix), samples, batch_size, epochs, sleep_ms (per sample, inside SDecode),
hold_at (after this many batches: flush, print `ready <json>`, wait for the file `control`), control.
Prints `done {"pid", "consumed"}` at the end.
"""
import json
import os
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset

import lotus
import lotus.torch


class Frames(Dataset):
    def __init__(self, n, sleep_s):
        self.n, self.sleep_s = n, sleep_s

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        with lotus.scope("Decode"):
            time.sleep(self.sleep_s)
        with lotus.scope("Resize"):
            x = torch.full((8,), float(i))
        return x


def main():
    a = json.loads(sys.argv[1])
    lotus.torch.instrument(log_file=a["trace"])
    dl = DataLoader(Frames(a["samples"], a["sleep_ms"] / 1000), batch_size=a["batch_size"],
                    num_workers=2, multiprocessing_context="fork")
    consumed = 0
    for _ in range(a["epochs"]):
        for _batch in dl:
            consumed += 1
            if consumed == a.get("hold_at"):
                lotus.flush()
                print("ready " + json.dumps({"pid": os.getpid(), "consumed": consumed}), flush=True)
                deadline = time.monotonic() + 120
                while not os.path.exists(a["control"]) and time.monotonic() < deadline:
                    time.sleep(0.02)
    lotus.flush()
    print("done " + json.dumps({"pid": os.getpid(), "consumed": consumed}), flush=True)


if __name__ == "__main__":
    main()
