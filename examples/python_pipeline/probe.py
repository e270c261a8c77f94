#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""LotusMap probe: the ops of the image pipeline as torchvision runs them, one lotus.map_region each.

    lotus-tool map --collector perf --count 20 --freq 20000 -o mapping_funcs.json -- /usr/bin/python3 probe.py
    lotus-tool map --collector callgrind -o mapping_funcs.json -- /usr/bin/python3 probe.py

Each op runs --iterations times (default 21) on a generated 10-megapixel-class JPEG (Lotus's
LotusMap probes use one large image); lotus-tool selects one region per run through LOTUS_MAP_SELECT,
and the collector records only the selected executions. Ops: Loader (PIL open + convert, as
torchvision's default loader), RandomResizedCrop, RandomHorizontalFlip (p=1, so the flip always
runs), ToTensor, Normalize, Collation (default_collate of a batch).
"""
import argparse
import os
import sys
import tempfile


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--image", help="JPEG to use (default: a generated one)")
    p.add_argument("--size", type=int, default=1024, help="side of the generated image")
    p.add_argument("--iterations", type=int, default=21)
    p.add_argument("--batch", type=int, default=8, help="samples collated by Collation")
    a = p.parse_args(argv)
    if a.iterations < 1 or a.size < 32 or a.batch < 1:
        p.error("--iterations, --batch >= 1 and --size >= 32")

    from PIL import Image
    import torch
    from torch.utils.data import default_collate
    from torchvision import transforms as T
    from torchvision.datasets.folder import pil_loader
    import lotus

    torch.set_num_threads(1)  # as in a DataLoader worker
    path = a.image
    if path is None:
        path = os.path.join(tempfile.mkdtemp(prefix="lotus_probe_"), "image.jpg")
        Image.effect_noise((a.size, a.size), 60).convert("RGB").save(path, quality=90)
    rrc, flip = T.RandomResizedCrop(224), T.RandomHorizontalFlip(p=1.0)
    to_tensor = T.ToTensor()
    normalize = T.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
    for _ in range(a.iterations):
        with lotus.map_region("Loader"):
            img = pil_loader(path)
        with lotus.map_region("RandomResizedCrop"):
            img = rrc(img)
        with lotus.map_region("RandomHorizontalFlip"):
            img = flip(img)
        with lotus.map_region("ToTensor"):
            x = to_tensor(img)
        with lotus.map_region("Normalize"):
            x = normalize(x)
        batch = [(x, 0)] * a.batch
        with lotus.map_region("Collation"):
            default_collate(batch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
