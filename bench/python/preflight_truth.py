#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""`python -m lotus.torch preflight`'s time to first batch against measured runs, per start method.

For each start method, a job (a DataLoader over a dataset of PATHS file-path strings, a pickle of
about 43 bytes a path, sent to every spawn/forkserver worker) is pre-flighted
(`--json --start-method M --workers W`) and run for real, in turn, REPEATS times each, every run a
fresh process (its forkserver started by its first iterator, as in a job's first epoch), measured
from `iter(loader)` to the first batch. Prints, per method: the predicted (first iterator) and
measured medians, their error, the load average. The acceptance bound is 25 %; on a loaded machine
(a load above its cores) the figures say more about the scheduler than about the model.

    PYTHONPATH=<build>/python /usr/bin/python3 bench/python/preflight_truth.py \
        [--workers 2] [--paths 200000] [--repeats 3] [--methods fork,spawn,forkserver] [--json OUT]
"""

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap

JOB = """\
    import json
    import sys
    import time
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Paths(Dataset):
        def __init__(self, n):
            self.paths = [f"/data/train/class{i % 1000:04d}/img_{i:09d}.JPEG" for i in range(n)]
        def __len__(self):
            return max(64, len(self.paths))
        def __getitem__(self, i):
            return torch.tensor([float(len(self.paths[i % max(1, len(self.paths))]))])

    def main():
        method, workers, paths, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
        loader = DataLoader(Paths(paths), batch_size=4, num_workers=workers,
                            multiprocessing_context=method)
        t0 = time.perf_counter()
        it = iter(loader)
        next(it)
        ttfb = (time.perf_counter() - t0) * 1e3
        del it
        with open(out, "w") as f:
            json.dump({"ttfb_ms": ttfb}, f)

    if __name__ == "__main__":
        main()
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--paths", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--methods", default="fork,spawn,forkserver")
    ap.add_argument("--json", default=None, help="write the rows here too")
    a = ap.parse_args()
    methods = [m for m in a.methods.split(",") if m in multiprocessing.get_all_start_methods()]
    rows = []
    with tempfile.TemporaryDirectory(prefix="lotus-preflight-truth-") as d:
        job = os.path.join(d, "job.py")
        with open(job, "w") as f:
            f.write(textwrap.dedent(JOB))
        out = os.path.join(d, "out.json")
        for m in methods:
            args = [m, str(a.workers), str(a.paths), out]
            # Pre-flight and real run in turn, REPEATS times each: a machine whose load drifts
            # moves both alike; the medians are compared.
            predicted, measured, rep = [], [], None
            for _ in range(a.repeats):
                r = subprocess.run([sys.executable, "-m", "lotus.torch", "preflight", "--json",
                                    "--start-method", m, "--workers", str(a.workers), job,
                                    *args], capture_output=True, text=True)
                if r.returncode != 0:
                    print(f"{m}: preflight failed ({r.returncode}): {r.stderr[-2000:]}")
                    break
                rep = json.loads(r.stdout)
                predicted.append(rep["predictions"][m]["first_ttfb_ms"])
                subprocess.run([sys.executable, job, *args], check=True)
                with open(out) as f:
                    measured.append(json.load(f)["ttfb_ms"])
            if not measured:
                continue
            pred, med = statistics.median(predicted), statistics.median(measured)
            err = (pred - med) / med * 100 if med > 0 else float("nan")
            row = {"method": m, "workers": a.workers, "paths": a.paths,
                   "pickle_bytes": rep["pickle"]["bytes"],
                   "predicted_ms": [round(x, 1) for x in predicted],
                   "measured_ms": [round(x, 1) for x in measured],
                   "predicted_median_ms": round(pred, 1), "measured_median_ms": round(med, 1),
                   "error_pct": round(err, 1), "load": os.getloadavg()[0],
                   "costs": rep["costs"]}
            rows.append(row)
            print(f"{m:<10} {a.workers} workers, pickle {rep['pickle']['bytes'] / 1e6:.1f} MB: "
                  f"predicted {pred:.0f} ms ({', '.join(f'{x:.0f}' for x in predicted)}), "
                  f"measured {med:.0f} ms ({', '.join(f'{x:.0f}' for x in measured)}), "
                  f"error {err:+.1f} %, load {os.getloadavg()[0]:.1f}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"python": sys.version.split()[0], "cores": len(os.sched_getaffinity(0)),
                       "rows": rows}, f, indent=1)
    bad = [r for r in rows if abs(r["error_pct"]) > 25]
    print(f"{len(rows) - len(bad)} of {len(rows)} within 25 %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
