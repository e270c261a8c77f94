# SPDX-License-Identifier: MIT
"""The GPU's idle time at the batch hand-overs (lotus.loaders._gpu), on a simulated CUDA stream
(fake_cuda.py: CI has no GPU), read back by lotus-tool; and a run without CUDA writes what it
wrote before (no line, no file, CUDA never initialized by lotus)."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

from conftest import run_python

HERE = pathlib.Path(__file__).resolve().parent
TOOL = os.environ.get("LOTUS_TOOL")
torch = pytest.importorskip("torch")

EPOCHS, BATCHES, ITEM_MS, KERNEL_MS = 2, 12, 30.0, 2.0


def run_scenario(tmp_path, mode, epochs=EPOCHS, batches=BATCHES, item_ms=ITEM_MS,
                 kernel_ms=KERNEL_MS, iter_ms=0.0, persistent=True):
    trace = tmp_path / "trace"
    trace.mkdir()
    out = tmp_path / "out.json"
    env = {"PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    run_python([str(HERE / "gpu_scenario.py"), str(trace / "lotustrace_log"), str(out), mode,
                str(epochs), str(batches), str(item_ms), str(kernel_ms), str(iter_ms),
                "1" if persistent else "0"], env=env, timeout=900)
    return trace, json.loads(out.read_text())


def sidecar_lines(trace):
    """{key: [line fields, ...]} over every sidecar of the trace."""
    keys = {}
    for p in sorted(trace.iterdir()):
        if ".lotus-meta_" not in p.name:
            continue
        for line in p.read_text().splitlines():
            fields = line.split(" ")
            keys.setdefault(fields[0], []).append(fields[1:])
    return keys


def expected_lines(log, epochs, batches):
    """The `gpu` lines the fake stream's events make: per epoch A_0 B_0 ... A_n-1 B_n-1 A_end
    (the call that ends the iteration); idle_i = B_i - A_i, step_i = A_i+1 - B_i (ns)."""
    per_epoch = 2 * batches + 1
    assert len(log) == epochs * per_epoch, (len(log), epochs, batches)
    out = []
    for e in range(epochs):
        t = log[e * per_epoch:(e + 1) * per_epoch]
        for i in range(batches):
            a, b, a_next = t[2 * i], t[2 * i + 1], t[2 * i + 2]
            out.append((i, b - a, a_next - b))
    return out


def tool_json(*args):
    r = subprocess.run([TOOL, *args], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def tool_text(*args):
    r = subprocess.run([TOOL, *args], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_fake_stream_exact_lines_and_tool_figures(tmp_path):
    trace, out = run_scenario(tmp_path, "fake")
    keys = sidecar_lines(trace)
    got = [(int(f[0]), int(f[2]), None if f[3] == "-" else int(f[3])) for f in keys["gpu"]]
    # Exactly one line per batch handed over, each the fake stream's own figures.
    assert got == expected_lines(out["log"], EPOCHS, BATCHES)
    assert "gpu_lost" not in keys  # the pool never filled (a sync every 4 steps)
    assert not out["cuda_initialized"]  # the fake source stands in; lotus never touched CUDA
    # Arrival times lie inside the run, in order.
    arrivals = [int(f[1]) for f in keys["gpu"]]
    assert arrivals == sorted(arrivals)

    if not TOOL:
        pytest.skip("LOTUS_TOOL not set")
    s = tool_json("stats", "--json", str(trace))
    g = s["gpu"]
    idle_ms = sum(x[1] / 1e6 for x in got)
    steps = [x[2] / 1e6 for x in got if x[2] is not None]
    main_ms = s["input_bound"]["main_elapsed_ms"]
    assert g["handovers"] == EPOCHS * BATCHES
    assert g["idle_ms"] == pytest.approx(idle_ms, rel=1e-12)
    assert g["steps"] == len(steps)
    assert g["step_mean_ms"] == pytest.approx(sum(steps) / len(steps), rel=1e-12)
    assert g["lost"] == 0
    assert g["idle_share"] == pytest.approx(min(1.0, idle_ms / main_ms), rel=1e-12)
    ib = s["input_bound"]
    assert ib["measure"] == "gpu"
    assert ib["gpu_idle_share"] == pytest.approx(g["idle_share"], rel=1e-12)
    share = g["idle_share"]
    assert ib["class"] == ("highly" if share >= 0.30 else "moderately" if share >= 0.10
                           else "not")
    # The planted loader (30 ms an item, one worker) against 2 ms of GPU work a step: the GPU
    # idles most of the run (by a wide margin: 28 of every 30 ms).
    assert ib["class"] == "highly"
    finding = [f for f in s["findings"] if f["kind"] == "input_bound"][0]
    assert finding["numbers"]["measure"] == "gpu"
    assert finding["numbers"]["gpu_idle_ms"] == pytest.approx(idle_ms, rel=1e-12)
    assert finding["text"].startswith("Highly input-bound: the GPU idled ")
    assert "because its next batch was late, by its CUDA events over 24 hand-overs" in \
        finding["evidence"]

    # The same figures in stats' text and in report --json.
    text = tool_text("stats", str(trace))
    assert "GPU idle time waiting for batches (CUDA events around each hand-over):" in text
    assert f"hand-overs = 24, GPU idle = {idle_ms:.2f} ms ({100 * share:.2f}% of " in text
    assert f"GPU time per batch = {sum(steps) / len(steps):.2f} ms (mean over {len(steps)} " \
        "steps)" in text
    assert "input-bound: highly (the GPU idled" in text
    rep = tool_json("report", "--json", str(trace))
    rf = [f for f in rep["findings"] if f["kind"] == "input_bound"][0]
    assert rf["numbers"]["gpu_idle_share"] == pytest.approx(share, rel=1e-12)

    # The model takes the GPU's time per batch as the consumer's step.
    w = tool_json("whatif", "--json", "--workers", "2", str(trace))
    assert w["measured"]["step_from"] == "gpu"
    assert w["measured"]["step_ms"] == pytest.approx(sum(steps) / len(steps), rel=1e-12)
    assert w["model"]["step_ms"] == w["measured"]["step_ms"]

    # --epoch 1: the hand-overs of that epoch only.
    e1 = tool_json("stats", "--json", "--epoch", "1", str(trace))
    assert e1["gpu"]["handovers"] == BATCHES
    assert e1["gpu"]["idle_ms"] == pytest.approx(sum(x[1] / 1e6 for x in got[BATCHES:]),
                                                 rel=1e-12)


def test_a_new_iterators_start_is_the_first_hand_overs_idle(tmp_path):
    # A new iterator's __init__ (its workers started, here a sampler whose iter() takes 300 ms)
    # keeps the GPU waiting as a late batch does: the first hand-over of each epoch begins there.
    # Without persistent workers every epoch has a new iterator. (On an H200 the epochs after a
    # new setting read 10-14 points less idle than the job's truth when it began at next().)
    trace, out = run_scenario(tmp_path, "fake", epochs=2, batches=4, iter_ms=300.0,
                              persistent=False)
    got = sorted((int(f[0]), int(f[2]), f[3]) for f in sidecar_lines(trace)["gpu"])
    want = expected_lines(out["log"], 2, 4)
    assert [(i, idle) for i, idle, _ in got] == sorted((i, idle) for i, idle, _ in want)
    firsts = [idle for i, idle, _ in got if i == 0]
    assert len(firsts) == 2 and all(idle >= 300e6 for idle in firsts), firsts
    assert all(idle < 300e6 for i, idle, _ in got if i != 0)


def test_a_started_hand_over_neither_holds_up_nor_loses_the_others(monkeypatch):
    # A new iterator's first hand-over begins in its __init__ (start), but joins the queue of
    # unread hand-overs only at its first next(): meanwhile another loader's hand-overs are read
    # (a queued one without its batch yet would be dropped as abandoned, or hold up the reads).
    from fake_cuda import FakeCuda
    from lotus.loaders import _gpu
    fake = FakeCuda()
    t = _gpu.Tracker(fake)
    monkeypatch.setattr(t, "_send", lambda: True)  # the lines stay in t.unsent
    a, b = object(), object()
    started = t.start()  # a's iterator is created ...
    for i in range(3):  # ... while b's loop goes on
        h = t.begin(b)
        t.end(h, i, 1000 + i)
        fake.launch(1.0)
    fake.synchronize()
    t.poll()
    assert [x.split()[1] for x in t.unsent] == [b"0", b"1"]  # b's read, the last one's step open
    h = t.begin(a, started)
    t.end(h, 0, 2000)
    fake.synchronize()
    t.poll(final=True)
    got = [x.split() for x in t.unsent]
    assert [(f[1], f[2]) for f in got] == [(b"0", b"1000"), (b"1", b"1001"), (b"2", b"1002"),
                                           (b"0", b"2000")], got
    assert t.lost == 0


def test_without_cuda_nothing_changes(tmp_path):
    trace, out = run_scenario(tmp_path, "none", epochs=1, batches=4, item_ms=1.0)
    assert not out["cuda_initialized"]  # lotus never initializes CUDA itself
    keys = sidecar_lines(trace)
    assert "gpu" not in keys and "gpu_lost" not in keys
    # The files of a run of before: trace files, their sidecars and live files, nothing else.
    names = sorted(p.name for p in trace.iterdir())
    assert all(any(k in n for k in ("_worker_pid_", "_main_pid_", ".lotus-meta_", ".lotus-live_"))
               for n in names), names
    # The sidecar keys lotus wrote before the GPU's figures existed.
    known = {"lotus-meta", "version", "pid", "ppid", "prefix", "start", "clock", "host", "rank",
             "local_rank", "world_size", "thread", "file", "stats", "cpus", "loader",
             "worker_id", "epoch", "clocksync", "batchres", "memory", "batchres_lost", "opres",
             "opres_lost",
             # The iterators' start (FORMAT.md §5), whatever the GPU.
             "startup", "startup_worker", "startup_first", "startup_boot", "startup_forkserver"}
    assert set(keys) <= known, set(keys) - known
    if not TOOL:
        return
    s = tool_json("stats", "--json", str(trace))
    assert "gpu" not in s
    assert "measure" not in s["input_bound"] and "gpu_idle_share" not in s["input_bound"]
    assert "GPU idle" not in tool_text("stats", str(trace))
    w = tool_json("whatif", "--json", "--workers", "2", str(trace))
    assert "step_from" not in w["measured"]


def test_pool_bound_counts_lost(tmp_path):
    """A GPU more than MAX_PENDING hand-overs behind: the hand-overs beyond are not measured and
    are counted (gpu_lost), no event is read before it completes, and the pool stays bounded."""
    code = """
from lotus import _lotus
from lotus.loaders import _gpu
sent = []
_lotus._note_gpu_lines = lambda b: sent.append(bytes(b)) or 0


class _StuckEvent:  # an event the GPU never reaches (a GPU far behind)
    def record(self, stream):
        pass

    def query(self):
        return False

    def elapsed_time(self, other):
        raise AssertionError("read before complete")


class _StuckSource:
    def active(self):
        return True

    def stream(self):
        return "s"

    def event(self):
        return _StuckEvent()


t = _gpu.Tracker(_StuckSource())
owner = object()
for i in range(_gpu.MAX_PENDING + 5):
    h = t.begin(owner)
    if h is not None:
        t.end(h, i, 1000 + i)
assert len(t.pending) == _gpu.MAX_PENDING, len(t.pending)
assert t.lost == 5, t.lost
assert len(t.free) == 0
t.finish()  # nothing complete at the last read: every pending hand-over is lost
print(b"".join(sent).decode())
"""
    r = run_python(code, timeout=600)  # (no torch imported: the tracker alone)
    lines = r.stdout.strip().splitlines()
    assert lines == [f"gpu_lost {k}" for k in range(1, 5)] + [f"gpu_lost {64 + 5}"], lines


def test_autotune_takes_the_gpus_step(monkeypatch):
    """lotus.torch.autotune's consumer step is the GPU's time per batch where its events were
    complete at the epoch's end (the stream's exact figures), the host's elsewhere."""
    import time

    from fake_cuda import FakeCuda
    from lotus.autotune import AutotunedLoader, Tuner
    from lotus.loaders import _gpu

    class Slow(torch.utils.data.Dataset):
        def __len__(self):
            return 6

        def __getitem__(self, i):
            time.sleep(0.03)
            return torch.tensor([i])

    got = []

    class Spy(Tuner):
        def decide(self, m):
            got.append(m)
            return super().decide(m)

    fake = FakeCuda()
    _gpu.set_event_source(fake)
    try:
        loader = torch.utils.data.DataLoader(Slow(), batch_size=1, num_workers=1)
        tuned = AutotunedLoader(loader, verbose=False, max_workers=1)
        tuned.tuner.__class__ = Spy
        for _batch in tuned:
            fake.launch(20.0)  # the training step: 20 ms on the GPU, the host does not wait
        fake.synchronize()
    finally:
        _gpu.set_event_source(None)
    m = got[0]
    log = fake.log  # A_0 B_0 A_1 B_1 ... A_5 B_5 A_6 (the call that ends the epoch)
    assert len(log) == 2 * 6 + 1
    truth = [(log[2 * i + 2] - log[2 * i + 1]) / 1e9 for i in range(6)]
    assert len(m.steps) == 6
    gpu_steps = 0
    for (cpu, off), t in zip(m.steps, truth):
        if cpu + off == pytest.approx(t, abs=1e-9):
            gpu_steps += 1
            assert t >= 0.020  # the kernel's planted 20 ms, whatever the host's step took
    # Every step but possibly the last (its events may still be queued at the epoch's end).
    assert gpu_steps >= 5, (m.steps, truth)
