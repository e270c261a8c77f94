#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""whatif's worker counts past the cores, by a fraction and by a multiple (WHATIF.md, "Workers that
outnumber the cores by a fraction").

    PYTHONPATH=build/python LOTUS_TOOL=build/tools/lotus-tool/lotus-tool \\
        /usr/bin/python3 bench/python/uneven_sharing.py [--sleeps 0,1,4] [--cpu-ms 12]
        [--repeats 3] [--workers 3,4] [--json out.json]

A DataLoader (fork workers, batches of 4 samples, persistent workers, 4 epochs) whose samples each
sleep --sleeps ms (a Load op's I/O) and whose collate_fn spends --cpu-ms of its thread's CPU time
(a CPU-heavy collate, the same work whatever the load). For each sleep length, one run with 2
workers on the machine's cores is traced by lotus.torch; `lotus-tool whatif --workers N` predicts N
workers from it (its epoch with the cores shared evenly, whether claimed or not). Then 2 and each N
workers run untraced --repeats times, interleaved; an epoch is the mean of epochs 2-4 (the workers
started), a setting's the median over its repeats. The table gives each N's predicted and measured
gain over 2 workers (1 - epoch(N) / epoch(2), each from its own source: the prediction against
whatif's replay of the traced run, the measurement against the untraced 2-worker runs) and the
miss in points. Run it on a quiet machine of 2 cores: 3 is then past the cores by a fraction, 4 by
a multiple.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

EPOCHS = 4
SAMPLES = 384


def pipeline(cfg):
    """One run of the DataLoader (in this process); returns its epochs' wall times."""
    import torch
    from torch.utils.data import DataLoader, Dataset

    if cfg.get("trace"):
        import lotus.torch
        lotus.torch.instrument(log_file=cfg["trace"])

    class Samples(Dataset):
        def __len__(self):
            return SAMPLES

        def __getitem__(self, i):
            if cfg["sleep_ms"] > 0:
                time.sleep(cfg["sleep_ms"] / 1e3)
            return torch.tensor([i])

    def collate(samples):
        until = time.thread_time() + cfg["cpu_ms"] / 1e3
        while time.thread_time() < until:
            pass
        return torch.utils.data.default_collate(samples)

    torch.set_num_threads(1)
    loader = DataLoader(Samples(), batch_size=4, num_workers=cfg["workers"], collate_fn=collate,
                        persistent_workers=True, multiprocessing_context="fork")
    epochs = []
    for _ in range(EPOCHS):
        t0 = time.monotonic()
        for _ in loader:
            pass
        epochs.append(time.monotonic() - t0)
    del loader
    if cfg.get("trace"):
        import lotus
        lotus.flush()
    return epochs


def run(cfg):
    r = subprocess.run([sys.executable, __file__, "--child", json.dumps(cfg)],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        sys.exit(f"uneven_sharing: a run failed: {r.stderr.strip()[-2000:]}")
    epochs = json.loads(r.stdout.strip().splitlines()[-1])
    return sum(epochs[1:]) / len(epochs[1:])


def whatif(tool, trace, workers):
    r = subprocess.run([tool, "whatif", trace, "--workers", str(workers), "--json"],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        sys.exit(f"uneven_sharing: lotus-tool whatif failed: {r.stderr.strip()}")
    return json.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child")
    ap.add_argument("--sleeps", default="0,1,4", help="ms each sample sleeps, comma-separated")
    ap.add_argument("--cpu-ms", type=float, default=12.0)
    ap.add_argument("--workers", default="3,4")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json")
    a = ap.parse_args()
    if a.child:
        print(json.dumps(pipeline(json.loads(a.child))))
        return
    tool = os.environ.get("LOTUS_TOOL")
    if not tool:
        sys.exit("uneven_sharing: set LOTUS_TOOL to the lotus-tool of this build")
    try:
        sleeps = [float(s) for s in a.sleeps.split(",")]
        counts = [int(w) for w in a.workers.split(",")]
    except ValueError:
        sys.exit("uneven_sharing: --sleeps and --workers take comma-separated numbers")
    if (any(not 0 <= s <= 100 for s in sleeps) or any(not 1 <= w <= 64 for w in counts)
            or not 0 < a.cpu_ms <= 1000 or not 1 <= a.repeats <= 20):
        sys.exit("uneven_sharing: sleeps 0-100 ms, workers 1-64, cpu-ms 0-1000, repeats 1-20")
    cores = len(os.sched_getaffinity(0))
    print(f"{cores} cores, {SAMPLES // 4} batches an epoch: 4 samples sleeping the given ms, a "
          f"collate of {a.cpu_ms} ms of CPU (load {os.getloadavg()[0]:.2f})")
    print(f"{'sleep ms':>8} {'workers':>7} {'predicted':>10} {'measured':>9} {'miss':>6}  "
          f"whatif's claim")
    rows = []
    with tempfile.TemporaryDirectory(prefix="lotus-uneven-") as tmp:
        for s in sleeps:
            base = {"sleep_ms": s, "cpu_ms": a.cpu_ms}
            trace = os.path.join(tmp, f"sleep{s}")
            run(dict(base, workers=2, trace=os.path.join(trace, "lotustrace_log")))
            measured = {w: [] for w in [2] + counts}
            for _ in range(a.repeats):
                for w in measured:
                    measured[w].append(run(dict(base, workers=w)))
            two = statistics.median(measured[2])
            for w in counts:
                p = whatif(tool, trace, w)
                pred = 1 - p["predicted"]["epoch_seconds"] / p["replay"]["epoch_seconds"]
                meas = 1 - statistics.median(measured[w]) / two
                claim = "claimed" if p["claim"] else "withheld: " + p.get("no_claim_why", "")[:60]
                rows.append({"sleep_ms": s, "workers": w, "predicted_gain": pred,
                             "measured_gain": meas, "claim": p["claim"],
                             "epochs_s": {str(k): v for k, v in measured.items()}})
                print(f"{s:8.1f} {w:7d} {pred:+10.1%} {meas:+9.1%} {100 * (pred - meas):+6.1f}  "
                      f"{claim}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"cores": cores, "cpu_ms": a.cpu_ms, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
