#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The Lotus image-classification pipeline on stock PyTorch/torchvision, traced by lotus.torch.

torchvision ImageFolder over generated JPEGs, RandomResizedCrop(224), RandomHorizontalFlip, ToTensor,
Normalize; a DataLoader with 2 worker processes; 2 epochs. The trace (Lotus's format) goes to
OUT/trace/lotustrace_log_{worker,main}_pid_<pid>; read it with lotus-tool (see run.sh).

    PYTHONPATH=<build>/python /usr/bin/python3 examples/python_pipeline/pipeline.py --out run1
"""
import argparse
import os
import random
import resource
import sys
import time


def make_dataset(root, images, seed, classes=4):
    """JPEGs of varied sizes with some structure (gradients + noise), made once and reused."""
    from PIL import Image, ImageDraw
    done = os.path.join(root, ".complete")
    if os.path.exists(done) and open(done).read() == f"{images} {seed}":
        return
    rng = random.Random(seed)
    for i in range(images):
        cls = os.path.join(root, f"class{i % classes}")
        os.makedirs(cls, exist_ok=True)
        w, h = rng.randint(160, 512), rng.randint(160, 512)
        img = Image.effect_noise((w, h), rng.randint(20, 80)).convert("RGB")
        draw = ImageDraw.Draw(img)
        for _ in range(8):
            x0, y0 = rng.randint(0, w - 1), rng.randint(0, h - 1)
            draw.ellipse([x0, y0, x0 + rng.randint(10, w), y0 + rng.randint(10, h)],
                         fill=tuple(rng.randint(0, 255) for _ in range(3)))
        img.save(os.path.join(cls, f"{i:05d}.jpg"), quality=90)
    with open(done, "w") as f:
        f.write(f"{images} {seed}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-o", "--out", default="python_pipeline_out", help="output directory")
    p.add_argument("-n", "--images", type=int, default=256, help="generated JPEGs")
    p.add_argument("-w", "--workers", type=int, default=2, help="DataLoader worker processes")
    p.add_argument("-e", "--epochs", type=int, default=2)
    p.add_argument("-b", "--batch-size", type=int, default=16)
    p.add_argument("-s", "--seed", type=int, default=42)
    p.add_argument("--context", choices=["fork", "spawn", "forkserver"], default=None,
                   help="worker start method (default: the platform's, fork on Linux)")
    p.add_argument("--no-trace", action="store_true", help="run without lotus")
    a = p.parse_args(argv)
    for name in ("images", "batch_size", "epochs"):
        if getattr(a, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if a.workers < 0:
        p.error("--workers must be >= 0")

    data = os.path.join(a.out, "data")
    make_dataset(data, a.images, a.seed)

    if not a.no_trace:
        import lotus.torch
        # LOTUS_LOG_FILE (set by `lotus-tool record`, for one) wins over the default prefix.
        default = os.path.join(a.out, "trace", "lotustrace_log")
        lotus.torch.instrument(log_file=None if os.environ.get("LOTUS_LOG_FILE") else default)

    import torch
    from torchvision import datasets, transforms
    torch.manual_seed(a.seed)
    dataset = datasets.ImageFolder(data, transforms.Compose([
        transforms.RandomResizedCrop(224),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
    ]))
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=a.batch_size, shuffle=True, num_workers=a.workers,
        multiprocessing_context=a.context if a.workers else None)

    def cpu():  # this process and its reaped children (the workers of finished epochs)
        me = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime

    c0 = cpu()
    t0 = time.perf_counter()
    batches = 0
    for _ in range(a.epochs):
        for images, labels in loader:
            batches += 1
    elapsed = time.perf_counter() - t0
    del loader  # workers of the last epoch are joined when its iterator ends
    print(f"{batches} batches, {a.epochs} epoch(s), {elapsed:.3f} s, loop CPU {cpu() - c0:.3f} s")
    if not a.no_trace:
        import lotus
        lotus.flush()
        print(f"{lotus.stats().written} records written by the main process")
    return 0


if __name__ == "__main__":
    sys.exit(main())
