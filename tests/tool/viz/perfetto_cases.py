#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`lotus-tool viz -o X.pftrace` on real traces, each checked by perfetto_check.py (an independent
decoder, and protoc --decode with tools/lotus-tool/viz/perfetto_trace.proto): the C++ image pipeline
(threads and forked worker processes), a libtorch loader, a Python DataLoader traced by
lotus.torch, two ranks sharing one directory and the same two ranks in two directories, a
generated trace with out-of-order arrivals (also --compress), and the JSON output unchanged.

    perfetto_cases.py --tool T --proto P --image-pipeline B [--libtorch B] [--python-path D]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import perfetto_check  # noqa: E402

PY_RUN = """
import sys, torch, lotus.torch
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms as T
class AddOne:
    def __call__(self, x): return x + 1
class Seq(Dataset):
    def __init__(self): self.t = T.Compose([AddOne(), AddOne()])
    def __len__(self): return 24
    def __getitem__(self, i): return self.t(torch.tensor([float(i)]))
lotus.torch.instrument(log_file=sys.argv[1])
for epoch in range(2):
    for b in DataLoader(Seq(), batch_size=4, num_workers=2):
        pass
"""


def run(args, env=None):
    r = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, f"{args}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r


def case(name, a, dirs, compress=False):
    n, size, counters, flows = perfetto_check.check(a.tool, a.proto, dirs, compress)
    assert n > 0 and counters >= 3 and flows > 0, (name, n, counters, flows)
    print(f"{name}: {n} records = {n} slices, {size / n:.1f} bytes per record, {counters} "
          f"counter tracks, {flows} flows")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tool", required=True)
    p.add_argument("--proto", required=True)
    p.add_argument("--image-pipeline", required=True)
    p.add_argument("--libtorch")
    p.add_argument("--python-path")
    a = p.parse_args()
    tmp = tempfile.mkdtemp(prefix="lotus_perfetto_")
    try:
        env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE")}
        img = os.path.join(tmp, "img")
        run([a.image_pipeline, "--out", img, "--images", "48", "--workers", "2", "--batch-size", "8",
             "--epochs", "2", "--quiet"], env)
        case("image pipeline (threads)", a, [os.path.join(img, "trace")])
        procs = os.path.join(tmp, "procs")
        run([a.image_pipeline, "--out", procs, "--images", "32", "--workers", "2", "--batch-size",
             "8", "--mode", "processes", "--quiet"], env)
        case("image pipeline (processes)", a, [os.path.join(procs, "trace")])
        # Two ranks sharing one directory, and the same ranks in a directory each.
        apart = []
        for rank in (0, 1):
            d = os.path.join(tmp, f"rank{rank}")
            run([a.image_pipeline, "--out", d, "--images", "32", "--workers", "2",
                 "--batch-size", "8", "--mode", "processes", "--quiet"],
                dict(env, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2"))
            apart.append(os.path.join(d, "trace"))
        case("two ranks, two directories", a, apart)
        # The same files in one directory (one prefix for the job; names differ by pid).
        shared = os.path.join(tmp, "shared")
        os.mkdir(shared)
        for d in apart:
            for n in os.listdir(d):
                shutil.copy(os.path.join(d, n), os.path.join(shared, n))
        n, _, counters, _ = perfetto_check.check(a.tool, a.proto, [shared], False)
        assert counters == 6, f"two ranks in one directory: {counters} counter tracks, not 2 x 3"
        print(f"two ranks, one directory: {n} records, counters per rank")
        gen = os.path.join(tmp, "gen")
        run([sys.executable, os.path.join(HERE, "..", "gen", "gen_trace.py"), gen, "--records", "20000",
             "--workers", "4", "--epochs", "2"])
        case("generated, out-of-order arrivals", a, [gen])
        case("generated, --compress", a, [gen], compress=True)
        if a.libtorch:
            lt = os.path.join(tmp, "libtorch")
            run([a.libtorch, "--out", lt, "--images", "12", "--workers", "2", "--batch-size", "4",
                 "--size", "16", "--epochs", "2"], env)
            case("libtorch loader", a, [os.path.join(lt, "trace")])
        if a.python_path:
            py = os.path.join(tmp, "py")
            run(["/usr/bin/python3", "-c", PY_RUN, os.path.join(py, "lotustrace_log")],
                dict(env, PYTHONPATH=a.python_path))
            case("Python DataLoader (lotus.torch)", a, [py])
        # The JSON timeline is not affected: --format json writes it even for a .pftrace name.
        out = os.path.join(tmp, "t.pftrace")
        run([a.tool, "viz", gen, "-o", out, "--format", "json"])
        assert open(out, "rb").read(1) == b"{", "--format json did not write JSON"
        bad = subprocess.run([a.tool, "viz", gen, "-o", out, "--compat"], capture_output=True,
                             text=True)
        assert bad.returncode == 2 and "--compat" in bad.stderr, bad.stderr
        print("perfetto_cases: all passed")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print(f"perfetto_cases: FAILED: {e}", file=sys.stderr)
        sys.exit(1)
