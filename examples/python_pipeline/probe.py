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

--images DIR (every .jpg/.jpeg under it, sorted; ImageFolder class subdirectories included) or
--images LIST (one path per line, relative to the list's directory) runs the ops on the real
run's images instead, one per iteration in turn (--sample N: N of them, evenly spaced), so the
decode paths the mapping sees are the run's (examples/probes/README.md).
"""
import argparse
import os
import shutil
import sys
import tempfile


def image_paths(spec, sample=0):
    """The run's images from a directory or a list file, sorted, `sample` of them evenly spaced."""
    paths = []
    if os.path.isdir(spec):
        for root, _dirs, files in os.walk(spec):
            paths += [os.path.join(root, f) for f in files
                      if os.path.splitext(f)[1].lower() in (".jpg", ".jpeg")]
        if not paths:
            raise ValueError("no .jpg/.jpeg files under %s" % spec)
    elif os.path.isfile(spec):
        base = os.path.dirname(spec)
        with open(spec, encoding="utf-8", errors="surrogateescape") as f:
            for n, line in enumerate(f, 1):
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                path = line if os.path.isabs(line) else os.path.join(base, line)
                if not os.path.isfile(path):
                    raise ValueError("%s:%d: no such file %s" % (spec, n, path))
                paths.append(path)
        if not paths:
            raise ValueError("the list %s names no image" % spec)
    else:
        raise ValueError("--images %s: not a directory or a list file" % spec)
    paths.sort()
    k = sample if 0 < sample < len(paths) else len(paths)
    return [paths[i * len(paths) // k] for i in range(k)]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--image", help="JPEG to use (default: a generated one)")
    p.add_argument("--images", help="the run's JPEGs: a directory or a list file")
    p.add_argument("--sample", type=int, default=0, help="with --images: N of them")
    p.add_argument("--size", type=int, default=1024, help="side of the generated image")
    p.add_argument("--iterations", type=int, default=21)
    p.add_argument("--batch", type=int, default=8, help="samples collated by Collation")
    a = p.parse_args(argv)
    if a.iterations < 1 or a.size < 32 or a.batch < 1 or a.sample < 0:
        p.error("--iterations, --batch >= 1, --size >= 32 and --sample >= 0")
    if a.images and a.image:
        p.error("--image and --images exclude each other")
    if a.sample and not a.images:
        p.error("--sample needs --images")
    paths = None
    if a.images:
        try:
            paths = image_paths(a.images, a.sample)
        except (OSError, ValueError) as e:
            print("probe.py: %s" % e, file=sys.stderr)
            return 1

    from PIL import Image
    import torch

    torch.set_num_threads(1)  # as in a DataLoader worker
    path = a.image
    tmp = None  # the generated image's directory, removed on the way out
    if paths is None and path is None:
        tmp = tempfile.mkdtemp(prefix="lotus_probe_")
        path = os.path.join(tmp, "image.jpg")
    try:
        if tmp is not None:
            Image.effect_noise((a.size, a.size), 60).convert("RGB").save(path, quality=90)
        run_ops(a, paths, path)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


def run_ops(a, paths, path):
    import lotus
    from torch.utils.data import default_collate
    from torchvision import transforms as T
    from torchvision.datasets.folder import pil_loader

    rrc, flip = T.RandomResizedCrop(224), T.RandomHorizontalFlip(p=1.0)
    to_tensor = T.ToTensor()
    normalize = T.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
    for i in range(a.iterations):
        if paths is not None:
            path = paths[i % len(paths)]
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


if __name__ == "__main__":
    sys.exit(main())
