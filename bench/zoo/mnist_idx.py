# SPDX-License-Identifier: MIT
"""torchvision's MNIST dataset class over generated IDX files (the format of the MNIST download:
MNIST/raw/train-images-idx3-ubyte & co., read by torchvision's own parser), with the transforms of
PyTorch's MNIST example plus a RandomAffine augmentation, behind a torch DataLoader.
Data: 4000 generated 28x28 ring images and their labels (about 3 MB)."""

import os
import struct

import numpy as np
import torch
import torchvision
from torchvision import transforms

import zoo_common as zc

N_TRAIN, N_TEST = 4000, 64


def idx(path, arr):
    with open(path, "wb") as f:
        f.write(struct.pack(">BBBB", 0, 0, 0x08, arr.ndim))
        f.write(struct.pack(">" + "I" * arr.ndim, *arr.shape))
        f.write(arr.astype(np.uint8).tobytes())


def make(root, n_train=N_TRAIN):
    raw = os.path.join(root, "MNIST", "raw")
    os.makedirs(raw)
    rng = np.random.default_rng(0)
    for name, n in (("train", n_train), ("t10k", N_TEST)):
        labels = rng.integers(0, 10, n)
        yy, xx = np.mgrid[0:28, 0:28]
        imgs = np.zeros((n, 28, 28), np.float32)
        for i, lab in enumerate(labels):  # a ring whose radius and centre follow the label
            cy, cx = 14 + rng.normal(0, 1.5), 14 + rng.normal(0, 1.5)
            r = 4 + lab * 0.8
            d = np.hypot(yy - cy, xx - cx)
            imgs[i] = np.clip(255 * (1 - np.abs(d - r) / 2.0), 0, 255)
        idx(os.path.join(raw, f"{name}-images-idx3-ubyte"), imgs)
        idx(os.path.join(raw, f"{name}-labels-idx1-ubyte"), labels)


def main():
    args = zc.parse(__doc__.splitlines()[0], scalable=True)
    zc.start(args)
    n = zc.scaled(args, N_TRAIN)
    data = zc.Data(args, zc.tag(args, f"mnist_idx-{N_TRAIN}"), lambda r: make(r, n))
    with data as root:
        torch.manual_seed(args.seed)
        tf = transforms.Compose([transforms.RandomAffine(10, translate=(0.1, 0.1)),
                                 transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])
        ds = torchvision.datasets.MNIST(root, train=True, download=False, transform=tf)
        loader = torch.utils.data.DataLoader(ds, batch_size=64, shuffle=True,
                                             num_workers=args.workers, **zc.loader_kwargs(args))
        epochs, digest = zc.run_epochs(args, lambda e: loader)
        zc.emit("mnist_idx", args, epochs, digest, data, ("torchvision",))


if __name__ == "__main__":
    main()
