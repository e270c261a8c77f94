#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The Python DataLoader of bench/tool/whatif_sweep.py: a traced torch DataLoader (fork workers)
whose samples each take 4 ms of CPU and whose workers each keep 64 MiB of private memory; 10 ms
training step (a sleep), batch size 4, 96 samples, 2 epochs. Prints {"epoch_seconds": [...]}.

    whatif_loader.py TRACE_PREFIX WORKERS
"""
import json
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset

import lotus
import lotus.torch

KEEP = 64 << 20
_kept = []


class Work(Dataset):
    def __len__(self):
        return 96

    def __getitem__(self, i):
        if not _kept:
            _kept.append(bytearray(b"\x01") * KEEP)
        end = time.thread_time() + 0.004
        x = 0
        while time.thread_time() < end:
            x += 1
        return torch.tensor([i])


def main():
    torch.set_num_threads(1)
    lotus.torch.instrument(log_file=sys.argv[1])
    loader = DataLoader(Work(), batch_size=4, num_workers=int(sys.argv[2]))
    epochs = []
    for _ in range(2):
        t0 = time.perf_counter()
        for _b in loader:
            time.sleep(0.01)
        epochs.append(time.perf_counter() - t0)
    lotus.flush()
    print(json.dumps({"epoch_seconds": epochs}))


if __name__ == "__main__":
    main()
