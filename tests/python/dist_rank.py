# SPDX-License-Identifier: MIT
"""One rank of a data-parallel job, started as torchrun starts ranks (run by test_distributed.py).

    RANK=r LOCAL_RANK=r WORLD_SIZE=n MASTER_ADDR=127.0.0.1 MASTER_PORT=p /usr/bin/python3 dist_rank.py '<json>'

json keys: trace (the one prefix every rank shares), samples, batch_size, workers, epochs,
slow_rank and slow_ms (that rank's transform sleeps slow_ms per sample), step_ms (the simulated
training step, after an all_reduce that makes every step wait for the slowest rank).
Prints {"pid": ..., "rank": ..., "batches": ...} as its last line.
"""
import json
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset, DistributedSampler
from torchvision import transforms as T

import lotus
import lotus.torch


class AddOne:
    def __call__(self, x):
        return x + 1


class Sleep:
    def __init__(self, ms):
        self.ms = ms

    def __call__(self, x):
        if self.ms:
            time.sleep(self.ms / 1000)
        return x


class Seq(Dataset):
    def __init__(self, n, transforms):
        self.n, self.transforms = n, transforms

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return self.transforms(torch.tensor([float(i)]))


def main():
    cfg = json.loads(sys.argv[1])
    rank = int(os.environ["RANK"])
    lotus.torch.instrument(log_file=cfg["trace"])
    dist.init_process_group("gloo", rank=rank, world_size=int(os.environ["WORLD_SIZE"]))
    slow = cfg["slow_ms"] if rank == cfg["slow_rank"] else 0
    ds = Seq(cfg["samples"], T.Compose([AddOne(), Sleep(slow)]))
    sampler = DistributedSampler(ds, shuffle=False)
    loader = DataLoader(ds, batch_size=cfg["batch_size"], sampler=sampler,
                        num_workers=cfg["workers"])
    batches = 0
    for epoch in range(cfg["epochs"]):
        sampler.set_epoch(epoch)
        for _ in loader:
            t = torch.ones(1)
            dist.all_reduce(t)  # a synchronous step: every rank waits for the slowest
            time.sleep(cfg["step_ms"] / 1000)
            batches += 1
    dist.barrier()
    dist.destroy_process_group()
    print(json.dumps({"pid": os.getpid(), "rank": rank, "batches": batches}))


if __name__ == "__main__":
    main()
