# SPDX-License-Identifier: MIT
"""Lightning: a LightningDataModule (prepare_data writes .npy shards, setup memory-maps them,
train_dataloader returns a DataLoader with the module's workers) under Trainer.fit with a tiny
model on the CPU (limit_train_batches, no checkpoints, no logger). The epoch is timed by a Callback
from iter() (the first epoch: Lightning makes the iterator, and fetches a batch, right after calling
train_dataloader(); later ones: at the epoch's start) to its end; time to first batch from there
to the first on_train_batch_start, the wait from each step's end
(on_train_batch_end) to the next batch's start (Lightning's fetch, and its own few steps).
Data: 4096 rows of 16x16x3 uint8 images and labels as .npy (about 3 MB)."""

import gc
import os
import time

import lightning as L
import numpy as np
import torch

import zoo_common as zc

ROWS = 4096


class ArrayDataset(torch.utils.data.Dataset):
    def __init__(self, root):
        self.x = np.load(os.path.join(root, "x.npy"), mmap_mode="r")
        self.y = np.load(os.path.join(root, "y.npy"), mmap_mode="r")

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        img = torch.from_numpy(np.array(self.x[i], dtype=np.float32)).permute(2, 0, 1) / 255.0
        img = torch.nn.functional.interpolate(img[None], size=(32, 32), mode="bilinear")[0]
        if torch.rand(()) < 0.5:
            img = img.flip(-1)
        return (img - 0.5) / 0.25, int(self.y[i])


class ZooData(L.LightningDataModule):
    def __init__(self, root, workers, batch_size=64, gc_freeze=False, **loader_kwargs):
        super().__init__()
        self.root, self.workers, self.batch_size = root, workers, batch_size
        self.gc_freeze = gc_freeze
        self.loader_kwargs = loader_kwargs

    def prepare_data(self):
        if not os.path.exists(os.path.join(self.root, "y.npy")):
            rng = np.random.default_rng(0)
            np.save(os.path.join(self.root, "x.npy"),
                    rng.integers(0, 256, (ROWS, 16, 16, 3), dtype=np.uint8))
            np.save(os.path.join(self.root, "y.npy"), rng.integers(0, 10, ROWS))

    def setup(self, stage):
        self.train = ArrayDataset(self.root)

    def train_dataloader(self):
        if self.gc_freeze:  # --gc-freeze: just before epoch 0's iter() (Timer: the later ones)
            gc.freeze()
        self.made_at = time.perf_counter()  # Lightning calls iter() on it right after (epoch 0)
        return torch.utils.data.DataLoader(self.train, batch_size=self.batch_size, shuffle=True,
                                           num_workers=self.workers, **self.loader_kwargs)


class TinyNet(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, stride=2), torch.nn.ReLU(),
                                       torch.nn.AdaptiveAvgPool2d(4), torch.nn.Flatten(),
                                       torch.nn.Linear(128, 10))

    def training_step(self, batch, _):
        x, y = batch
        return torch.nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


class Timer(L.Callback):
    def __init__(self, digest, gc_freeze=False):
        self.epochs, self.digest, self.gc_freeze = [], digest, gc_freeze

    def on_train_epoch_start(self, trainer, module):
        # Epoch 0: Lightning made the iterator (and fetched its first batch) in setup_data, right
        # after train_dataloader(); later epochs: in the epoch loop, after this hook.
        if self.gc_freeze and trainer.current_epoch > 0:  # (before this epoch's iter())
            gc.freeze()
        now = time.perf_counter()
        made = getattr(trainer.datamodule, "made_at", None)
        self.t0 = made if trainer.current_epoch == 0 and made else now
        self.first = self.last = self.end = None
        self.n, self.wait = 0, 0.0

    def on_train_batch_start(self, trainer, module, batch, idx):
        now = time.perf_counter()
        self.wait += now - (self.end or self.t0)  # the loop's time from the last step to this batch
        if self.first is None:
            zc.sample_workers_soon()  # the tree's memory with this epoch's workers in it
        self.first = self.first or now
        self.last = now
        self.n += 1
        self.digest.add(batch)

    def on_train_batch_end(self, trainer, module, outputs, batch, idx):
        self.end = time.perf_counter()

    def on_train_epoch_end(self, trainer, module):
        t1 = time.perf_counter()
        self.epochs.append({"ttfb_s": round(self.first - self.t0, 6),
                            "main_full_gc": zc.main_full_gc(self.t0, self.first),
                            "to_last_s": round(self.last - self.t0, 6),
                            "epoch_s": round(t1 - self.t0, 6), "wait_s": round(self.wait, 6),
                            "batches": self.n})


def main():
    args = zc.parse(__doc__.splitlines()[0])
    zc.start(args)
    data = zc.Data(args, f"lightning_dm-{ROWS}", lambda r: ZooData(r, 0).prepare_data())
    with data as root:
        L.seed_everything(args.seed, verbose=False)
        timer = Timer(zc.Digest(), args.gc_freeze)
        trainer = L.Trainer(max_epochs=args.epochs, accelerator="cpu", devices=1,
                            limit_train_batches=24, logger=False, enable_checkpointing=False,
                            enable_progress_bar=False, enable_model_summary=False,
                            num_sanity_val_steps=0, callbacks=[timer])
        trainer.fit(TinyNet(), datamodule=ZooData(root, args.workers, gc_freeze=args.gc_freeze,
                                                  **zc.loader_kwargs(args)))
        args.gc_frozen = args.gc_freeze
        zc.emit("lightning_dm", args, timer.epochs, timer.digest.hexdigest(), data,
                ("lightning", "numpy"))


if __name__ == "__main__":
    main()
