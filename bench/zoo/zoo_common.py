# SPDX-License-Identifier: MIT
"""What every zoo driver shares: its arguments, lotus's switch, the timed epochs, the JSON line.

A driver (bench/zoo/<name>.py) generates its data, builds its pipeline with the library's own API and
hands `run_epochs` an iterable per epoch. The command line of every driver:

    python3 bench/zoo/<name>.py [--workers 2] [--start-method fork] [--epochs 2]
        [--data DIR] [--trace DIR] [--seed 0] [--scale 1]

--data keeps the generated data in DIR (made when missing, reused when its marker says the same
size): reruns skip the generation; without it a temporary folder is used and removed. --trace DIR
(or LOTUS_ZOO_TRACE=DIR) turns lotus on the way a user does: `lotus.torch.instrument()` with the
prefix DIR/lotustrace_log, before the pipeline is built. The last line of stdout is one JSON object:
per epoch `ttfb_s` (iter() to the first batch), `to_last_s` (iter() to the last batch: what
lotus-tool calls the epoch), `epoch_s` (to the loop's end: shutdown included), `wait_s` (the loop
blocked in iter() and next()), `batches`, `main_full_gc` (the main process's full garbage
collections that began between iter() and the first batch: [seconds after iter(), ms] each);
`peak_pss_bytes`, the process tree's largest summed Pss
(sampled every 250 ms, the run's start to its end); `digest`, a checksum of what the loop received (the same seed and
setting give the same digest, traced or not).

--autotune iterates lotus.torch.autotune(loader) in the loader's place (each epoch's
(num_workers, prefetch_factor) as `setting` in the JSON; lotus's package importable). --gc-freeze
calls gc.freeze() before each epoch's iter() (what a user adds to keep fork workers
from collecting, and so copying, the main process's objects). --prefetch-factor N and --unordered
reach the DataLoader where the driver builds it (`loader_kwargs`
in the JSON: null where the library builds its loader and cannot be given them). --scale K
(the drivers whose data has a size to scale: the six map-style ones) generates K times the data,
so each epoch has K times the batches; the marker names the scale.
"""

import argparse
import gc
import hashlib
import json
import multiprocessing
import os
import shutil
import sys
import tempfile
import time


def parse(description, extra=None, scalable=False):
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--start-method", default="fork", choices=["fork", "spawn", "forkserver"])
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--data", help="keep the generated data here (reused when present)")
    ap.add_argument("--trace", default=os.environ.get("LOTUS_ZOO_TRACE"),
                    help="trace with lotus into this directory (also LOTUS_ZOO_TRACE)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scale", type=int, default=1,
                    help="generate K times the driver's data (a longer epoch, the same pipeline: "
                         "autotune_truth's epochs long enough for 10 %% to stand above the noise)")
    ap.add_argument("--prefetch-factor", type=int,
                    help="DataLoader(prefetch_factor=), where the driver builds the DataLoader")
    ap.add_argument("--unordered", action="store_true",
                    help="DataLoader(in_order=False) (torch 2.6+), where the driver builds it")
    ap.add_argument("--autotune", action="store_true",
                    help="iterate lotus.torch.autotune(loader) instead of the loader (a map-style "
                         "DataLoader): each epoch's setting in the JSON")
    ap.add_argument("--gc-freeze", action="store_true",
                    help="gc.freeze() just before each epoch's iter(): fork workers then never "
                         "collect (and so never copy) the objects the main process holds")
    if extra:
        extra(ap)
    args = ap.parse_args()
    if not 1 <= args.scale <= 8:
        ap.error("--scale must be 1 to 8")
    if args.scale != 1 and not scalable:
        ap.error("--scale: this driver's data has one size")
    return args


def scaled(args, n):
    """n items of the driver's data, times --scale."""
    return n * args.scale


def tag(args, base):
    """The data marker's tag: the driver's own, with the scale where it is not 1 (so data made at
    one scale is never read as another's)."""
    return base if args.scale == 1 else f"{base}-x{args.scale}"


class Data:
    """The generated data's folder: `with Data(args, "tag", make) as root:`; make(root) writes it."""

    def __init__(self, args, tag, make):
        self.args, self.tag, self.make = args, tag, make
        self.tmp = None
        self.gen_s = 0.0
        self.bytes = 0

    def __enter__(self):
        if self.args.data:
            root = os.path.abspath(self.args.data)
        else:
            self.tmp = tempfile.mkdtemp(prefix="lotus-zoo-")
            root = self.tmp
        marker = os.path.join(root, ".zoo-data")
        if not (os.path.exists(marker) and open(marker).read() == self.tag):
            if os.path.isdir(root):
                shutil.rmtree(root)
            os.makedirs(root)
            t0 = time.perf_counter()
            self.make(root)
            self.gen_s = time.perf_counter() - t0
            with open(marker, "w") as f:
                f.write(self.tag)
        for d, _, files in os.walk(root):
            self.bytes += sum(os.path.getsize(os.path.join(d, f)) for f in files)
        if self.bytes > 50 * 1024 * 1024:
            sys.exit(f"zoo: generated data is {self.bytes} bytes, over the 50 MB bound")
        self.root = root
        return root

    def __exit__(self, *exc):
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)
        return False


def _pss_bytes(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _children(pid):
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        pass
    return out


class TreePss:
    """The job's memory as lotus-tool's model predicts it: the process tree's summed Pss (this
    process and every descendant: workers, multiprocessing's helpers), sampled every 250 ms in a
    thread (a read of smaps_rollup walks a torch process's ~2000 mappings: a few ms), its peak.
    soon() moves the next sample to 50 ms from now (run_epochs, once an epoch's workers started;
    sample_workers_soon(), at a self-timed epoch's first batch): an epoch shorter than the cadence
    still has its workers in a sample."""

    def __init__(self, interval=0.25):
        import threading
        self.peak = 0
        self.samples = 0
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._interval = interval
        self._next = time.monotonic() + interval
        self._thread = threading.Thread(target=self._run, name="zoo-pss", daemon=True)
        self._thread.start()

    def sample(self):
        todo, total, seen = [os.getpid()], 0, set()
        while todo:
            pid = todo.pop()
            if pid in seen:
                continue
            seen.add(pid)
            total += _pss_bytes(pid)
            todo += _children(pid)
        self.peak = max(self.peak, total)
        self.samples += 1

    def soon(self, delay=0.05):
        with self._lock:
            self._next = min(self._next, time.monotonic() + delay)
        self._wake.set()

    def _run(self):
        while not self._stop.is_set():
            with self._lock:
                left = self._next - time.monotonic()
            if left > 0:
                self._wake.wait(left)
                self._wake.clear()
                continue
            if self._stop.is_set():
                break
            self.sample()
            with self._lock:
                self._next = time.monotonic() + self._interval

    def stop(self):
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=5)
        return self.peak


_TREE = []


class MainFullGC:
    """The main process's full (generation-2) garbage collections, each timed (gc.callbacks):
    whether one ran inside an epoch's start, between iter() and the first batch. Such a pass over
    the main process's heap (0.15-0.25 s with torch imported) is in that start's time, and it comes
    where the collector's count says: a traced run allocates lotus's objects too, so its main
    process may run its collection earlier or later than the same program untraced (bench/zoo's
    nodes_pipeline on Python 3.11: the untraced one in iter(), 155-187 ms, the traced one before
    it). The callback keeps one small tuple a full collection: next to nothing of the count."""

    def __init__(self):
        import gc as _gc
        self.runs = []  # (start, end) perf_counter of each full collection
        self._t = None
        _gc.callbacks.append(self._cb)

    def _cb(self, phase, info):
        if info.get("generation") != 2:
            return
        if phase == "start":
            self._t = time.perf_counter()
        elif self._t is not None:
            self.runs.append((self._t, time.perf_counter()))
            self._t = None

    def between(self, t0, t1):
        """[[seconds from t0 to its start, its length in ms], ...]: those that began in [t0, t1]."""
        return [[round(a - t0, 4), round((b - a) * 1e3, 1)] for a, b in self.runs
                if t1 is not None and t0 <= a <= t1]


_MAIN_GC = []


def main_full_gc(t0, t1):
    """The main process's full collections that began between t0 and t1 (perf_counter): an
    epoch's `main_full_gc` (see MainFullGC); [] before start()."""
    return _MAIN_GC[-1].between(t0, t1) if _MAIN_GC else []


def sample_workers_soon():
    """A driver that times its own epochs (Lightning's callbacks, not run_epochs): call at an
    epoch's first batch, when its workers run, so that the tree's memory is sampled with them
    (a fork epoch of 0.2 s can start and end between two samples 250 ms apart)."""
    if _TREE:
        _TREE[-1].soon(0.01)


def start(args):
    """The start method, set as a user does (the default context every loader then uses), and
    lotus turned on when asked. Call in main, before the pipeline is built. The tree's memory is
    sampled from here to emit()."""
    _TREE.append(TreePss())
    _MAIN_GC.append(MainFullGC())
    multiprocessing.set_start_method(args.start_method, force=True)
    if args.trace:
        import lotus.torch
        os.makedirs(args.trace, exist_ok=True)
        lotus.torch.instrument(log_file=os.path.join(args.trace, "lotustrace_log"))


def loader_kwargs(args):
    """The DataLoader arguments of --prefetch-factor and --unordered (with workers only); the
    driver that passes them says so in its JSON (`loader_kwargs`)."""
    kw = {}
    if args.workers > 0 and args.prefetch_factor:
        kw["prefetch_factor"] = args.prefetch_factor
    if args.workers > 0 and args.unordered:
        kw["in_order"] = False
    args.applied = kw
    return kw


class Digest:
    """A cheap checksum of the batches the loop received: shapes, float64 sums, integer lists."""

    def __init__(self):
        self.h = hashlib.sha256()

    def add(self, obj):
        self.h.update(repr(self._fold(obj)).encode())

    def _fold(self, obj):
        try:
            import torch
            if isinstance(obj, torch.Tensor):
                if obj.is_floating_point():
                    return (tuple(obj.shape), round(float(obj.double().sum()), 3))
                return (tuple(obj.shape), obj.reshape(-1).tolist()[:4096])
        except ImportError:
            pass
        if isinstance(obj, dict):
            return tuple((k, self._fold(obj[k])) for k in sorted(obj))
        if isinstance(obj, (list, tuple)):
            return tuple(self._fold(x) for x in obj)
        if hasattr(obj, "shape") and hasattr(obj, "sum"):  # numpy
            return (tuple(obj.shape), round(float(obj.astype("float64").sum()), 3))
        return repr(obj)

    def hexdigest(self):
        return self.h.hexdigest()[:16]


def run_epochs(args, make_iterable, step=None, digest=None):
    """Run args.epochs epochs: make_iterable(epoch) returns what the loop iterates (a DataLoader
    itself: iter() is timed). step(batch) is the training step (default: the digest's fold)."""
    digest = digest or Digest()
    out = []
    tuned = None
    if getattr(args, "autotune", False):  # the loader tuned across the epochs, as a user does
        import lotus.torch
        tuned = lotus.torch.autotune(make_iterable(0), verbose=False)
    for e in range(args.epochs):
        iterable = tuned if tuned is not None else make_iterable(e)
        setting = list(tuned.setting) if tuned is not None else None
        if getattr(args, "gc_freeze", False):
            gc.freeze()
            args.gc_frozen = True
        t0 = time.perf_counter()
        it = iter(iterable)  # starts the workers: the loop waits for data here too
        if _TREE:
            _TREE[-1].soon()  # (a sample with the workers, however short the epoch)
        first = last = None
        wait = time.perf_counter() - t0
        n = 0
        while True:
            w0 = time.perf_counter()
            try:
                batch = next(it)
            except StopIteration:
                break
            now = time.perf_counter()
            wait += now - w0
            last = now
            if first is None:
                first = now
            n += 1
            if step:
                step(batch)
            digest.add(batch)
        del it
        t1 = time.perf_counter()
        out.append({"ttfb_s": round(first - t0, 6) if first else None,
                    "main_full_gc": main_full_gc(t0, first),
                    "to_last_s": round(last - t0, 6) if last else None,
                    "epoch_s": round(t1 - t0, 6), "wait_s": round(wait, 6), "batches": n})
        if setting is not None:
            out[-1]["setting"] = setting  # (num_workers, prefetch_factor) this epoch ran with
    return out, digest.hexdigest()


def versions(*modules):
    v = {"python": sys.version.split()[0]}
    for m in modules:
        try:
            v[m] = __import__(m).__version__
        except Exception:  # noqa: BLE001 - a version we cannot read is left out
            pass
    return v


def emit(name, args, epochs, digest, data, mods=(), extra=None):
    tree = _TREE.pop().stop() if _TREE else None
    rec = {"pipeline": name, "workers": args.workers, "start_method": args.start_method,
           "peak_pss_bytes": tree or None,
           "traced": bool(args.trace), "epochs": epochs, "digest": digest,
           "data_bytes": data.bytes, "gen_s": round(data.gen_s, 3),
           "loader_kwargs": getattr(args, "applied", None),
           "gc_frozen": getattr(args, "gc_frozen", False),
           "versions": versions("torch", *mods)}
    if extra:
        rec.update(extra)
    sys.stdout.flush()
    print(json.dumps(rec), flush=True)


def jpeg_bytes(i, size, quality=90):
    """The JPEG of generated image i: a colour gradient with a class-dependent stripe and noise."""
    import numpy as np
    from PIL import Image
    from io import BytesIO
    rng = np.random.default_rng(i)
    h, w = size
    y, x = np.mgrid[0:h, 0:w]
    img = np.stack([(x * 255 // w + i) % 256, (y * 255 // h) % 256,
                    ((x + y) * 3 + i * 7) % 256], -1).astype(np.int16)
    img += rng.integers(-20, 21, img.shape, dtype=np.int16)
    buf = BytesIO()
    Image.fromarray(img.clip(0, 255).astype(np.uint8)).save(buf, "JPEG", quality=quality)
    return buf.getvalue()


def make_image_folder(root, n, classes, size):
    """An ImageFolder tree: root/class_k/img_i.jpg, n images round-robin over the classes."""
    for c in range(classes):
        os.makedirs(os.path.join(root, f"class_{c}"), exist_ok=True)
    for i in range(n):
        with open(os.path.join(root, f"class_{i % classes}", f"img_{i:05d}.jpg"), "wb") as f:
            f.write(jpeg_bytes(i, size))
