#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""What lotus costs an epoch of the example pipeline's loader, part by part, in one process.

    PYTHONPATH=<build>/python /usr/bin/python3 bench/python/epoch_ablation.py [--epochs 90]
        [--images 512] [--workers 2] [--out DIR] [--modes none,full,workers-off]

One process builds the example pipeline's dataset and loader (examples/python_pipeline: ImageFolder
over generated JPEGs, four torchvision transforms, fork workers) and runs its epochs with lotus in
one of these modes, taking them in turn (each mode follows every other equally often):

* none: `lotus.torch.uninstrument()` and tracing off (`lotus.configure(enabled=False)`);
* full: traced as `lotus.torch.instrument()` traces it (workers' ops and batches, the consumer's
  waits), the trace in OUT;
* workers-off: traced, but each worker turns tracing off in its `worker_init_fn` (the wrappers stay
  installed; the workers' runtime records nothing): what the workers' tracing costs, against full;
* no-resources: traced with `resources=False` (no per-batch figures, no memory readings).

Then the parts of a worker's tracing, timed one by one in this process: a fetch of 16 samples of
the same ImageFolder (its JPEG loader replaced by a constant, its transforms by four no-op steps:
the wrappers' own cost) with lotus's wrappers and without, and, in forked children of this
process, a child's first record, 3,500 more (a worker's in an epoch) and its flush; and the
wrappers where a worker runs them, between JPEG decodes: 256 samples of the real dataset read in
this process (`dataset[i]`), tracing with its wrappers on and off by turns (--cold-reps times).

Per mode: the median over its epochs (the first round of modes not counted) of the epoch's wall
time and of the CPU time of its workers (`RUSAGE_CHILDREN`: each epoch's workers are reaped when
its iterator ends), and the difference from the first mode. Epochs in one process share the
machine's state, so the differences are steadier than whole runs' (this VM's whole runs drift by
±3 %); they are still noisy at a few ms: take 90 epochs or more.
"""
import argparse
import os
import pathlib
import resource
import statistics
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "python_pipeline"))
import pipeline  # noqa: E402  (make_dataset: the example's JPEGs)

MODES = ("none", "full", "workers-off", "no-resources")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=90)
    ap.add_argument("--images", type=int, default=512)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", help="directory for the JPEGs and the trace (default: a temporary one)")
    ap.add_argument("--cold-reps", type=int, default=45,
                    help="repetitions of 256 real samples, traced and not by turns (0: skip)")
    ap.add_argument("--modes", default="none,full,workers-off",
                    help=f"comma-separated, the first is the reference (of {', '.join(MODES)})")
    a = ap.parse_args()
    modes = a.modes.split(",")
    bad = [m for m in modes if m not in MODES]
    if bad or len(modes) < 2 or len(set(modes)) != len(modes):
        ap.error(f"--modes: two or more of {', '.join(MODES)}, each once (not {a.modes!r})")
    if a.epochs < 2 * len(modes) or a.images < 1 or a.workers < 1 or a.cold_reps < 0:
        ap.error("--epochs must be at least twice the modes, --images and --workers at least 1, "
                 "--cold-reps at least 0")
    tmp = None
    if a.out is None:
        tmp = tempfile.TemporaryDirectory(prefix="lotus-epoch-ablation-")
        out = pathlib.Path(tmp.name)
    else:
        out = pathlib.Path(a.out)
    try:
        run(a, modes, out)
    finally:
        if tmp is not None:
            tmp.cleanup()


def run(a, modes, out):
    import lotus
    import lotus.torch
    trace = str(out / "trace" / "lotustrace_log")
    pipeline.make_dataset(str(out / "data"), a.images, 42)
    lotus.torch.instrument(log_file=trace)
    import torch
    from torchvision import datasets, transforms
    torch.manual_seed(42)
    dataset = datasets.ImageFolder(str(out / "data"), transforms.Compose([
        transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(), transforms.ToTensor(),
        transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])]))

    def workers_off(_worker_id):
        lotus.configure(enabled=False)

    def set_mode(m):
        tracing(trace if m != "none" else None, resources=m != "no-resources")

    def children_cpu():
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        return r.ru_utime + r.ru_stime

    got = {m: [] for m in modes}
    for ep in range(a.epochs):
        m = modes[(ep + ep // len(modes)) % len(modes)]  # each mode after every other alike
        set_mode(m)
        loader = torch.utils.data.DataLoader(
            dataset, batch_size=16, shuffle=True, num_workers=a.workers,
            worker_init_fn=workers_off if m == "workers-off" else None)
        c0, t0 = children_cpu(), time.perf_counter()
        for _ in loader:
            pass
        del loader  # its workers are joined (and reaped) when the iterator ends
        t1, c1 = time.perf_counter(), children_cpu()
        if ep >= len(modes):
            got[m].append((t1 - t0, c1 - c0))
    lotus.torch.uninstrument()
    ref = modes[0]
    med = {m: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v))
           for m, v in got.items()}
    print(f"examples/python_pipeline's loader: {a.images} JPEGs, {a.workers} fork workers, "
          f"{a.epochs} epochs in one process, modes in turn; medians per epoch\n")
    print(f"| mode | epochs | wall (ms) | vs {ref} | workers' CPU (ms) | vs {ref} |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for m in modes:
        w, c = med[m]
        print(f"| {m} | {len(got[m])} | {w * 1e3:.1f} | {(w - med[ref][0]) * 1e3:+.1f} | "
              f"{c * 1e3:.1f} | {(c - med[ref][1]) * 1e3:+.1f} |")
    parts(str(out / "data"), trace)
    if a.cold_reps:
        cold(dataset, trace, a.cold_reps, min(256, a.images))


def parts(dataset_root, trace):
    """The parts of a worker's tracing, timed one by one (medians)."""
    import timeit

    import lotus
    import lotus.torch
    import torch
    from lotus import _lotus
    from lotus.loaders import dataloader
    from torch.utils.data._utils.collate import default_collate
    from torch.utils.data._utils.fetch import _MapDatasetFetcher
    from torchvision import datasets, transforms

    class Step:
        def __call__(self, x):
            return x

    lotus.configure(trace)
    tiny = datasets.ImageFolder(dataset_root, transforms.Compose([Step() for _ in range(4)]),
                                loader=lambda _path: torch.zeros(1))
    indices = list(range(16))

    def fetch_us():
        f = _MapDatasetFetcher(tiny, True, default_collate, False)
        dataloader._worker_batch = 0  # as in a worker, where the batch index is known
        return statistics.median(timeit.repeat(lambda: f.fetch(indices), number=300, repeat=7)) \
            / 300 * 1e6

    lotus.torch.instrument()
    on = fetch_us()
    lotus.torch.uninstrument()
    off = fetch_us()
    dataloader._worker_batch = None
    r, w = os.pipe()
    got = []
    for _ in range(15):
        pid = os.fork()
        if pid == 0:  # a worker's tracing: its first record, an epoch's records, its flush
            t0 = time.perf_counter_ns()
            t = _lotus._now()
            _lotus._record("First", t, t + 1)
            t1 = time.perf_counter_ns()
            for _ in range(3500):
                t = _lotus._now()
                _lotus._record("Step", t, t + 1)
            t2 = time.perf_counter_ns()
            lotus.flush()
            t3 = time.perf_counter_ns()
            os.write(w, b"%d %d %d\n" % (t1 - t0, t2 - t1, t3 - t2))
            os._exit(0)
        os.waitpid(pid, 0)
        got.append([int(x) for x in os.read(r, 100).split()])
    os.close(r)
    os.close(w)
    first, many, flush = (statistics.median(x[i] for x in got) / 1e3 for i in range(3))
    print(f"\nparts of a worker's tracing: a fetch of 16 samples {on:.1f} us with the wrappers, "
          f"{off:.1f} us without ({(on - off) / 16:.2f} us a sample); in a forked child, its first "
          f"record {first:.0f} us, 3,500 more {many:.0f} us, its flush {flush:.0f} us")


def tracing(trace, resources=True):
    """Traced into `trace` with lotus.torch's wrappers (None: untraced, the wrappers removed)."""
    import lotus
    import lotus.torch
    if trace is None:
        lotus.torch.uninstrument()
        lotus.configure(enabled=False)
    else:
        lotus.configure(trace, resources=resources)
        lotus.torch.instrument()


def cold(dataset, trace, reps, n):
    """The wrappers' cost per sample between real decodes: CPU time of n `dataset[i]`, tracing
    with its wrappers on and off by turns (medians over the repetitions of each)."""
    import lotus.torch
    got = {True: [], False: []}
    for rep in range(reps + 2):
        on = rep % 2 == 0
        tracing(trace if on else None)
        t0 = time.process_time()
        for i in range(n):
            dataset[i]
        if rep >= 2:
            got[on].append(time.process_time() - t0)
    lotus.torch.uninstrument()
    on, off = (statistics.median(got[k]) for k in (True, False))
    print(f"the wrappers between real decodes: {n} samples {on * 1e3:.1f} ms traced, "
          f"{off * 1e3:.1f} ms not ({(on - off) / n * 1e6:.1f} us a sample; {reps} repetitions)")


if __name__ == "__main__":
    main()
