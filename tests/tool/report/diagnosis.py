#!/usr/bin/env python3
# lotus — the diagnosis benchmark: runs with one planted, known problem each, and what lotus says
# SPDX-License-Identifier: MIT
"""Each scenario writes a run with one planted problem (or none), runs `lotus-tool report --json`
on it and checks the first "act" finding: its kind, its subject and the input-bound verdict. The
healthy runs must get no "act" at all. Every scenario is also checked for what must never be said
(advice of another loader, workers of different epochs counted together, negative delays).

Most runs come from a small simulator of a DataLoader (workers with round-robin index queues,
prefetch_factor batches each, in-order delivery with a cache, a training step, CPUs shared by the
workers), which writes the files the runtime writes: worker and main files, and each process's
sidecar (pid, ppid, host, rank, CPUs, loader, threads, per-batch resource figures). The planted
problem is the only thing that differs from a healthy run, so the truth is known. The scenarios
marked "real" run examples/image_pipeline (a C++ loader with worker threads) instead.

    diagnosis.py --tool lotus-tool --scenario NAME [--image-pipeline PATH]   one, exit 1 if wrong
    diagnosis.py --tool lotus-tool --table [--image-pipeline PATH]           all, a Markdown table
"""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

PREFIX = "lotustrace_log"
T0 = 1_764_000_000_000_000_000  # ns, realtime
OPS = [("RandomResizedCrop", 900_000), ("RandomHorizontalFlip", 40_000),
       ("ToTensor", 500_000), ("Normalize", 300_000)]


class Rank:
    """One simulated job (a rank): its settings and what is planted in it."""

    def __init__(self, **kw):
        self.workers = 2
        self.cpus = 4
        self.prefetch = 2
        self.epochs = 2
        self.batches = 40
        self.batch_size = 4
        self.load_ns = 1_500_000
        self.io_ns = 0              # blocked time per sample inside SLoader (storage)
        self.ops = dict(OPS)
        self.op_scale = {}          # op -> factor (a slow op)
        self.op_growth = {}         # op -> factor it reaches by the run's last batch (from 1)
        self.extra_ops = {}         # op -> ns per sample of an op only this run has
        self.step_ms = 5.0
        self.persistent = True
        self.startup_ms = 0.0       # worker start-up at each generation
        self.epoch_scale = {}       # epoch -> factor of every op (a cold first epoch)
        self.stall = None           # (epoch, batch, op, ns): one batch held in one op
        self.jitter = 0.15
        self.uneven = 0.0           # per-batch cost spread (lognormal sigma on top of jitter)
        self.minflt = 200
        self.loader = "torch"
        self.torch_version = None   # the `loader torch <version>` line's (None: not said)
        self.host = "h1"
        self.rank = None
        self.pid = 40000
        self.consumer_op = None     # (name, ns): an op the training loop itself records
        self.main_threads = False   # workers are threads of the main process (C++ loaders)
        self.seed = 1
        self.__dict__.update(kw)


def simulate(r):
    """Records per file and sidecar lines per process, from the DataLoader's rules."""
    rng = random.Random(r.seed)
    files = {}          # file name -> list of lines
    sidecars = {}       # pid -> dict(ppid, threads, batchres)
    main_pid = r.pid
    main_name = f"{PREFIX}_main_pid_{main_pid}"
    files[main_name] = []
    sidecars[main_pid] = {"ppid": 1, "threads": [(main_pid, "pt_main")], "batchres": [],
                          "epochs": []}
    next_pid = main_pid + 1
    t = T0
    consumer_lines = []
    workers = []
    for epoch in range(r.epochs):
        sidecars[main_pid]["epochs"].append((epoch, t))  # the loader's `epoch` line
        if epoch == 0 or not r.persistent:
            workers = list(range(next_pid, next_pid + r.workers))
            next_pid += r.workers
            for w in workers:
                name = f"{PREFIX}_worker_pid_{w}"
                files[name] = []
                if r.main_threads:
                    sidecars[main_pid]["threads"].append((w, f"worker{w - main_pid}"))
                else:
                    sidecars[w] = {"ppid": main_pid, "threads": [(w, "pt_data_worker")],
                                   "batchres": []}
            free = {w: t + int(r.startup_ms * 1e6) for w in workers}
        n = r.batches
        pw = r.prefetch * r.workers
        queued = [0] * n
        ready = [0] * n
        consumed = [0] * n
        req = [0] * n
        contention = max(1.0, r.workers / r.cpus)
        scale = r.epoch_scale.get(epoch, 1.0)
        main = files[main_name]
        for i in range(min(pw, n)):
            queued[i] = t + i * 10_000
            main.append(f"SBatchQueued_{i},{queued[i]},1000\n")
        for i in range(n):
            if i >= pw:
                queued[i] = consumed[i - pw] + 5_000
                main.append(f"SBatchQueued_{i},{queued[i]},1000\n")
            w = workers[i % r.workers]
            lines = files[f"{PREFIX}_worker_pid_{w}"]
            start = max(free[w], queued[i]) + 20_000
            cur = start
            cpu = 0
            wait = 0
            blocked = 0
            spread = rng.lognormvariate(0, r.uneven) if r.uneven else 1.0
            for s in range(r.batch_size):
                def cost(mean):
                    return max(1000, int(mean * scale * spread * rng.lognormvariate(0, r.jitter)))
                load_cpu = cost(r.load_ns)
                load_wall = int(load_cpu * contention) + r.io_ns
                load_s = cur
                cpu += load_cpu
                wait += load_wall - load_cpu - r.io_ns
                blocked += r.io_ns
                cur += load_wall + 2_000
                tr_s = cur
                op_lines = []
                names = list(r.ops.items()) + list(r.extra_ops.items())
                for name, mean in names:
                    grow = 1.0
                    if name in r.op_growth:  # linear in the batch's place in the run
                        done = (epoch * n + i) / max(1, r.epochs * n - 1)
                        grow = 1.0 + (r.op_growth[name] - 1.0) * done
                    c = cost(mean * r.op_scale.get(name, 1.0) * grow)
                    extra = 0
                    if r.stall and r.stall[:3] == (epoch, i, name) and s == 0:
                        extra = r.stall[3]
                    d = int(c * contention) + extra
                    cpu += c
                    wait += d - c - extra
                    blocked += extra
                    op_lines.append(f"S{name},{cur},{d}\n")
                    cur += d + 1_000
                lines.extend(op_lines)
                lines.append(f"SLoader,{load_s},{load_wall}\n")
                lines.append(f"STransform,{tr_s},{cur - tr_s}\n")
                cur += 2_000
            col = int(150_000 * contention)
            lines.append(f"SCollation,{cur},{col}\n")
            cpu += 150_000
            wait += col - 150_000
            cur += col + 1_000
            lines.append(f"SBatchPreprocessed_{i},{start},{cur - start}\n")
            owner = main_pid if r.main_threads else w
            sidecars[owner]["batchres"].append(
                f"batchres {w} {i} {start} {cur - start} {cpu} {max(0, wait)} "
                f"{r.minflt * r.batch_size} 0 {max(1, blocked // 1_000_000)} "
                f"{int(wait // 4_000_000)}\n")
            free[w] = cur + 30_000
            ready[i] = cur + 200_000  # through the result queue
            req[i] = t if i == 0 else consumed[i - 1] + int(r.step_ms * 1e6)
            consumed[i] = max(ready[i], req[i]) + 30_000
        # The main file: waits (in order), 1 µs markers (early arrivals), consumes.
        recs = []
        for i in range(n):
            early = [k for k in range(i) if ready[k] > ready[i]]
            if early:
                k = early[0]
                recs.append((max(ready[i], req[k]), f"SBatchWait_{i},{max(ready[i], req[k])},1000\n"))
            else:
                recs.append((req[i], f"SBatchWait_{i},{req[i]},{max(1000, ready[i] - req[i])}\n"))
            recs.append((consumed[i], f"SBatchConsumed_{i},{consumed[i]},1000\n"))
            if r.consumer_op:
                name, ns = r.consumer_op
                consumer_lines.append(f"S{name},{consumed[i] + 10_000},{ns}\n")
        main.extend(x[1] for x in sorted(recs, key=lambda x: x[0]))
        t = consumed[-1] + int(r.step_ms * 1e6) + 50_000_000
    if consumer_lines:
        files[f"{PREFIX}_worker_pid_{main_pid}"] = consumer_lines
    return files, sidecars


def write_run(r, out, window=None, capture=None):
    """Writes the files (in `window` (ns) only, as a capture: records that ended in it)."""
    files, sidecars = simulate(r)
    os.makedirs(out, exist_ok=True)
    kept_files = {}
    for name, lines in files.items():
        if window:
            def inside(line):
                f = line.rsplit(",", 2)
                end = int(f[1]) + int(f[2])
                return window[0] <= end <= window[1]
            lines = [x for x in lines if inside(x)]
            if not lines:
                continue
        kept_files[name] = lines
        with open(os.path.join(out, name), "w") as f:
            f.writelines(lines)
    for pid, sc in sidecars.items():
        head = [f"lotus-meta 1\nversion 0.1.0\npid {pid}\nppid {sc['ppid']}\nprefix {PREFIX}\n",
                f"start {pid}\nclock realtime 1.000000000\nhost {r.host}\n"]
        if r.rank is not None:
            head.append(f"rank {r.rank}\nworld_size 2\n")
        head.append(f"cpus {r.cpus} {r.cpus}\n")
        if r.loader:
            version = f" {r.torch_version}" if r.torch_version else ""
            head.append(f"loader {r.loader}{version}\n")
        for tid, name in sc["threads"]:
            head.append(f"thread {tid} {name}\n")
        for name in kept_files:
            if name.endswith(f"_pid_{pid}") or any(name.endswith(f"_pid_{t}") for t, _ in sc["threads"]):
                head.append(f"file {name}\n")
        ep = sc.get("epochs", [])
        if window:  # a capture: the epoch in progress at its end (header), those begun in it
            latest = [e for e in ep if e[1] <= window[1]][-1:]
            ep = sorted(set(latest + [e for e in ep if window[0] <= e[1] <= window[1]]))
        head.extend(f"epoch {k} {start}\n" for k, start in ep)
        res = sc["batchres"]
        if window:
            res = [x for x in res if window[0] <= int(x.split()[3]) + int(x.split()[4]) <= window[1]]
        head.extend(res)
        if capture:
            head.append(capture + "\n")
        n = sum(len(v) for v in kept_files.values())
        head.append(f"stats {n} {n} 0 0\n")
        with open(os.path.join(out, f".{PREFIX}.lotus-meta_{pid}"), "w") as f:
            f.writelines(head)
    return files


def span_of(files, prefix, occurrence=0):
    """(start, end) of the occurrence-th record (in time) whose name starts with `prefix`."""
    found = []
    for lines in files.values():
        for x in lines:
            if x.startswith(prefix):
                f = x.rsplit(",", 2)
                found.append((int(f[1]), int(f[1]) + int(f[2])))
    return sorted(found)[occurrence]


# ---- the scenarios: (run writer, expected first act (kind, subject) or None, verdict, checks) ----

def one(r):
    return lambda out: [write_run(r, out)] and [out]


def ranks(*rs):
    def write(out):
        dirs = []
        for k, r in enumerate(rs):
            d = os.path.join(out, f"rank{k}")
            write_run(r, d)
            dirs.append(d)
        return dirs
    return write


def capture_run(r, stall_batch, window_s, hidden=False, epoch=None):
    """A capture of [trigger - window_s, trigger + 0.2 s] from a run: the trigger is the end of
    the main process's wait for `stall_batch` (of `epoch`, default the stall's), or with
    `hidden` (an on-demand request) the end of that batch's preparation."""
    def write(out):
        full = os.path.join(out, "full")
        files = write_run(r, full)
        shutil.rmtree(full)
        e = epoch if epoch is not None else (r.stall[0] if r.stall else 0)
        b0, b1 = span_of(files, f"SBatchPreprocessed_{stall_batch},", e)
        # The main process's wait for that batch (the trigger: when it ended), or the request.
        w = sorted((x for x in files[f"{PREFIX}_main_pid_{r.pid}"]
                    if x.startswith(f"SBatchWait_{stall_batch},")),
                   key=lambda x: int(x.rsplit(",", 2)[1]))
        wf = w[e].rsplit(",", 2)
        trigger = int(wf[1]) + int(wf[2]) if not hidden else b1
        start, end = trigger - int(window_s * 1e9), trigger + 200_000_000
        cid = "20261126T070000Z-%d-1" % r.pid
        reason = (f"wait>500ms: SBatchWait_{stall_batch} waited {int(wf[2]) // 1_000_000} ms"
                  if not hidden else "requested by lotus-tool capture")
        line = f"capture {cid} {trigger} {start} {end} 0 {reason}"
        d = os.path.join(out, f"capture-{cid}")
        write_run(r, d, window=(start, end), capture=line)
        return [d]
    return write


def real_pipeline(args):
    """examples/image_pipeline: a C++ loader with worker threads (a real run)."""
    def write(out):
        if not image_pipeline:
            raise Skip("needs --image-pipeline")
        subprocess.run([image_pipeline, "--out", out, *args, "--quiet"], check=True,
                       stdout=subprocess.DEVNULL, timeout=600)
        return [os.path.join(out, "trace")]
    return write


class Skip(Exception):
    pass


image_pipeline = None

S = {}


def scenario(name, problem, write, expect, verdict, must=(), never=(), check=None):
    S[name] = dict(problem=problem, write=write, expect=expect, verdict=verdict, must=must,
                   never=never, check=check)


TORCH_ONLY = ("num_workers", "prefetch_factor", "in_order", "worker_init_fn", "persistent_workers")
NEVER_ALWAYS = ("set_num_threads",)

scenario("healthy", "nothing: a balanced loader well ahead of a 40 ms step",
         one(Rank(step_ms=40, workers=2, cpus=4)), None, "not")
scenario("slow_op", "Normalize 12x slower than usual, cores all busy",
         one(Rank(op_scale={"Normalize": 12.0}, workers=4, cpus=4, step_ms=2)),
         ("input_bound", {"op": "Normalize"}), "highly", never=("Use num_workers",))
scenario("too_few_workers", "1 worker on 8 CPUs",
         one(Rank(workers=1, cpus=8, step_ms=5)),
         ("input_bound", {}), "highly", must=("Use num_workers=",))
scenario("too_many_workers", "8 workers on 2 CPUs, training not input-bound",
         one(Rank(workers=8, cpus=2, step_ms=60, batches=48)),
         ("causes", {"verdict": "cpu_contention"}), "not", must=("8 workers alive at once",))
scenario("non_persistent", "workers restarted each epoch (PyTorch's default), epoch 1 cold: "
         "nothing to act on",
         one(Rank(persistent=False, epochs=3, workers=2, cpus=2, step_ms=45,
                  epoch_scale={0: 1.3})),
         None, "not", must=("at most 2 at once", "generations"),
         never=("6 workers", "imbalanced"))
scenario("startup", "workers restarted each epoch with a 1.5 s start-up (a slow worker_init_fn)",
         one(Rank(persistent=False, startup_ms=1500, epochs=3, workers=2, cpus=2, step_ms=3)),
         ("input_bound", {"setting": "persistent_workers"}), "highly",
         must=("persistent_workers=True",), check="startup_second")
scenario("drift_op", "Normalize's cost grows 11x over the run (0.3 to 3.3 ms a sample)",
         one(Rank(op_growth={"Normalize": 11.0}, workers=2, cpus=2, step_ms=3, epochs=3)),
         ("input_bound", {}), "highly", check="drift_Normalize")
scenario("borderline", "1 worker barely behind the step: training waits 10-20 % (nothing to act on)",
         one(Rank(workers=1, cpus=4, step_ms=11.8, batches=60)), None, "moderately")
scenario("rank_op_only", "rank 1's workers run an op no other rank runs",
         ranks(Rank(rank=0, pid=40000, step_ms=8),
               Rank(rank=1, pid=50000, step_ms=8, extra_ops={"Decompress": 2_500_000})),
         ("straggler", {"rank": 1, "op": "Decompress"}), None,
         never=("check its data shard",))
scenario("rank_slow_data", "rank 1's samples take 2.5x as long to load (a heavier shard)",
         ranks(Rank(rank=0, pid=40000, step_ms=8),
               Rank(rank=1, pid=50000, step_ms=8, load_ns=3_750_000)),
         ("straggler", {"rank": 1, "op": "Loader"}), None)
scenario("host_slow", "both ranks of host h2 run every op 1.8x slower",
         ranks(*[Rank(rank=k, pid=40000 + 1000 * k, host=f"h{k // 2 + 1}", step_ms=8,
                      epoch_scale={0: 1.8, 1: 1.8} if k // 2 == 1 else {}, seed=k + 1)
                 for k in range(8)]),
         ("straggler", {"host": "h2"}), None)
scenario("page_faults", "every sample allocates fresh pages (50,000 minor faults a sample)",
         one(Rank(minflt=50_000, workers=2, cpus=2, step_ms=3)),
         ("input_bound", {"cause": "page_faults"}), "highly")
scenario("blocked_io", "every sample waits 6 ms for storage",
         one(Rank(io_ns=6_000_000, workers=2, cpus=4, step_ms=3)),
         ("input_bound", {"cause": "blocked"}), "highly")
scenario("stall_worker", "one batch held 3 s in RandomResizedCrop by one worker (a flight "
         "capture, wait>500ms)",
         capture_run(Rank(stall=(1, 17, "RandomResizedCrop", 3_000_000_000), step_ms=8,
                          epochs=2, batches=40), 17, 4.0),
         ("capture", {"batch": 17, "op": "RandomResizedCrop", "epoch": 1}), None,
         never=("negative",))
scenario("stall_hidden", "a worker held 2 s while prefetched batches hid most of it "
         "(an on-demand capture)",
         capture_run(Rank(stall=(0, 21, "Normalize", 2_000_000_000), step_ms=40, workers=4,
                          prefetch=4, batches=60, epochs=1), 21, 3.0, hidden=True),
         ("capture", {"batch": 21, "op": "Normalize"}), None)
scenario("out_of_order", "a few batches 6x as costly as the rest",
         one(Rank(uneven=0.9, workers=4, cpus=8, step_ms=4, batches=60, seed=3)),
         ("input_bound", {}), None, check="out_of_order_seen")
scenario("cpp_threads", "a C++ loader (worker threads), 1 worker on 8 CPUs; the training loop "
         "records its own op",
         one(Rank(loader="pipeline", main_threads=True, workers=1, cpus=8, step_ms=5,
                  consumer_op=("TrainStep", 4_000_000))),
         ("input_bound", {}), "highly", must=("worker threads",),
         never=TORCH_ONLY + ("TrainStep takes",))
scenario("libtorch", "libtorch's DataLoader, 1 worker on 8 CPUs",
         one(Rank(loader="libtorch", main_threads=True, workers=1, cpus=8, step_ms=5)),
         ("input_bound", {}), "highly", must=("DataLoaderOptions().workers(",),
         never=TORCH_ONLY)
scenario("capture_mid_epoch", "an on-demand capture from the middle of the job's epoch 0 into "
         "epoch 1 (nothing wrong): the same batch indices on both sides of the window",
         capture_run(Rank(step_ms=30, epochs=3, batches=30), 8, 1.0, hidden=True, epoch=1),
         None, None, never=("negative",), check="job_epochs_0_1")
scenario("real_cpp_few_workers", "real: examples/image_pipeline, 1 worker thread, 1 ms step",
         real_pipeline(["--images", "96", "--workers", "1", "--epochs", "1", "--step-ms", "1",
                        "--batch-size", "8"]),
         ("input_bound", {}), "highly", never=TORCH_ONLY)
scenario("real_cpp_healthy", "real: examples/image_pipeline, 2 worker threads, 150 ms step",
         real_pipeline(["--images", "48", "--workers", "2", "--epochs", "2", "--step-ms", "150",
                        "--batch-size", "8", "--min-side", "64", "--max-side", "96",
                        "--size", "32"]),
         None, "not", never=TORCH_ONLY)


def run_tool(tool, dirs, *extra):
    p = subprocess.run([tool, *extra, *dirs], capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise AssertionError(f"{' '.join(p.args)} exited {p.returncode}: {p.stderr[-2000:]}")
    return p.stdout


def judge(tool, name, work):
    """(right, what lotus said): runs the scenario in `work`."""
    sc = S[name]
    dirs = sc["write"](work)
    out = json.loads(run_tool(tool, ["--json"] + dirs, "report"))
    fs = out["findings"]
    acts = [f for f in fs if f["severity"] == "act"]
    first = acts[0] if acts else None
    said = (f"{first['kind']} {json.dumps(first['subject'], sort_keys=True)}: {first['text']}"
            if first else "no act: " + fs[0]["text"])
    # For the table: the kind and what it names (no run-specific paths or ids).
    shown = ("no act" if first is None else first["kind"] + " " + json.dumps(
        {k: v for k, v in first["subject"].items()
         if k in ("op", "rank", "batch", "cause", "verdict", "host", "setting")}, sort_keys=True))
    problems = []
    exp = sc["expect"]
    if exp is None:
        if first is not None:
            problems.append(f"an act finding on a run with nothing to act on: {first['text']}")
    elif first is None:
        problems.append("no act finding")
    else:
        if first["kind"] != exp[0]:
            problems.append(f"first act is {first['kind']}, expected {exp[0]}")
        for k, v in exp[1].items():
            if first["subject"].get(k) != v:
                problems.append(f"subject {k} = {first['subject'].get(k)!r}, expected {v!r}")
    ib = [f for f in fs if f["kind"] == "input_bound"]
    if sc["verdict"] is not None:
        got = ib[0]["numbers"].get("class") if ib else None
        if got != sc["verdict"]:
            problems.append(f"input-bound verdict {got!r}, expected {sc['verdict']!r}")
    text = json.dumps(fs, ensure_ascii=False)
    for m in sc["must"]:
        if m not in text:
            problems.append(f"never says {m!r}")
    for m in tuple(sc["never"]) + NEVER_ALWAYS:
        if m in text:
            problems.append(f"says {m!r}")
    if sc["check"] == "startup_second":
        # Start-up explains the wait before any op: the startup act right after the verdict.
        kinds = [f["kind"] for f in acts]
        if kinds[1:2] != ["startup"]:
            problems.append(f"the act after the verdict is not startup: {kinds}")
    if sc["check"] and sc["check"].startswith("drift_"):
        dr = [f for f in fs if f["kind"] == "drift"]
        if not dr or dr[0]["subject"].get("op") != sc["check"][6:]:
            problems.append(f"no drift finding naming {sc['check'][6:]}: {dr}")
    if sc["check"] == "out_of_order_seen":
        oo = [f for f in fs if f["kind"] == "out_of_order"]
        if not oo or oo[0]["numbers"].get("count", 0) == 0:
            problems.append("no out-of-order arrivals reported")
    if sc["check"] == "job_epochs_0_1" or exp and exp[0] == "capture":
        st = json.loads(run_tool(tool, ["--json"] + dirs, "stats"))
        if exp and exp[0] == "capture" and "op" in exp[1]:
            # The op tables show the max: the one long record a mean and a p99 hide.
            op = [o for o in st["ops"] if o["name"] == "S" + exp[1]["op"]]
            if not op or op[0]["max_ms"] < 1000:
                problems.append(f"the op table's max does not show the stall: {op}")
            text = run_tool(tool, dirs, "stats")
            row = [ln for ln in text.splitlines() if ln.startswith(exp[1]["op"] + " ")]
            if not row or float(row[0].split()[6]) < 1000:
                problems.append(f"stats' op table has no max of the stall: {row}")
        if st["delay"]["count"] and st["delay"]["min_ms"] < 0:
            problems.append(f"negative batch delay {st['delay']['min_ms']} ms")
        if sc["check"] == "job_epochs_0_1" and st["trace"].get("job_epochs") != [0, 1]:
            problems.append(f"the window's epochs are not the job's 0-1: "
                            f"{st['trace'].get('job_epochs')} (window epochs {st['trace']['epochs']})")
    # Every finding's kind is known and its order is the page's: capture, then act, note, fine.
    rank = {"act": 0, "note": 1, "fine": 2}
    sev = [rank[f["severity"]] for f in fs if f["kind"] != "capture"]
    if sev != sorted(sev):
        problems.append("findings not ordered by severity")
    return not problems, said, shown, problems


def main():
    global image_pipeline
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tool", required=True)
    ap.add_argument("--image-pipeline")
    ap.add_argument("--scenario", action="append", default=[])
    ap.add_argument("--table", action="store_true")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    image_pipeline = a.image_pipeline
    if a.list:
        print("\n".join(S))
        return 0
    names = a.scenario or list(S)
    rows, wrong = [], 0
    for name in names:
        work = tempfile.mkdtemp(prefix=f"lotus-diag-{name}-")
        try:
            ok, said, shown, problems = judge(a.tool, name, work)
        except Skip as e:
            print(f"SKIP {name}: {e}")
            if a.scenario:
                return 77
            continue
        finally:
            shutil.rmtree(work, ignore_errors=True)
        wrong += 0 if ok else 1
        exp = S[name]["expect"]
        rows.append((name, S[name]["problem"],
                     "no act" if exp is None else f"{exp[0]} {json.dumps(exp[1], sort_keys=True)}",
                     shown, "right" if ok else "WRONG"))
        print(f"{'ok' if ok else 'WRONG'} {name}: {said}")
        for p in problems:
            print(f"    {p}")
    if a.table:
        print("\n| scenario | planted problem | expected first act | lotus's first act | |")
        print("| --- | --- | --- | --- | --- |")
        for r in rows:
            print("| " + " | ".join(x.replace("|", "\\|") for x in r) + " |")
        print(f"\n{len(rows) - wrong} of {len(rows)} right")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
