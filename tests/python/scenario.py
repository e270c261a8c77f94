# SPDX-License-Identifier: MIT
"""A deterministic DataLoader run traced by lotus.torch (run by test_torch.py in a fresh process).

    /usr/bin/python3 scenario.py '<json>'

json keys: trace (prefix), context (fork|spawn), workers, epochs, batches, batch_size, persistent,
order ('in': batches arrive in order; 'swap01': batch 1 arrives before batch 0), style ('all':
instrument(log_file=...); 'keywords': instrument() + Lotus's keywords; 'none': instrument() only),
dataset ('seq': custom dataset with a Compose `transforms` attribute; 'iterable'; 'folder': ImageFolder
over generated JPEGs in `data`), uninstrument (bool: run once traced, uninstrument, run again),
in_order (bool, torch 2.6+), prefetch, pin_memory, drop_last, samples (count, default batches *
batch_size), batch_sampler (bool: a BatchSampler instead of batch_size), collate ('custom'), sample
('dict': samples are dicts), compose ('v2': transforms.v2.Compose with a nested Compose and a plain
function), sleep_ms ([ms per sample by batch index modulo its length]: timed arrivals, no gate), loader
('stateful': torchdata's StatefulDataLoader instead of torch's DataLoader).
Prints {pid, samples, stats, blocked_ns (time the loop spent inside next())}.
Arrival order is forced, not timed: batch k's first sample waits until the main process has received
batch k-1 (for 'swap01', batch 0 waits for batch 1), through flag files written by a hook on the
main process's _get_data.
"""
import json
import os
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset
from torchvision import transforms as T

import lotus
import lotus.torch


def add_one(x):
    return x + 1


class AddOne:
    def __call__(self, x):
        return x + 1


class Double:
    def __call__(self, x):
        return x * 2


def wait_for(path):
    deadline = time.monotonic() + 60
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {path}")
        time.sleep(0.001)


def gate(flags, order, batch):
    """Block the first sample of `batch` until the batch that must arrive before it was received."""
    if order == "swap01":
        before = {0: 1, 1: None}.get(batch, batch - 1)
    else:
        before = batch - 1 if batch > 0 else None
    if flags is not None and before is not None:
        wait_for(os.path.join(flags, f"got_{before}"))


class SeqDataset(Dataset):
    """Lotus's custom-dataset shape: `log_file` and a Compose in `transforms`."""

    def __init__(self, n, batch_size, flags, order, transforms, log_file=None, sample="tensor",
                 sleep_ms=None):
        self.n, self.batch_size, self.flags, self.order = n, batch_size, flags, order
        self.transforms = transforms
        self.log_file = log_file
        self.sample, self.sleep_ms = sample, sleep_ms

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.sleep_ms:
            time.sleep(self.sleep_ms[(i // self.batch_size) % len(self.sleep_ms)] / 1000)
        elif i % self.batch_size == 0:
            gate(self.flags, self.order, i // self.batch_size)
        x = self.transforms(torch.tensor([float(i)]))
        return {"x": x, "i": i} if self.sample == "dict" else x


class Stream(IterableDataset):
    def __init__(self, n, transforms):
        self.n, self.transforms = n, transforms

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        w, k = (0, 1) if info is None else (info.id, info.num_workers)
        for i in range(w, self.n, k):
            yield self.transforms(torch.tensor([float(i)]))


def make_images(root, count):
    from PIL import Image
    for c in range(2):
        os.makedirs(os.path.join(root, f"c{c}"), exist_ok=True)
        for i in range(count // 2):
            Image.new("RGB", (24 + i, 20 + c), (10 * i, 100 * c, 7)).save(
                os.path.join(root, f"c{c}", f"{i}.jpg"))


def install_arrival_hook(flags, loader="torch"):
    if loader == "stateful":
        from torchdata.stateful_dataloader import stateful_dataloader
        it = stateful_dataloader._StatefulMultiProcessingDataLoaderIter
    else:
        it = torch.utils.data.dataloader._MultiProcessingDataLoaderIter
    inner = it._get_data

    def _get_data(self):
        r = inner(self)
        if type(r) is tuple and type(r[0]) is int:
            open(os.path.join(flags, f"got_{r[0]}"), "w").close()
        return r

    it._get_data = _get_data


def main():
    cfg = json.loads(sys.argv[1])
    style = cfg.get("style", "all")
    trace = cfg["trace"]
    if style == "all":
        lotus.torch.instrument(log_file=trace)
    else:
        lotus.torch.instrument()
    kw = trace if style == "keywords" else None
    b, n = cfg.get("batch_size", 2), cfg.get("batches", 6) * cfg.get("batch_size", 2)
    workers = cfg.get("workers", 2)
    flags = cfg.get("flags")
    kind = cfg.get("dataset", "seq")
    n = cfg.get("samples", n)
    steps = [T.Resize((8, 8)), T.ToTensor()] if kind == "folder" else [AddOne(), Double()]
    if cfg.get("compose") == "v2":
        from torchvision.transforms import v2
        compose = v2.Compose([AddOne(), v2.Compose([Double(), add_one]), v2.Lambda(add_one)])
    elif style == "keywords":
        compose = T.Compose(steps, log_transform_elapsed_time=kw)
    else:
        compose = T.Compose(steps)
    if kind == "seq":
        ds = SeqDataset(n, b, flags if workers else None, cfg.get("order", "in"), compose,
                        log_file=kw, sample=cfg.get("sample", "tensor"),
                        sleep_ms=cfg.get("sleep_ms"))
    elif kind == "iterable":
        ds = Stream(n, compose)
    else:
        make_images(cfg["data"], n)
        if style == "keywords":
            ds = __import__("torchvision").datasets.ImageFolder(cfg["data"], compose, log_file=kw)
        else:
            ds = __import__("torchvision").datasets.ImageFolder(cfg["data"], compose)
    if workers and flags:
        install_arrival_hook(flags, cfg.get("loader", "torch"))
    extra = {}
    if workers:
        extra = dict(multiprocessing_context=cfg.get("context", "fork"),
                     persistent_workers=cfg.get("persistent", False))
        if "prefetch" in cfg:
            extra["prefetch_factor"] = cfg["prefetch"]
    if "in_order" in cfg:
        extra["in_order"] = cfg["in_order"]
    if cfg.get("pin_memory"):
        extra["pin_memory"] = True
    if cfg.get("collate") == "custom":
        extra["collate_fn"] = collate
    if cfg.get("batch_sampler"):
        from torch.utils.data import BatchSampler, SequentialSampler
        extra["batch_sampler"] = BatchSampler(SequentialSampler(range(n)), b,
                                              cfg.get("drop_last", False))
    else:
        extra.update(batch_size=b, drop_last=cfg.get("drop_last", False))
    loader_class = DataLoader
    if cfg.get("loader") == "stateful":
        from torchdata.stateful_dataloader import StatefulDataLoader as loader_class
    loader = loader_class(ds, num_workers=workers, **extra)
    total = 0
    blocked = 0
    for _ in range(cfg.get("epochs", 1)):
        if flags:
            for f in os.listdir(flags):
                os.unlink(os.path.join(flags, f))
        it = iter(loader)
        while True:
            t0 = time.perf_counter_ns()
            try:
                batch = next(it)
            except StopIteration:
                break
            blocked += time.perf_counter_ns() - t0
            total += count(batch, kind)
    if cfg.get("uninstrument"):
        lotus.torch.uninstrument()
        del loader
        if kind == "seq":
            ds.flags = None  # uninstrument() removed the arrival hook too
        loader = DataLoader(ds, num_workers=workers, **extra)
        for batch in loader:
            total += count(batch, kind)
    lotus.flush()
    print(json.dumps({"pid": os.getpid(), "samples": total, "stats": list(lotus.stats()),
                      "blocked_ns": blocked}))


def collate(samples):
    """A custom collate_fn: stacks tensors (dict samples: their 'x')."""
    if isinstance(samples[0], dict):
        return {"x": torch.stack([s["x"] for s in samples]),
                "i": torch.tensor([s["i"] for s in samples])}
    return torch.stack(samples)


def count(batch, kind):
    if kind == "folder":
        return len(batch[0])
    if isinstance(batch, dict):
        return len(batch["x"])
    return len(batch)


if __name__ == "__main__":
    main()
