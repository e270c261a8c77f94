# SPDX-License-Identifier: MIT
"""A DataLoader job whose training step runs on a (simulated or absent) GPU.

argv: trace prefix, out.json, mode ("fake": fake_cuda's stream; "none": no CUDA at all), epochs,
batches, item_ms (the loader's planted cost per item), kernel_ms (the step's GPU time); optional:
iter_ms (the sampler's iter() takes that long: inside a new iterator's __init__) and persistent
(1, the default: persistent workers; 0: a new iterator, and workers, every epoch).
The fake stream's event log goes to out.json, with whether CUDA was initialized at the end.
"""
import json
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset

import lotus.torch
from lotus.loaders import _gpu
from fake_cuda import FakeCuda

prefix, out, mode = sys.argv[1], sys.argv[2], sys.argv[3]
epochs, batches, item_ms, kernel_ms = (int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6]),
                                       float(sys.argv[7]))
iter_ms = float(sys.argv[8]) if len(sys.argv) > 8 else 0.0
persistent = sys.argv[9] != "0" if len(sys.argv) > 9 else True


class Slow(Dataset):
    def __len__(self):
        return batches

    def __getitem__(self, i):
        time.sleep(item_ms / 1e3)
        return torch.tensor([i])


class SlowStart:  # a sampler (any iterable of indices)
    def __iter__(self):
        time.sleep(iter_ms / 1e3)
        return iter(range(batches))

    def __len__(self):
        return batches


lotus.torch.instrument(prefix)
fake = FakeCuda() if mode == "fake" else None
if fake is not None:
    _gpu.set_event_source(fake)
loader = DataLoader(Slow(), batch_size=1, num_workers=1, persistent_workers=persistent,
                    sampler=SlowStart() if iter_ms else None)
for _ in range(epochs):
    for k, batch in enumerate(loader):
        if fake is not None:
            fake.launch(kernel_ms)
            if k % 4 == 3:
                fake.synchronize()
if fake is not None:
    fake.synchronize()  # every event complete: the exit's last read has them all
json.dump({"log": fake.log if fake is not None else [],
           "cuda_initialized": torch.cuda.is_initialized()}, open(out, "w"))
