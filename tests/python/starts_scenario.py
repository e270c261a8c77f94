# SPDX-License-Identifier: MIT
"""A training job that builds its evaluation loader again at every evaluation (test_starts.py).

    python3 starts_scenario.py OUT_DIR [--steps 16] [--every 4] [--epochs 2] [--workers 2]
        [--no-eval] [--method fork]

The training loader is made once (persistent_workers=False: its workers start each epoch); every
`--every` training steps `evaluate()` makes a new evaluation loader with `--workers` workers and
reads it whole. Prints one JSON line: the loaders made and the lines that made and iterated them
(the test finds them in lotus-tool's output).
"""

import argparse
import json
import os

import torch
from torch.utils.data import DataLoader, Dataset


class Numbers(Dataset):
    def __init__(self, n, log_file):
        self.n = n
        self.log_file = log_file

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return torch.full((4,), float(i))


LINES = {}


def here(key):
    """Notes the line after the caller's (the statement the test looks for)."""
    import sys
    LINES[key] = sys._getframe(1).f_lineno + 1


def evaluate(ds, workers, kw):
    here("eval_made")
    loader = DataLoader(ds, batch_size=4, num_workers=workers, **kw)
    total = 0.0
    here("eval_iter")
    for b in loader:
        total += float(b.sum())
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--every", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--no-eval", action="store_true")
    ap.add_argument("--method", default="fork")
    a = ap.parse_args()

    os.makedirs(a.out, exist_ok=True)
    log = os.path.join(a.out, "lotustrace_log")
    import lotus.torch
    lotus.torch.instrument(log_file=log)
    import multiprocessing
    kw = {"multiprocessing_context": multiprocessing.get_context(a.method)}
    train_ds = Numbers(a.steps * 4, log)
    eval_ds = Numbers(16, log)
    here("train_made")
    train = DataLoader(train_ds, batch_size=4, num_workers=a.workers, **kw)
    evals = 0
    for _ in range(a.epochs):
        here("train_iter")
        for step, _batch in enumerate(train):
            if not a.no_eval and (step + 1) % a.every == 0:
                evaluate(eval_ds, a.workers, kw)
                evals += 1
    print(json.dumps({"eval_loaders": evals, "train_loaders": 1, "train_epochs": a.epochs,
                      "file": os.path.abspath(__file__), "lines": LINES}))


if __name__ == "__main__":
    main()
