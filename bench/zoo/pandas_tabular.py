# SPDX-License-Identifier: MIT
"""A pandas tabular pipeline: a Parquet file of 32 row groups (pyarrow), a map-style dataset whose
item is one row group read into a DataFrame and feature-engineered with pandas (standardised
numbers, one-hot categories, a date's parts), behind a torch DataLoader (batch_size=None); each
worker opens its own pyarrow.parquet.ParquetFile in the loader's worker_init_fn. Where pyarrow is
not installed (Debian's stack) the same table is 32 CSV chunks read by pandas.read_csv.
Data: 32 x 1000 rows, 24 columns (about 3 MB as Parquet, 13 MB as CSV)."""

import os

import numpy as np
import pandas as pd
import torch

import zoo_common as zc

try:
    import pyarrow.parquet as pq
except ImportError:
    pq = None

GROUPS, ROWS = 32, 1000
NUM = [f"n{i}" for i in range(20)]


def make(root, groups=GROUPS):
    rng = np.random.default_rng(0)
    frames = []
    for g in range(groups):
        df = pd.DataFrame(rng.standard_normal((ROWS, len(NUM))) * 3 + 1, columns=NUM)
        df["cat"] = rng.choice(["a", "b", "c", "d", "e", "f"], ROWS)
        df["when"] = pd.Timestamp("2026-01-01") + pd.to_timedelta(rng.integers(0, 365 * 86400, ROWS), "s")
        df["text"] = [f"item-{v}" for v in rng.integers(0, 10**6, ROWS)]
        df["label"] = rng.integers(0, 2, ROWS)
        frames.append(df)
    if pq is not None:
        import pyarrow as pa
        with pq.ParquetWriter(os.path.join(root, "table.parquet"),
                              pa.Schema.from_pandas(frames[0], preserve_index=False)) as w:
            for df in frames:
                w.write_table(pa.Table.from_pandas(df, preserve_index=False))
    else:
        for g, df in enumerate(frames):
            df.to_csv(os.path.join(root, f"chunk_{g:03d}.csv"), index=False)


class RowGroups(torch.utils.data.Dataset):
    def __init__(self, root, groups=GROUPS):
        self.root = root
        self.groups = groups
        self.file = None  # opened per worker (worker_init_fn) or on first use

    def open(self):
        if pq is not None:
            self.file = pq.ParquetFile(os.path.join(self.root, "table.parquet"))

    def __len__(self):
        return self.groups

    def read(self, g):
        if pq is not None:
            if self.file is None:
                self.open()
            return self.file.read_row_group(g).to_pandas()
        return pd.read_csv(os.path.join(self.root, f"chunk_{g:03d}.csv"), parse_dates=["when"])

    def __getitem__(self, g):
        df = self.read(g)
        num = (df[NUM] - df[NUM].mean()) / df[NUM].std()
        cats = pd.get_dummies(df["cat"], dtype=np.float32).reindex(
            columns=list("abcdef"), fill_value=0.0)
        when = pd.DataFrame({"month": df["when"].dt.month, "dow": df["when"].dt.day_of_week,
                             "hour": df["when"].dt.hour}).astype(np.float32)
        textlen = df["text"].str.len().astype(np.float32)
        x = np.concatenate([num.to_numpy(np.float32), cats.to_numpy(np.float32),
                            when.to_numpy(), textlen.to_numpy()[:, None]], axis=1)
        return torch.from_numpy(x), torch.from_numpy(df["label"].to_numpy())


def worker_init(worker_id):
    torch.utils.data.get_worker_info().dataset.open()


def main():
    args = zc.parse(__doc__.splitlines()[0], scalable=True)
    zc.start(args)
    n = zc.scaled(args, GROUPS)
    data = zc.Data(args, zc.tag(args, f"pandas_tabular-{GROUPS}-{ROWS}-{'parquet' if pq else 'csv'}"),
                   lambda r: make(r, n))
    with data as root:
        torch.manual_seed(args.seed)
        loader = torch.utils.data.DataLoader(RowGroups(root, n), batch_size=None, shuffle=True,
                                             num_workers=args.workers, worker_init_fn=worker_init,
                                             **zc.loader_kwargs(args))
        epochs, digest = zc.run_epochs(args, lambda e: loader)
        zc.emit("pandas_tabular", args, epochs, digest, data, ("pandas", "pyarrow", "numpy"),
                {"format": "parquet" if pq else "csv"})


if __name__ == "__main__":
    main()
