# SPDX-License-Identifier: MIT
"""timm's create_dataset over a folder of JPEGs and create_loader's training pipeline (timm's
RandomResizedCropAndInterpolation, flip, ColorJitter 0.4, ToTensor, Normalize; its own
worker_init_fn and persistent workers, as timm's train.py gets them), on the CPU (no prefetcher).
Data: 256 generated 160x160 JPEGs in 4 class folders (about 3 MB)."""

import torch
import timm.data

import zoo_common as zc


def main():
    args = zc.parse(__doc__.splitlines()[0], scalable=True)
    zc.start(args)
    n = zc.scaled(args, 256)
    data = zc.Data(args, zc.tag(args, "timm_folder-256-160"),
                   lambda r: zc.make_image_folder(r, n, 4, (160, 160)))
    with data as root:
        torch.manual_seed(args.seed)
        ds = timm.data.create_dataset("", root=root, split="train", is_training=True)
        loader = timm.data.create_loader(
            ds, input_size=(3, 224, 224), batch_size=32, is_training=True, use_prefetcher=False,
            num_workers=args.workers, device=torch.device("cpu"))
        epochs, digest = zc.run_epochs(args, lambda e: loader)
        zc.emit("timm_folder", args, epochs, digest, data, ("timm",),
                {"persistent_workers": bool(loader.persistent_workers)})


if __name__ == "__main__":
    main()
