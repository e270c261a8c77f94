# SPDX-License-Identifier: MIT
"""Hugging Face `datasets`: a dataset saved to disk as Arrow and loaded back memory-mapped
(load_from_disk), `with_format("torch")`, behind a shuffled torch DataLoader (each row read from the
mapped Arrow table in the worker, collated by torch's default collate).
Data: 6000 rows of a 512-float feature, an int label and 64 token ids (about 14 MB)."""

import datasets
import numpy as np
import torch

import zoo_common as zc

ROWS = 6000


def make(root, rows=ROWS):
    rng = np.random.default_rng(0)
    ds = datasets.Dataset.from_dict({
        "x": rng.standard_normal((rows, 512), dtype=np.float32),
        "label": rng.integers(0, 10, rows),
        "ids": rng.integers(0, 30000, (rows, 64)),
    })
    ds.save_to_disk(root + "/arrow")


def main():
    args = zc.parse(__doc__.splitlines()[0], scalable=True)
    zc.start(args)
    n = zc.scaled(args, ROWS)
    data = zc.Data(args, zc.tag(args, f"hf_datasets-{ROWS}"), lambda r: make(r, n))
    with data as root:
        torch.manual_seed(args.seed)
        ds = datasets.load_from_disk(root + "/arrow").with_format("torch")
        loader = torch.utils.data.DataLoader(ds, batch_size=64, shuffle=True,
                                             num_workers=args.workers, **zc.loader_kwargs(args))
        epochs, digest = zc.run_epochs(args, lambda e: loader)
        zc.emit("hf_datasets", args, epochs, digest, data, ("datasets", "pyarrow"))


if __name__ == "__main__":
    main()
