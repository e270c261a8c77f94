# SPDX-License-Identifier: MIT
"""webdataset: 8 tar shards written with wds.TarWriter (a JPEG and a class per sample), read by
the documented pipeline wds.WebDataset(shards, shardshuffle=False) → shuffle(100) → decode("pil")
→ to_tuple("jpg", "cls") → map_tuple(transform, identity) → batched(32), an IterableDataset
whose shards are split across the DataLoader's workers (split_by_worker), behind wds.WebLoader.
Data: 8 shards of 40 generated 128x128 JPEGs (about 3 MB)."""

import os

import torch
import webdataset as wds
from torchvision import transforms

import zoo_common as zc

SHARDS, PER = 8, 40


def make(root):
    for s in range(SHARDS):
        with wds.TarWriter(os.path.join(root, f"shard-{s:04d}.tar")) as w:
            for k in range(PER):
                i = s * PER + k
                w.write({"__key__": f"s{i:06d}", "jpg": zc.jpeg_bytes(i, (128, 128)),
                         "cls": str(i % 4).encode()})


def identity(x):
    return x


def main():
    args = zc.parse(__doc__.splitlines()[0])
    zc.start(args)
    data = zc.Data(args, f"wds_shards-{SHARDS}-{PER}", make)
    with data as root:
        torch.manual_seed(args.seed)
        tf = transforms.Compose([transforms.RandomResizedCrop(160), transforms.RandomHorizontalFlip(),
                                 transforms.ToTensor(),
                                 transforms.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])
        urls = os.path.join(root, "shard-{0000..%04d}.tar" % (SHARDS - 1))
        ds = (wds.WebDataset(urls, shardshuffle=False, empty_check=False)
              .shuffle(100).decode("pil").to_tuple("jpg", "cls").map_tuple(tf, identity)
              .batched(32))
        loader = wds.WebLoader(ds, batch_size=None, num_workers=args.workers,
                               **zc.loader_kwargs(args))
        epochs, digest = zc.run_epochs(args, lambda e: loader)
        zc.emit("wds_shards", args, epochs, digest, data, ("webdataset", "torchvision"))


if __name__ == "__main__":
    main()
