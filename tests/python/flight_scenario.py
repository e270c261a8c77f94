# SPDX-License-Identifier: MIT
"""A DataLoader job in flight mode (issue #41), run by test_flight.py in a fresh process.

    /usr/bin/python3 flight_scenario.py '<json>'

json keys: trace (prefix), flags (a scratch directory), context (fork|spawn), workers, options
(lotus.torch.instrument's keywords: flight, trigger, ...), slow_after_s (the first sample fetched
this long after the start sleeps slow_s; none: no slow sample), slow_s, run_s (how long the job
iterates), late_worker_s (worker 1 starts this much later than worker 0), slow_op (the slow sample's op, traced with its S; default Sleepy), ask_after_s (call lotus.capture() this long after the start), ready (a file written
once run_s/2 have passed), consume_s (the training step: a sleep after each batch). The start is the first batch's arrival (the workers are up).
Each sample takes ~2 ms (op SWork); the slow one is op SSleepy (slow_op), and the worker that
takes it writes {worker_id, pid} (torch's get_worker_info(), os.getpid()) to flags/slow_worker. After every batch the job checks
that no trace file exists in the trace directory itself (only capture-* directories may hold
records). Prints {pid, slow_arrival_ns, slow_wait_s, disk_before_trigger, asked, capture_ns
(when the main process's part of a capture was first seen), leftover (trace files in the
directory itself at the end)}.
"""
import functools
import json
import os
import sys
import threading
import time

import torch
from torch.utils.data import DataLoader, Dataset

import lotus
import lotus.torch


class Job(Dataset):
    def __init__(self, n, t0_file, slow_after_s, slow_s, token, slow_op="Sleepy"):
        self.n, self.t0_file, self.slow_after_s, self.slow_s, self.token = (
            n, t0_file, slow_after_s, slow_s, token)
        self.slow_op = slow_op
        self.t0 = None

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.slow_after_s is not None and self.t0 is None and os.path.exists(self.t0_file):
            with open(self.t0_file) as f:
                self.t0 = float(f.read() or "nan")
        if self.t0 is not None and time.time() - self.t0 >= self.slow_after_s:
            try:  # once per job, whichever worker gets there first
                os.close(os.open(self.token, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
                info = torch.utils.data.get_worker_info()
                with open(self.token + ".tmp", "w") as f:
                    json.dump({"worker_id": info.id if info else None, "pid": os.getpid()}, f)
                os.rename(self.token + ".tmp", os.path.join(os.path.dirname(self.token),
                                                            "slow_worker"))
                with lotus.scope(self.slow_op):
                    time.sleep(self.slow_s)
            except FileExistsError:
                pass
        with lotus.scope("Work"):
            time.sleep(0.002)
        return torch.tensor([i])


def late_start(worker_s, worker_id):
    """worker_init_fn: worker 1 starts worker_s late (its first batch, batch 1, waits for it)."""
    if worker_id == 1:
        time.sleep(worker_s)


def trace_files_on_disk(directory):
    """Trace files (not hidden sidecars/control file, not capture directories) in `directory`."""
    return [n for n in os.listdir(directory)
            if not n.startswith(".") and not os.path.isdir(os.path.join(directory, n))]


def main():
    cfg = json.loads(sys.argv[1])
    trace = cfg["trace"]
    directory = os.path.dirname(trace)
    lotus.torch.instrument(log_file=trace, **cfg.get("options", {}))
    t0_file = os.path.join(cfg["flags"], "t0")
    ds = Job(100000, t0_file, cfg.get("slow_after_s"), cfg.get("slow_s", 1.5),
             os.path.join(cfg["flags"], "slow_token"), cfg.get("slow_op", "Sleepy"))
    loader = DataLoader(ds, batch_size=2, num_workers=cfg.get("workers", 2),
                        multiprocessing_context=cfg.get("context", "fork"),
                        worker_init_fn=(functools.partial(late_start, cfg["late_worker_s"])
                                        if cfg.get("late_worker_s") else None))
    slow_arrival_ns, slow_wait_s, disk_before = None, 0.0, []
    asked = False
    ready = cfg.get("ready")
    seen = {}  # when this process's part of a capture was first seen: polled beside the loop,
    done = threading.Event()  # so that a capture written during a stall is seen during it

    def watch():
        while not done.wait(0.01):
            for n in os.listdir(directory):
                side = os.path.join(directory, n, "." + os.path.basename(trace) +
                                    f".lotus-meta_{os.getpid()}")
                if n.startswith("capture-") and n not in seen and os.path.exists(side):
                    with open(side) as f:
                        if "\ncapture " in f.read():
                            seen[n] = time.time_ns()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    it = iter(loader)
    next(it)  # the workers are up: times count from here
    t0 = time.time()
    with open(t0_file + ".tmp", "w") as f:
        f.write(repr(t0))
    os.rename(t0_file + ".tmp", t0_file)
    while time.time() - t0 < cfg["run_s"]:
        before = time.time()
        next(it)
        waited = time.time() - before
        if cfg.get("consume_s"):  # a slow training step: the workers run far ahead
            time.sleep(cfg["consume_s"])
        if waited > 1.0 and slow_arrival_ns is None:
            slow_arrival_ns, slow_wait_s = time.time_ns(), waited
        if slow_arrival_ns is None:  # nothing may reach the disk before the stall
            disk_before += trace_files_on_disk(directory)
            disk_before += [n for n in os.listdir(directory) if n.startswith("capture-")
                            and cfg.get("ask_after_s") is None and ready is None]
        if cfg.get("ask_after_s") is not None and not asked and time.time() - t0 >= cfg["ask_after_s"]:
            asked = lotus.capture("asked from python")
        if ready and time.time() - t0 >= cfg["run_s"] / 2 and not os.path.exists(ready):
            with open(ready, "w") as f:
                f.write("ready")
    del it, loader
    lotus.flush()
    done.set()
    watcher.join()
    capture_ns = min(seen.values()) if seen else None
    print(json.dumps({"pid": os.getpid(), "slow_arrival_ns": slow_arrival_ns,
                      "slow_wait_s": slow_wait_s, "disk_before_trigger": disk_before,
                      "asked": asked, "capture_ns": capture_ns, "leftover": trace_files_on_disk(directory)}))


if __name__ == "__main__":
    main()
