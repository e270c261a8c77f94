# SPDX-License-Identifier: MIT
"""lotus.torch.autotune (issue #52): the model, each decision rule, the printed lines, and a real
DataLoader. The rules are checked on a simulated world (the model itself, with known costs, as
the clock): deterministic, no timing. The DataLoader tests use tiny sleeps and assert nothing
about time, only what ran (settings, workers, batches)."""
import io
import json
import math
import os
import pathlib
import re
import time

import pytest

from lotus.autotune import (EpochMeasurement, Tuner, decision_line, handoff_of,
                            memory_budget_bytes, predict_memory, pytorch_suggested_max_workers,
                            simulate_epoch)

HERE = pathlib.Path(__file__).resolve().parent
MiB = 1 << 20


# ---- the model ---------------------------------------------------------------------------------

def _write_trace(d, batch_ms, workers, slot_start_ms, prefetch=2):
    """A one-epoch trace of a DataLoader: batch i prepared by worker i mod `workers` for
    batch_ms[i] ms, worker w's first batch `slot_start_ms[w]` ms after the epoch's first record
    (SBatchQueued_0). Whole milliseconds: lotus-tool reads exactly these times."""
    t0, ms = 1_722_800_000_000_000_000, 1_000_000
    free = [t0 + s * ms for s in slot_start_ms]
    done = []
    for i, b in enumerate(batch_ms):
        w = i % workers
        done.append((w, free[w], b * ms))
        free[w] += b * ms
    main = [f"SBatchQueued_{i},{t0 + i * 1000},1000" for i in range(prefetch * workers)]
    t = t0
    for i, (_w, start, dur) in enumerate(done):
        ready = start + dur
        main.append(f"SBatchWait_{i},{t},{max(1000, ready - t)}")
        t = max(t, ready) + 1000
        main.append(f"SBatchConsumed_{i},{t},1000")
        if i + prefetch * workers < len(batch_ms):
            main.append(f"SBatchQueued_{i + prefetch * workers},{t},1000")
    (d / "lotustrace_log_main_pid_500").write_text("\n".join(main) + "\n")
    for w in range(workers):
        lines = [f"SBatchPreprocessed_{i},{start},{dur}"
                 for i, (who, start, dur) in enumerate(done) if who == w]
        (d / f"lotustrace_log_worker_pid_{501 + w}").write_text("\n".join(lines) + "\n")


def test_autotune_and_lotus_tool_whatif_predict_the_same_epoch_for_a_trace(tmp_path,
                                                                           monkeypatch):
    # One model: lotus-tool whatif's (tools/lotus-tool/model/epoch_model.cpp), which autotune
    # calls through lotus._lotus. Given the inputs whatif takes from a trace (each batch's wall
    # time split by one off-CPU share, the step and its CPU part, the worker slots' measured
    # start-up), autotune's simulate_epoch returns whatif's prediction to the last bit.
    import subprocess

    import lotus._lotus
    from lotus.autotune import model

    tool = os.environ.get("LOTUS_TOOL")
    if not tool:
        pytest.skip("LOTUS_TOOL (the lotus-tool of this build) is not set")
    batch_ms = [7, 3, 12, 5, 9, 4, 15, 6, 8, 2, 11, 5]
    slot_start_ms = [2, 3]
    _write_trace(tmp_path, batch_ms, 2, slot_start_ms)
    calls = []
    native = lotus._lotus._simulate_epoch
    monkeypatch.setattr(lotus._lotus, "_simulate_epoch", lambda *a: calls.append(a) or native(*a))
    for workers, pf, cores, step_ms, step_cpu_ms, share, unordered in [
            (3, 2, 4, 1.5, 0.5, 0.25, False), (1, 1, 2, 4.0, 4.0, 0.0, False),
            (6, 4, 2, 2.0, 1.0, 0.6, False), (4, 2, 3, 0.0, 0.0, 0.1, True)]:
        args = [tool, "whatif", str(tmp_path), "--json", "--workers", str(workers),
                "--prefetch-factor", str(pf), "--cores", str(cores), "--step-ms", str(step_ms),
                "--step-cpu-ms", str(step_cpu_ms), "--offcpu-share", str(share)]
        r = subprocess.run(args + (["--unordered"] if unordered else []), capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        whatif = json.loads(r.stdout)
        # (cores >= the 2 workers traced: whatif takes the batch times as they are)
        assert whatif["measured"]["workers"] == 2 and whatif["model"]["work_scale"] == 1.0
        # whatif's inputs, computed as lotus-tool computes them (model/whatif.cpp).
        batches = [(max(0.0, b) / 1e3 * (1.0 - share), max(0.0, b) / 1e3 * share)
                   for b in batch_ms]
        step_s = max(0.0, step_ms) / 1e3
        cpu = min(step_s, max(0.0, step_cpu_ms) / 1e3)
        begin = [(s * 1_000_000) / 1e6 / 1e3 for s in slot_start_ms]
        calls.clear()
        got = model.simulate_epoch(batches, workers, pf, cores, (cpu, step_s - cpu),
                                   unordered=unordered, begin=begin)
        assert len(calls) == 1  # the native model, not a copy
        assert got["last_take"] == whatif["predicted"]["epoch_seconds"]
        assert min(1.0, got["wait_s"] / got["last_take"]) == whatif["predicted"]["wait_share"]
        assert got["seconds"] > got["last_take"] or step_ms == 0
    # The tuner predicts through the same function.
    calls.clear()
    tuner = Tuner(2, 2, cores=2, log=None)
    tuner.decide(EpochMeasurement(2, 2, [(0.004, 0.001)] * 12, [(0.001, 0.0)] * 12, 0.05))
    assert len(calls) > 10


def test_the_model_gives_the_hand_computed_epochs():
    # The hand-computed cases of tests/tool/data/loader_model_cases.json (lotus-tool's own test
    # checks every case of that file), through autotune's door to the model: (batch ms, workers,
    # prefetch_factor, cores, step ms, its CPU ms, off-CPU share) -> the last batch taken (s).
    cases = [([10.0] * 10, 1, 1, 1, 0, 0, 0, 0.100),  # one worker: the sum
             ([10.0] * 10, 4, 2, 2, 0, 0, 0, 0.050),  # four workers on two cores: as two
             ([1.0] * 10, 2, 2, 2, 10, 0, 0, 0.091),  # a step longer than the batches
             ([10.0] * 2, 1, 2, 1, 10, 0, 0, 0.020),  # the step off the cores
             ([10.0] * 2, 1, 2, 1, 10, 10, 0, 0.030),  # the step on the one core: half speed
             ([20.0] * 8, 8, 1, 1, 0, 0, 0.9, 0.034),  # I/O overlaps on one core
             ([20.0] * 8, 8, 1, 1, 0, 0, 0, 0.160)]  # all CPU: the sum
    for batch_ms, workers, pf, cores, step_ms, cpu_ms, share, last in cases:
        batches = [(ms / 1e3 * (1 - share), ms / 1e3 * share) for ms in batch_ms]
        r = simulate_epoch(batches, workers, pf, cores, (cpu_ms / 1e3, (step_ms - cpu_ms) / 1e3))
        assert r["last_take"] == pytest.approx(last, abs=1e-9), (batch_ms, workers, cores)
        # The last step runs alone: the epoch the training loop sees ends one step later.
        assert r["seconds"] == pytest.approx(last + step_ms / 1e3, abs=1e-9)


def test_the_consumer_pays_for_workers_on_its_cores():
    # Rule 3: with the step on the CPU, every worker on a core slows it. One core, one worker,
    # two 10 ms batches, a 10 ms step: off the cores the worker runs beside the step (20 ms to
    # the last batch, 30 ms with the last step); on the core both run at half speed (30, 40 ms).
    off = simulate_epoch([(0.010, 0.0)] * 2, 1, 2, 1, step=(0.0, 0.010))
    on = simulate_epoch([(0.010, 0.0)] * 2, 1, 2, 1, step=(0.010, 0.0))
    assert (off["last_take"], off["seconds"]) == pytest.approx((0.020, 0.030))
    assert (on["last_take"], on["seconds"]) == pytest.approx((0.030, 0.040))
    # CPU-bound batches and a CPU step on 2 cores: past the cores, more workers only take cores
    # from the step (never faster, and slower than one worker less than the cores + 1).
    batches = [(0.016, 0.0)] * 24
    t = {n: simulate_epoch(batches, n, 2, 2, step=(0.006, 0.0))["seconds"] for n in (1, 2, 3, 6)}
    assert t[6] >= t[3] >= t[2] - 1e-12
    # The same step off the cores (the C++ model's view before --step-cpu-ms): the step costs
    # nothing of the workers' cores, 2 workers run the epoch at the cores' pace.
    t_off = {n: simulate_epoch(batches, n, 2, 2, step=(0.0, 0.006))["seconds"] for n in (2, 6)}
    assert t_off[2] == pytest.approx(24 * 0.016 / 2 + 0.006 + 0.016 / 2 * 0 + 0.006 * 0, rel=0.1)
    assert t[2] > t_off[2] and t[6] > t_off[6]


def test_off_cpu_batches_gain_from_workers_beyond_the_cores():
    batches = [(0.0001, 0.030)] * 32
    t = [simulate_epoch(batches, n, 2, 2, step=(0.0, 0.002))["seconds"] for n in (1, 2, 8, 16)]
    assert t[0] > t[1] > t[2] > t[3]
    assert t[3] < t[1] / 4


def test_a_batchs_feeder_thread_shares_the_cores_and_delays_the_take():
    # A batch then costs 5 ms more CPU on its worker's feeder thread (pickling it), which runs
    # beside the worker's next batch. One core, one worker, two 10 ms batches: batch 0 ends at
    # 10; its feeder and batch 1 share the core at half speed until the feeder is done (20);
    # batch 1 runs alone to 25, its feeder to 30: the second batch is taken at 30, the core busy
    # throughout (30 ms of CPU). The worker's wait for the core (5 ms) is counted, the feeder's
    # is not (the measurement it is fitted to has the workers' main threads only).
    one = simulate_epoch([(0.010, 0.0)] * 2, 1, 2, 1, side=0.005)
    assert one["last_take"] == pytest.approx(0.030)
    assert one["runq_workers_s"] == pytest.approx(0.005)
    # Two cores: the feeder runs on the second core, beside the worker: 10 + 10 + 5.
    assert simulate_epoch([(0.010, 0.0)] * 2, 1, 2, 2, side=0.005)["last_take"] == \
        pytest.approx(0.025)
    # Two workers, two cores, four batches: 60 ms of CPU on two cores, 30 ms.
    two = simulate_epoch([(0.010, 0.0)] * 4, 2, 2, 2, side=0.005)
    assert two["last_take"] == pytest.approx(0.030)
    # Without it the same batches are ready as their CPU part ends.
    assert simulate_epoch([(0.010, 0.0)] * 4, 2, 2, 2)["last_take"] == pytest.approx(0.020)
    # On 2 cores, CPU-bound: a third worker gains nothing a feeder's CPU would give it.
    batches = [(0.010, 0.0)] * 32
    t = {n: simulate_epoch(batches, n, 2, 2, step=(0.002, 0.0), side=0.004)["seconds"]
         for n in (1, 2, 3, 4)}
    assert t[1] > t[2] and t[3] >= t[2] - 1e-12 and t[4] >= t[2] - 1e-12


def test_a_step_with_parallel_threads_takes_more_of_the_cores():
    # The step's CPU part keeps 2 threads on the cores (torch's intra-op threads beside the
    # training thread). 2 cores, 1 worker, two 10 ms batches, a 10 ms step: batch 0 alone to 10;
    # its step (2 threads) and batch 1 share the 2 cores at 2/3 speed, both done at 25; the last
    # step runs alone: 35. With the training thread alone, the three never wait: 20, 30.
    two = simulate_epoch([(0.010, 0.0)] * 2, 1, 2, 2, step=(0.010, 0.0), step_threads=2)
    assert (two["last_take"], two["seconds"]) == pytest.approx((0.025, 0.035))
    assert two["runq_main_s"] == pytest.approx(0.005)  # the training thread's wait only
    one = simulate_epoch([(0.010, 0.0)] * 2, 1, 2, 2, step=(0.010, 0.0))
    assert (one["last_take"], one["seconds"]) == pytest.approx((0.020, 0.030))


def test_a_handoff_latency_is_hidden_by_a_deeper_prefetch():
    # One worker, two 10 ms batches: with prefetch_factor 1 the second index is sent when the
    # first batch is taken (10 ms) and reaches the worker 5 ms later: 15..25 ms. With 2 it was
    # sent at the start: 10..20 ms.
    one = simulate_epoch([(0.010, 0.0)] * 2, 1, 1, 1, handoff=0.005)
    two = simulate_epoch([(0.010, 0.0)] * 2, 1, 2, 1, handoff=0.005)
    assert one["last_take"] == pytest.approx(0.025) and two["last_take"] == pytest.approx(0.020)
    assert simulate_epoch([(0.010, 0.0)] * 2, 1, 1, 1)["last_take"] == pytest.approx(0.020)
    # Measured: batch j is sent when batch j - outstanding is taken; its worker was free when its
    # previous batch ended. Two workers, outstanding 2: batch 2 (worker A) sent at take 0 = 10,
    # A free at 9, started at 13: 3 ms; batch 3 (B) sent at 12, B free at 14, started 15: 1 ms.
    takes = [10, 12, 20, 22]
    spans = [("A", 0, 9), ("B", 0, 11), ("A", 13, 19), ("B", 15, 21)]
    assert handoff_of(takes, spans, 2) == 3  # the median (upper) of [3, 1]
    assert handoff_of(takes, spans[:2], 2) == 0.0


def test_memory_prediction_and_budget_parsing():
    m = EpochMeasurement(1, 2, [(0.01, 0)], [], 1.0, main_rss=300 * MiB, worker_rss=100 * MiB)
    assert predict_memory(m, 4) == 700 * MiB
    m0 = EpochMeasurement(1, 2, [(0.01, 0)], [], 1.0, main_rss=300 * MiB, worker_rss=0)
    assert predict_memory(m0, 2) == 900 * MiB  # no worker measured: as large as the main
    assert memory_budget_bytes("1.5G") == (int(1.5 * 1024 ** 3), "option")
    assert memory_budget_bytes("512MiB") == (512 * MiB, "option")
    assert memory_budget_bytes(1000) == (1000, "option")
    assert memory_budget_bytes(None)[1] == "this machine"
    for bad in ("", "12X", "-1G", 0):
        with pytest.raises(ValueError):
            memory_budget_bytes(bad)


def test_pytorch_suggested_max_is_the_affinity():
    assert pytorch_suggested_max_workers() == len(os.sched_getaffinity(0))


# ---- a simulated world -------------------------------------------------------------------------

class World:
    """The truth: per-batch (cpu, off) costs, a step, the cores; an epoch at a setting "runs" as
    the model says, times `penalty(workers)` (what the model does not know), plus a start-up per
    worker when workers start. Memory: main + workers × worker."""

    def __init__(self, batches, step, cores=2, start_s=0.0, persistent=False,
                 penalty=lambda n: 1.0, main_rss=200 * MiB, worker_rss=100 * MiB, foreign=0.0,
                 handoff=0.0, true_cores=None):
        self.batches, self.step, self.cores, self.foreign = batches, step, cores, foreign
        self.true_cores = true_cores or cores  # the cores the job really gets
        self.handoff = handoff
        self.start_s, self.persistent, self.penalty = start_s, persistent, penalty
        self.main_rss, self.worker_rss = main_rss, worker_rss
        self.running = None

    def epoch(self, workers, pf):
        fresh = not self.persistent or self.running != (workers, pf)
        self.running = (workers, pf)
        start = self.start_s if fresh else 0.0
        r = simulate_epoch(self.batches, workers, pf, self.true_cores, self.step, start_s=start,
                           foreign=self.foreign, handoff=self.handoff)
        return EpochMeasurement(workers, pf, self.batches, [self.step] * len(self.batches),
                                r["seconds"] * self.penalty(workers), start_s=start,
                                worker_start_s=self.start_s, main_rss=self.main_rss,
                                worker_rss=self.worker_rss, batch_runq_s=r["runq_workers_s"],
                                step_runq_s=r["runq_main_s"], handoff_s=self.handoff)


def drive(world, tuner, epochs):
    """Runs `epochs` epochs, deciding at each boundary; returns the measured seconds."""
    times = []
    for _ in range(epochs):
        m = world.epoch(tuner.workers, tuner.prefetch_factor)
        times.append(m.seconds)
        tuner.decide(m)
    return times


def sweep_best(world, top=32):
    best = math.inf
    for n in range(1, top + 1):
        for pf in (1, 2, 4):
            world.running = None
            m = world.epoch(n, pf)
            if world.persistent:
                m = world.epoch(n, pf)  # the steady epoch
            best = min(best, m.seconds)
    return best


IO = dict(batches=[(0.0002, 0.032)] * 32, step=(0.0, 0.006))
CPU = dict(batches=[(0.016, 0.0)] * 24, step=(0.006, 0.0))


def test_io_like_world_from_one_worker_reaches_the_sweeps_best():
    world = World(**IO, persistent=True, start_s=0.03)
    best = sweep_best(world)
    world.running = None
    tuner = Tuner(1, 2, cores=2, persistent_workers=True, log=None)
    times = drive(world, tuner, 6)
    assert tuner.decisions[0]["workers"] > 4  # many more workers than the 2 cores
    assert max(times[3:6]) <= 1.10 * best


def test_cpu_bound_world_from_six_workers_comes_down_to_the_cores():
    world = World(**CPU, start_s=0.03)
    best = sweep_best(world)
    tuner = Tuner(6, 2, cores=2, log=None)
    times = drive(world, tuner, 6)
    assert tuner.decisions[0]["workers"] <= 2
    assert max(times[3:6]) <= 1.10 * best


def test_a_tie_at_the_cores_is_measured_not_predicted():
    # The CPU-bound pipeline (3 ms of CPU a sample, a 6 ms CPU step, 2 cores) from 6
    # workers: processor sharing predicts 2 and 3 workers alike, but the main process shares the
    # cores too, and on the development VM 2 workers ran 7-9 % slower than 3-4 (bench/README):
    # this world's penalty. The tuner moves to the model's 2, then measures the tie at 3 and keeps
    # it: epochs 4-6 within 5 % of the sweep's best of 1, 2, 3 and 6 workers.
    penalty = {1: 1.0, 2: 1.09, 3: 1.0, 4: 1.01, 5: 1.03, 6: 1.05}
    world = World(batches=[(0.012, 0.0)] * 96, step=(0.006, 0.0), start_s=0.03,
                  penalty=lambda n: penalty.get(n, 1.1))
    best = min(world.epoch(n, pf).seconds for n in (1, 2, 3, 6) for pf in (1, 2, 4))
    tuner = Tuner(6, 2, cores=2, log=None)
    times = drive(world, tuner, 8)
    workers = [d["workers"] for d in tuner.decisions]
    assert workers[:2] == [2, 3], workers
    assert "a tie at the cores the model cannot split" in tuner.decisions[1]["reason"]
    assert workers[2:] == [3] * 6, workers
    assert max(times[3:6]) <= 1.05 * best, (times, best)
    # Without the penalty 3 gains nothing measurable: it goes back or settles, never above 3.
    plain = World(batches=[(0.012, 0.0)] * 96, step=(0.006, 0.0), start_s=0.03)
    tuner = Tuner(6, 2, cores=2, log=None)
    drive(plain, tuner, 8)
    assert max(d["workers"] for d in tuner.decisions) <= 3


def test_other_processes_on_the_cores_are_fitted_from_the_run_queue_wait():
    # A shared machine: 8 threads of other processes always want a core. The loader's own
    # sharing explains part of the measured run-queue wait; the rest fits 8 foreign threads, and
    # with them more workers than the cores win a larger share of the machine: the tuner follows
    # the sweep (of the same world) there, from 6 workers and from 1.
    world = World(**CPU, foreign=8.0)
    best = sweep_best(world)
    for start in (6, 1):
        tuner = Tuner(start, 2, cores=2, log=None, contention="threads")
        times = drive(world, tuner, 6)
        assert tuner.decisions[0]["previous"]["foreign_threads"] == pytest.approx(8.0, rel=0.01)
        assert max(times[3:6]) <= 1.10 * best
    assert tuner.decisions[-1]["workers"] > 2
    # A quiet machine: the wait is the loader's own, nothing foreign is fitted.
    for contention in ("threads", "share"):
        tuner = Tuner(6, 2, cores=2, contention=contention)
        drive(World(**CPU), tuner, 1)
        p = tuner.decisions[0]["previous"]
        assert (p["foreign_threads"], p["cores_fitted"]) == (0.0, 2.0)


def test_a_job_given_fewer_cores_is_fitted_its_share():
    # Linux's autogroup: other sessions' load leaves the job 0.8 of the 2 cores, whatever its
    # thread count. The tuner fits the cores from the run-queue wait (its "share" contention).
    # CPU-bound on 0.8 cores, every setting of this world takes the same time (the sweep's best
    # is met by any), so where it ends is a tie: what holds is that its epochs are the best's
    # and its final setting as good. (Which of the tied settings it keeps follows the last bits
    # of a float sum, which Python 3.12 made exact: 6 workers there, 1–2 on Python 3.11.)
    world = World(**CPU, true_cores=0.8)
    best = sweep_best(world)
    for start in (6, 1):
        tuner = Tuner(start, 2, cores=2, contention="share")
        times = drive(world, tuner, 6)
        assert tuner.decisions[0]["previous"]["cores_fitted"] == pytest.approx(0.8, rel=0.01)
        final = tuner.decisions[-1]
        assert world.epoch(final["workers"], final["prefetch_factor"]).seconds <= 1.01 * best
        assert max(times[3:6]) <= 1.10 * best
    assert Tuner(1, 2, cores=2, contention="auto").contention in ("threads", "share")
    with pytest.raises(ValueError):
        Tuner(1, 2, contention="both")


def test_with_a_handoff_latency_it_keeps_indices_queued():
    # 4 ms from sending an index to the worker starting it: prefetch_factor 1 leaves each worker
    # idle that long per batch (the model then needs more workers, or a deeper prefetch).
    b, st = IO["batches"], IO["step"]
    for n in (2, 4, 6):
        one = simulate_epoch(b, n, 1, 2, st, handoff=0.004)["seconds"]
        assert one > simulate_epoch(b, n, 2, 2, st, handoff=0.004)["seconds"]
        assert one > simulate_epoch(b, n, 1, 2, st)["seconds"]
    world = World(**IO, persistent=True, handoff=0.004)
    best = sweep_best(world)
    tuner = Tuner(1, 1, cores=2, persistent_workers=True)
    times = drive(world, tuner, 6)
    assert tuner.decisions[0]["previous"]["handoff_seconds"] == 0.004
    assert max(times[3:6]) <= 1.10 * best


def test_never_predicted_above_the_budget():
    # I/O-like: the model wants many workers; the budget allows main + 3 workers.
    budget = 200 * MiB + 3 * 100 * MiB + MiB
    world = World(**IO, persistent=True)
    tuner = Tuner(1, 2, cores=2, memory_budget=budget, persistent_workers=True, log=None)
    drive(world, tuner, 6)
    assert max(d["workers"] for d in tuner.decisions) == 3
    for d in tuner.decisions:
        assert d["predicted_peak_rss_bytes"] <= budget == d["memory_budget_bytes"]


def test_a_setting_above_the_budget_is_left_for_one_that_fits():
    budget = 200 * MiB + 2 * 100 * MiB
    world = World(**IO, persistent=True)
    tuner = Tuner(6, 2, cores=2, memory_budget=budget, persistent_workers=True, log=None)
    drive(world, tuner, 2)
    assert tuner.decisions[0]["workers"] == 2
    assert tuner.decisions[0]["reason"] == (
        "the current setting is predicted above the memory budget (6 workers, prefetch_factor 2: "
        "predicted 800 MiB > budget 400 MiB)")


class TreeWorld(World):
    """A World whose process tree has the memory model's structure: `shared` MiB counted once,
    `private` MiB per worker, `batch` MiB per batch in flight; each epoch reports its inputs as
    autotune measures them (measure.py's _TreeMemory), and truth(n, pf) is its peak."""

    def __init__(self, shared, private, batch, **kw):
        super().__init__(**kw)
        self.shared, self.private, self.batch = shared * MiB, private * MiB, batch * MiB

    def truth(self, n, pf):
        return self.shared + n * self.private + n * pf * self.batch

    def epoch(self, workers, pf):
        m = super().epoch(workers, pf)
        m.memory = {"shared_bytes": self.shared, "worker_private_bytes": self.private,
                    "worker_start_private_bytes": self.private, "growth_per_batch_bytes": 0.0,
                    "batches_per_worker": len(self.batches) / workers,
                    "measured_workers": workers, "batch_bytes": self.batch, "batches_held": 0}
        return m


def test_explores_inside_the_budget_and_says_the_figure_of_each_refusal():
    # The I/O-bound case: 15 ms of sleep a sample, a 40 MiB cache per worker, a budget of
    # 1.05x the tree at k workers, started at 1. A page shared after fork is counted once, so
    # k workers fit and the tuner goes there (it stayed at 1 when a worker's share of the shared
    # pages was counted once per worker); k + 1 workers are refused, with their figure.
    for k in (2, 3):
        world = TreeWorld(shared=250, private=50, batch=1, batches=[(0.0, 0.06)] * 66,
                          step=(0.0, 0.0), persistent=True, start_s=0.02)
        budget = int(1.05 * world.truth(k, 2))
        tuner = Tuner(1, 2, cores=2, memory_budget=budget, persistent_workers=True, log=None)
        drive(world, tuner, 6)
        assert [d["workers"] for d in tuner.decisions] == [k] * 6
        for d in tuner.decisions:
            assert world.truth(d["workers"], d["prefetch_factor"]) <= budget
            assert d["predicted_peak_rss_bytes"] == world.truth(d["workers"], d["prefetch_factor"])
        first = tuner.decisions[0]
        refused = first["refused"][0]
        assert refused["workers"] == k + 1
        assert refused["predicted_peak_bytes"] > budget
        assert (f"{k + 1} workers, prefetch_factor {refused['prefetch_factor']}: predicted "
                f"{refused['predicted_peak_bytes'] / MiB:.0f} MiB > budget "
                f"{budget / MiB:.0f} MiB") in first["reason"]
        assert first["memory"]["shared_bytes"] == 250 * MiB
        # Epochs 4-6 within 10 % of the sweep's best steady epoch among the settings that fit.
        sweep = TreeWorld(shared=250, private=50, batch=1, batches=[(0.0, 0.06)] * 66,
                          step=(0.0, 0.0), persistent=True, start_s=0.02)
        best = math.inf
        for n in range(1, 9):
            for pf in (1, 2, 4):
                if sweep.truth(n, pf) <= budget:
                    sweep.epoch(n, pf)
                    best = min(best, sweep.epoch(n, pf).seconds)
        times = [d["measured_epoch_seconds"] for d in tuner.decisions[2:5]]
        assert max(times) <= 1.10 * best


def test_memory_that_drifts_between_epochs_is_kept_clear_of():
    # The tree's shared part moves between epochs (other jobs map the same libraries): 250 MiB,
    # then 266, then 250... The largest change measured (16 MiB) is kept free under the budget:
    # 3 workers, 4 MiB under it by the model, are left once the drift is measured.
    world = TreeWorld(shared=250, private=50, batch=1, batches=[(0.0, 0.06)] * 66,
                      step=(0.0, 0.0), persistent=True, start_s=0.02)
    epoch, count = world.epoch, [0]

    def drifting(workers, pf):
        count[0] += 1
        m = epoch(workers, pf)
        m.memory["shared_bytes"] += 16 * MiB * (count[0] % 2 == 0)
        return m

    world.epoch = drifting
    budget = world.truth(3, 2) + 4 * MiB
    tuner = Tuner(1, 2, cores=2, memory_budget=budget, persistent_workers=True, log=None)
    drive(world, tuner, 4)
    d = tuner.decisions
    assert d[0]["workers"] == 3 and d[0]["memory_drift_bytes"] == 0
    assert d[1]["memory_drift_bytes"] == 16 * MiB
    assert d[1]["workers"] == 2
    assert "of drift measured > budget" in d[1]["reason"]
    assert all(x["workers"] <= 2 for x in d[1:])


def test_never_a_setting_predicted_slower_than_the_current_one():
    # Every decision's prediction (the model on the measured epoch, calibrated) is at most the
    # current setting's, in several worlds and starting points; the one exception, a tie at the
    # cores measured (`probe`), is predicted at most 5 % slower.
    for spec, start, persistent in ((IO, 1, True), (CPU, 6, False), (CPU, 1, False),
                                    (IO, 16, False)):
        world = World(**spec, persistent=persistent, start_s=0.02)
        tuner = Tuner(start, 2, cores=2, persistent_workers=persistent, log=None)
        for _ in range(5):
            cur = (tuner.workers, tuner.prefetch_factor)
            m = world.epoch(*cur)
            tuner.decide(m)
            d = tuner.decisions[-1]
            calib = d["calibration"]
            score = lambda n, pf: simulate_epoch(m.batches, n, pf, 2, m.mean_step(),
                                                 start_s=0.0 if persistent else 0.02)["seconds"]
            if d["probe"]:
                assert "a tie at the cores" in d["reason"] and d["workers"] == cur[0] + 1
                assert score(d["workers"], d["prefetch_factor"]) <= 1.05 * score(*cur)
            elif d["changed"] and not d["reason"].startswith("the last change"):
                assert score(d["workers"], d["prefetch_factor"]) <= score(*cur) + 1e-12


def cpu_world(truth, optimism, start_s=0.006):
    """The CPU world, workers started each epoch, where an epoch at n workers (in `truth`) runs
    truth[n] x the one at 3 workers, and the model is `optimism` (1.38: 38 %) optimistic at 3;
    other counts 20 % slower than the model's figure, scaled as 3's. `truth` is read at each
    epoch: a test may change it between runs."""
    def model(n):
        return simulate_epoch(CPU["batches"], n, 2, 2, CPU["step"], start_s=start_s)["seconds"]

    three = model(3) * optimism

    def penalty(n):
        return three * truth[n] / model(n) if n in truth else optimism * 1.2

    return World(**CPU, persistent=False, start_s=start_s, penalty=penalty)


def test_cpu_bound_from_6_workers_reaches_the_tie_at_the_cores_by_epoch_4():
    # bench/python/autotune_regret.py's cpu3 on the quiet 2-core VM: CPU-bound batches, workers
    # started each epoch, started at 6; the model was 38 % optimistic at every count and ties 2
    # and 3 workers, where 3 measured 4 % faster than 2 and 6 workers 12 % slower than 3. The
    # tuner left 6 for 2, judged 2 against its uncalibrated model of 6 (which looked faster),
    # went back to 6 to measure it, then settled at 2: epochs 4-6 at 6, 2, 2 (+9-13 %). Now the
    # first epoch's measured time stands for 6 workers, and the tie at the cores is measured
    # before settling: 3 workers from epoch 4 on. (A worker's start: 2 % of the epoch, as there.)
    world = cpu_world({2: 1.04, 3: 1.0, 6: 1.12}, 1.38)
    tuner = Tuner(6, 2, cores=2, persistent_workers=False, log=None)
    drive(world, tuner, 7)
    ran = [6] + [d["workers"] for d in tuner.decisions]
    assert ran[3:6] == [3, 3, 3], [d["reason"] for d in tuner.decisions]
    assert any(d["probe"] for d in tuner.decisions)


def test_a_careful_tuner_measures_the_tie_at_the_cores_at_once():
    # The cpu3 pipeline again, as it ran on 2026-11-28: the model 14 % optimistic at every count,
    # 2 workers measured as slow as the first epoch's 6, and 3 the fastest (5 % faster). The move
    # to 2 misses by over 10 % (careful), and within the 20 % noise prior one epoch at 2 tells
    # nothing: the tie at 3 is measured at epoch 3, not after a second epoch at 2, and the faster
    # of the two is kept: epochs 3-8 at 3 workers.
    truth = {2: 1.06, 3: 1.0, 6: 1.05}
    world = cpu_world(truth, 1.14)
    tuner = Tuner(6, 2, cores=2, persistent_workers=False, log=None)
    drive(world, tuner, 8)
    d = tuner.decisions
    assert d[0]["workers"] == 2 and d[1]["caution"] == 1, [x["reason"] for x in d]
    assert d[1]["probe"] and d[1]["workers"] == 3, d[1]["reason"]
    assert "within the epoch-to-epoch noise" in d[1]["reason"]
    assert [x["workers"] for x in d[1:]] == [3] * 7
    assert d[2]["settled"] and "the tie at the cores, measured" in d[2]["reason"]
    # Where N + 1 measures slower, the tuner goes back to N and settles there.
    truth[3] = 1.10
    world = cpu_world(truth, 1.14)
    tuner = Tuner(6, 2, cores=2, persistent_workers=False, log=None)
    drive(world, tuner, 6)
    ran = [x["workers"] for x in tuner.decisions]
    assert ran[:3] == [2, 3, 2] and ran[3:] == [2] * 3, [x["reason"] for x in tuner.decisions]
    assert "back to 2 workers, settled" in tuner.decisions[2]["reason"]


def test_a_persistent_change_must_repay_its_restart_within_5_epochs():
    # From 5 persistent workers the model's best is 6 (tolerance 0: the strict best), 6 % faster.
    # Free to start, the tuner moves; when the 6 workers take 0.3 s each to start, the restart
    # would take more than 5 epochs of that gain to repay: it stays, says so, and settles.
    for start_s, moves in ((0.0, True), (0.3, False)):
        world = World(**IO, persistent=True, start_s=start_s)
        tuner = Tuner(5, 2, cores=2, persistent_workers=True, tolerance=0.0)
        drive(world, tuner, 3)
        first = tuner.decisions[0]
        assert (first["workers"] == 6) == moves, first
        if not moves:
            saved = (simulate_epoch(IO["batches"], 5, 2, 2, IO["step"])["seconds"]
                     - simulate_epoch(IO["batches"], 6, 2, 2, IO["step"])["seconds"])
            m = re.match(r"6 workers, prefetch_factor 2 would repay its restart \(([0-9.]+) s\) "
                         r"in ([0-9]+) epochs, more than 5$", first["reason"])
            assert m, first["reason"]
            assert float(m.group(1)) > 5 * saved
            assert int(m.group(2)) == round(float(m.group(1)) / saved)
            assert tuner.decisions[1]["reason"].endswith("its last prediction within 10 %: settled")
            assert [d["workers"] for d in tuner.decisions] == [5, 5, 5]
    # Without persistent workers every epoch pays the start-up: the score has it, no payback.
    world = World(**IO, persistent=False, start_s=0.3)
    tuner = Tuner(5, 2, cores=2, persistent_workers=False, tolerance=0.0)
    drive(world, tuner, 2)
    assert "repay" not in tuner.decisions[0]["reason"]


def scripted_tuner(scores, cur, **kw):
    """A tuner whose model is a table: predicted epoch seconds per worker count (prefetch_factor
    2 only, at most 4 workers), and an epoch measured at `cur` exactly as predicted."""
    tuner = Tuner(cur, 2, cores=2, max_workers=4, prefetch_factors=(2,), **kw)
    tuner._predict = lambda m, n, pf, start_s, fit=None: scores[n]
    m = EpochMeasurement(cur, 2, [(0.01, 0.0)] * 8, [(0.0, 0.0)] * 8, scores[cur])
    m.foreign, m.cores = 0.0, 2.0  # what the model's fit would have set (no other load)
    return tuner, m


def test_a_cheaper_setting_gives_up_at_most_a_tenth_of_the_best_gain():
    # The best (3 workers) is predicted 3 % faster than the current 4; 2 workers are within the
    # 3 % tolerance of the best but give up a third of its gain: the best is taken.
    tuner, m = scripted_tuner({1: 1.5, 2: 0.99, 3: 0.97, 4: 1.0}, 4)
    assert tuner.decide(m) == (3, 2)
    assert tuner.decisions[0]["reason"] == "the model's choice (predicted gain 3.0 %)"
    # From far away (the current epoch predicted twice the best), 2 workers give up a tiny share
    # of the gain: the cheapest within the tolerance is taken.
    tuner, m = scripted_tuner({1: 1.5, 2: 0.99, 3: 0.97, 4: 2.0}, 4)
    assert tuner.decide(m) == (2, 2)


def test_a_move_predicted_to_gain_under_1_percent_is_not_made():
    tuner, m = scripted_tuner({1: 1.5, 2: 1.2, 3: 0.995, 4: 1.0}, 4)
    assert tuner.decide(m) == (4, 2)
    assert tuner.decisions[0]["reason"] == (
        "3 workers, prefetch_factor 2 is predicted only 0.5 % faster (< 1 %)")
    assert not tuner.decisions[0]["settled"]
    # The same again, the last prediction right: settled there.
    assert tuner.decide(m) == (4, 2)
    assert tuner.decisions[1]["reason"].endswith("(< 1 %); its last prediction within 10 %: settled")
    assert tuner.decisions[1]["settled"]


def test_persistent_workers_are_not_restarted_for_a_gain_under_5_percent():
    # The H200 job of bench/README (2026-11-27): at 12 persistent workers, the tuner moved to
    # prefetch_factor 2 for a predicted 1.9 % and never settled: each move a restart, each gain
    # within the model's 10-35 % error there. A restart is certain, so a move that restarts
    # persistent workers must be predicted to gain 5 %: held (said, with the figure), and held
    # twice in a row the tuner settles.
    scores = {1: 1.5, 2: 1.2, 3: 1.0, 4: 0.981}
    tuner, m = scripted_tuner(scores, 3, persistent_workers=True)
    assert tuner.decide(m) == (3, 2)
    d = tuner.decisions
    assert d[0]["reason"] == ("4 workers, prefetch_factor 2 is predicted 1.9 % faster: under the "
                              "5 % a restart of the persistent workers must be for")
    assert not d[0]["settled"] and not d[0]["changed"]
    assert tuner.decide(m) == (3, 2)
    assert d[1]["reason"].endswith("must be for; twice in a row: settled") and d[1]["settled"]
    # Without persistent workers nothing restarts on a change (every epoch starts them): it moves.
    tuner, m = scripted_tuner(scores, 3)
    assert tuner.decide(m) == (4, 2)
    # With them, a gain of 5 % or more is made.
    tuner, m = scripted_tuner({1: 1.5, 2: 1.2, 3: 1.0, 4: 0.94}, 3, persistent_workers=True)
    assert tuner.decide(m) == (4, 2)


def test_every_decision_is_checked_against_the_epoch_that_followed():
    world = World(**IO, persistent=True, start_s=0.01)
    tuner = Tuner(1, 2, cores=2, persistent_workers=True, log=None)
    times = drive(world, tuner, 4)
    assert [d["epoch"] for d in tuner.decisions] == [2, 3, 4, 5]
    for d, measured in zip(tuner.decisions, times[1:]):
        assert d["measured_epoch_seconds"] == measured
        assert d["error"] == pytest.approx(abs(d["predicted_epoch_seconds"] - measured) / measured)
    assert tuner.decisions[-1]["measured_epoch_seconds"] is None  # its epoch has not run
    assert set(tuner.decisions[0]) >= {"epoch", "workers", "prefetch_factor",
                                       "predicted_epoch_seconds", "measured_epoch_seconds"}


def measured(n, pf, batches, step=IO["step"], seconds=None):
    """An epoch at (n, pf) that took `seconds` (default: as the model says)."""
    secs = seconds or simulate_epoch(batches, n, pf, 2, step)["seconds"]
    return EpochMeasurement(n, pf, batches, [step] * len(batches), secs)


def test_a_miss_over_10_percent_makes_the_next_decision_careful():
    # The first move, from 1 worker, lands 15 % slower than predicted, and its batches took
    # twice as long off the CPU (a disk slowing down): the model alone would now go further.
    tuner = Tuner(1, 2, cores=2, persistent_workers=True, max_workers=32)
    first = tuner.decide(measured(1, 2, IO["batches"]))
    predicted = tuner.decisions[0]["predicted_epoch_seconds"]
    slower = [(cpu, 2 * off) for cpu, off in IO["batches"]]
    m2 = measured(*first, slower, seconds=1.15 * predicted)
    free = Tuner(*first, cores=2, persistent_workers=True, max_workers=32).decide(m2)
    second = tuner.decide(m2)
    d = tuner.decisions
    assert d[0]["error"] == pytest.approx(0.15 / 1.15)  # > 10 %
    assert d[1]["caution"] == 1
    assert free[0] - first[0] >= 2
    # Caution 1: half of the way to the model's choice, and a predicted gain beyond the miss.
    assert second[0] == first[0] + math.ceil((free[0] - first[0]) / 2)
    gain = float(re.search(r"predicted gain ([\d.]+) %", d[1]["reason"])[1]) / 100
    assert d[1]["reason"].startswith("careful (caution 1): 1/2 of the way") and gain > d[0]["error"]
    # Caution 2 (two misses in a row): a quarter of the way.
    t2 = Tuner(1, 2, cores=2, persistent_workers=True, max_workers=32)
    free1 = Tuner(1, 2, cores=2, persistent_workers=True, max_workers=32).decide(
        measured(1, 2, IO["batches"]))
    t2.caution, t2._last_miss = 2, 0.30  # two misses, the last 30 % on the slow side
    got = t2.decide(measured(1, 2, IO["batches"]))
    assert got[0] == 1 + math.ceil((free1[0] - 1) / 4)
    assert "careful (caution 2): 1/4 of the way" in t2.decisions[0]["reason"]
    # Issue #62: a predicted gain over 3 times the last miss (and at least 30 %) is taken in one
    # move, careful or not (the recorded H200 job crept 2 -> 3 -> 8 -> 9 workers where 12 was
    # best). Here the gain is 78 % and the last miss 13 %.
    t3 = Tuner(1, 2, cores=2, persistent_workers=True, max_workers=32)
    t3.caution, t3._last_miss = 2, 0.13
    assert t3.decide(measured(1, 2, IO["batches"])) == free1
    whole = t3.decisions[0]["reason"]
    assert whole.startswith("careful (caution 2), but the predicted gain ") and whole.endswith(
        "over 3 times the last miss of 13.0 %: the whole way")
    # A decision within 10 % lowers the caution by one.
    p3 = t2.decisions[0]["predicted_epoch_seconds"]
    t2.decide(measured(*got, IO["batches"], seconds=p3 * 1.05))
    assert t2.decisions[1]["caution"] == 1


def slower_world(factor):
    """Moving off 1 worker makes the epoch `factor` times the 1-worker epoch (the model expects
    a large gain)."""
    base = simulate_epoch(IO["batches"], 1, 2, 2, IO["step"])["seconds"]
    return World(**IO, persistent=True,
                 penalty=lambda n: 1.0 if n == 1 else base / simulate_epoch(
                     IO["batches"], n, 1, 2, IO["step"])["seconds"] * factor)


NOISE_TAKEN = "the epoch-to-epoch noise (±20 %, taken until two epochs at one setting measure it)"


def test_it_stops_moving_when_the_last_change_gained_under_2_percent():
    # The change was 15 % slower: within the 20 % an epoch may vary before any noise is
    # measured, so one more epoch at the new setting (issue #62: one noisy epoch ended the
    # search); 15 % slower again, and the two measure the noise (0 here, taken as 2 %): a loss
    # beyond it, back to the faster setting, then never moving again. Said as a loss ("lost
    # 15 %", not "gained -15.0 %").
    tuner = Tuner(1, 2, cores=2, persistent_workers=True, log=None)
    drive(slower_world(1.15), tuner, 5)
    d = tuner.decisions
    moved = d[0]["workers"]
    assert d[0]["changed"]
    assert d[1]["reason"] == ("the last change lost 15 %, within " + NOISE_TAKEN
                              + f": one more epoch at {moved} workers to tell")
    assert not d[1]["changed"] and not d[1]["settled"]
    assert d[2]["reason"] == ("the last change lost 15 % over 2 epochs, more than the "
                              "epoch-to-epoch noise (±2.0 % measured): back to 1 worker, settled")
    assert (d[2]["workers"], d[2]["prefetch_factor"]) == (1, 2)
    assert all(x["settled"] and not x["changed"] for x in d[3:])
    assert all(x["reason"] == "settled" for x in d[3:])
    # A loss beyond the 20 % taken before any noise was measured goes back at once.
    tuner = Tuner(1, 2, cores=2, persistent_workers=True, log=None)
    drive(slower_world(1.3), tuner, 3)
    assert tuner.decisions[1]["reason"] == ("the last change lost 30 %, more than " + NOISE_TAKEN
                                            + ": back to 1 worker, settled")
    # 5 % slower, twice: back as well (the old rule stopped where it was after one epoch).
    tuner = Tuner(1, 2, cores=2, persistent_workers=True, log=None)
    drive(slower_world(1.05), tuner, 4)
    d = tuner.decisions
    assert d[1]["reason"] == ("the last change lost 5.0 %, within " + NOISE_TAKEN
                              + f": one more epoch at {moved} workers to tell")
    assert not d[1]["changed"] and not d[1]["settled"]
    assert d[2]["reason"] == ("the last change lost 5.0 % over 2 epochs, more than the "
                              "epoch-to-epoch noise (±2.0 % measured): back to 1 worker, settled")
    assert d[2]["workers"] == 1 and all(not x["changed"] for x in d[3:])


def test_it_stops_once_the_model_chose_the_same_setting_twice_and_was_right():
    world = World(**IO, persistent=True)
    tuner = Tuner(1, 2, cores=2, persistent_workers=True)
    drive(world, tuner, 5)
    d = tuner.decisions
    assert d[0]["changed"] and d[1]["reason"] == "the current setting is the model's choice"
    assert d[1]["error"] <= 0.10
    assert d[2]["reason"] == ("the model's choice again, its last prediction within 10 %: "
                              "settled") and d[2]["settled"]
    assert [x["reason"] for x in d[3:]] == ["settled", "settled"]


def test_a_change_that_gained_but_under_2_percent_settles_where_it_is():
    tuner = Tuner(1, 2, cores=2, persistent_workers=True, log=None)
    drive(slower_world(0.99), tuner, 4)
    d = tuner.decisions
    # One epoch: within the noise, one more to tell (issue #62); two: settled where it is.
    assert d[1]["reason"].startswith("the last change gained 1.0 %, within the epoch-to-epoch")
    assert d[2]["reason"] == ("the last change gained 1.0 % over 2 epochs, within the "
                              "epoch-to-epoch noise (±2.0 % measured) and under the 2 % a change "
                              "must gain: settled")
    assert not d[1]["changed"] and not d[2]["changed"] and d[2]["workers"] == d[0]["workers"]


# ---- the printed lines -------------------------------------------------------------------------

LINE = re.compile(
    r"lotus\.autotune: epoch (\d+) ran (\d+) workers?, prefetch_factor (\d+): ([\d.]+) s"
    r"(?: \(predicted ([\d.]+) s, error (\d+) %\))?(, a warm-up \([^)]*\))?; epoch (\d+): "
    r"(\d+) workers?, prefetch_factor (\d+), predicted ([\d.]+) s, peak memory (\d+) MiB of "
    r"(\d+) MiB; (other work on the job's cores: [^;]*; )?(.+)$")


def check_lines(lines, decisions):
    """Every printed figure is the decision's (rounded as printed)."""
    assert len(lines) == len(decisions)
    for k, (line, d) in enumerate(zip(lines, decisions)):
        g = LINE.match(line)
        assert g, line
        p = d["previous"]
        g = [None, *g.groups()[:6], *g.groups()[7:13], g[15]]  # the groups as they were numbered
        line_g = LINE.match(line)
        assert bool(line_g[7]) == p["warmup"]  # the warm-up is said (issue #62)
        assert (line_g[14] or None) == (d["load"] + "; " if d["load"] else None)
        assert int(g[1]) == d["epoch"] - 1 and int(g[7]) == d["epoch"]
        assert (int(g[2]), int(g[3])) == (p["workers"], p["prefetch_factor"])
        assert float(g[4]) == pytest.approx(p["measured_epoch_seconds"], abs=5e-4)
        if k > 0:
            prev = decisions[k - 1]
            assert float(g[5]) == pytest.approx(prev["predicted_epoch_seconds"], abs=5e-4)
            assert int(g[6]) == round(100 * prev["error"])
            # The epoch that followed the previous decision is this line's measured epoch.
            assert prev["measured_epoch_seconds"] == p["measured_epoch_seconds"]
            assert (prev["workers"], prev["prefetch_factor"]) == (p["workers"],
                                                                  p["prefetch_factor"])
        else:
            assert g[5] is None
        assert (int(g[8]), int(g[9])) == (d["workers"], d["prefetch_factor"])
        assert float(g[10]) == pytest.approx(d["predicted_epoch_seconds"], abs=5e-4)
        assert int(g[11]) == round(d["predicted_peak_rss_bytes"] / MiB)
        assert int(g[12]) == round(d["memory_budget_bytes"] / MiB)
        assert g[13] == d["reason"]


def test_each_decision_prints_one_line_of_its_own_figures():
    lines = []
    world = World(**IO, persistent=True, penalty=lambda n: 1 + 0.06 * max(0, n - 2))
    tuner = Tuner(1, 2, cores=2, memory_budget="2G", persistent_workers=True, log=lines.append)
    drive(world, tuner, 6)
    check_lines(lines, tuner.decisions)
    # The reasons name the rule that decided, and its figures are the decisions' own.
    for d in tuner.decisions:
        gain = re.search(r"predicted gain (-?[\d.]+) %", d["reason"])
        if gain and d["changed"]:
            assert float(gain[1]) > 0
    assert decision_line(tuner.decisions[0]) == lines[0]


# ---- a real DataLoader -------------------------------------------------------------------------

torch = pytest.importorskip("torch")
import lotus.torch  # noqa: E402  (the export)


class Sleepy(torch.utils.data.Dataset):
    """Each sample sleeps 20 ms (I/O-like) and says which process loaded it. 20 ms, not less: on
    a loaded machine the kernel books up to ~5 ms of a short sleep as run-queue wait, and a batch
    of 4 ms sleeps then measured as mostly waiting for a CPU, so the tuner (rightly, for what it
    saw) kept 1 worker (seen at load 4 with pytest-xdist and at load 11)."""

    def __len__(self):
        return 24

    def __getitem__(self, i):
        time.sleep(0.02)
        return torch.tensor([i, os.getpid()], dtype=torch.int64)


def test_autotune_is_exported_and_runs_a_dataloader_in_place():
    loader = torch.utils.data.DataLoader(Sleepy(), batch_size=4, num_workers=1,
                                         persistent_workers=True)
    out = io.StringIO()
    tuned = lotus.torch.autotune(loader, max_workers=3, stream=out)
    assert len(tuned) == len(loader) == 6
    pids, settings = [], [tuned.setting]
    for _ in range(4):
        seen = []
        for batch in tuned:
            seen.extend(batch[:, 0].tolist())
            pids.append(set(batch[:, 1].tolist()))
        assert sorted(seen) == list(range(24))  # every sample once per epoch
        settings.append(tuned.setting)
    tuned.close()
    d = tuned.decisions
    assert len(d) == 4
    # Each epoch ran the setting decided for it: as many worker processes as workers.
    per_epoch = [set().union(*pids[6 * e:6 * e + 6]) for e in range(4)]
    for e in range(4):
        assert len(per_epoch[e]) == settings[e][0], (e, settings)
    # I/O-like: it moved off 1 worker; persistent workers restarted only when the setting changed.
    assert d[0]["changed"] and d[0]["workers"] > 1
    for e in range(1, 4):
        changed = settings[e] != settings[e - 1]
        assert (per_epoch[e] == per_epoch[e - 1]) == (not changed), (e, settings)
    # The measurements behind it: batches off the CPU (sleeps), the step's figures.
    check_lines(out.getvalue().splitlines(), d)


def test_once_settled_it_measures_nothing_but_says_each_epoch():
    # Settled (here after its first decision), workers not persistent: each later epoch runs the
    # plain loader (the loader's own collate_fn) and is checked by its time alone, one printed
    # line each, every figure the decision's.
    loader = torch.utils.data.DataLoader(Sleepy(), batch_size=4, num_workers=1)
    out = io.StringIO()
    tuned = lotus.torch.autotune(loader, max_workers=2, stream=out)
    real = tuned.tuner.decide

    def decide(m):
        nxt = real(m)
        tuned.tuner._settle()
        return nxt
    tuned.tuner.decide = decide
    for _ in range(3):
        assert sorted(x for b in tuned for x in b[:, 0].tolist()) == list(range(24))
    assert tuned._current.collate_fn is loader.collate_fn
    tuned.close()
    d = tuned.decisions
    assert [x.get("quiet", False) for x in d] == [False, True, True]
    assert d[1]["previous"]["workers"] == d[0]["workers"] == d[2]["workers"]
    check_lines(out.getvalue().splitlines(), d)


def _one_epoch_measured(loader, max_workers, step=None):
    """One epoch of `loader` tuned (step() after each batch): its EpochMeasurement, the tuned
    loader (close it) and the epoch's batches."""
    from lotus.autotune import AutotunedLoader
    got = []

    class Spy(Tuner):
        def decide(self, m):
            got.append(m)
            return super().decide(m)

    tuned = AutotunedLoader(loader, verbose=False, max_workers=max_workers)
    tuned.tuner.__class__ = Spy
    batches = []
    for batch in tuned:
        batches.append(batch)
        if step is not None:
            step()
    return got[0], tuned, batches


def test_the_measurement_splits_cpu_and_off_cpu_time():
    class Burn(torch.utils.data.Dataset):
        def __len__(self):
            return 8

        def __getitem__(self, i):
            end = time.thread_time() + 0.003  # 3 ms of this thread's CPU, whatever the load
            while time.thread_time() < end:
                pass
            time.sleep(0.02)
            return torch.tensor([i])

    loader = torch.utils.data.DataLoader(Burn(), batch_size=2, num_workers=1)
    # the consumer's step: 2 ms of CPU
    m, _tuned, _ = _one_epoch_measured(loader, 1, step=lambda: _burn(0.002))
    assert len(m.batches) == 4 and len(m.steps) == 4
    for cpu, off in m.batches:
        # 2 samples: 6 ms of CPU (burnt by the thread's own clock: exact), 40 ms asleep (seen
        # off the CPU; under a load of 12 on this VM the kernel's run-queue accounting put up to
        # 5 ms of a sleep into its run-queue wait -- all of it with the 5 ms sleeps this test
        # had, which then failed under load --, so only its presence is asserted)
        assert cpu >= 0.006 and off > 0
    for cpu, off in m.steps:
        assert cpu >= 0.002
    assert m.worker_rss > 0 and m.main_rss > 0 and m.start_s > 0
    assert m.seconds >= sum(c + o for c, o in m.batches)  # one worker: the batches in series


class _Costly:
    """A sample that costs CPU where PyTorch moves it: `send_ms` of the pickling thread's CPU in
    the worker (the queue's feeder), `recv_ms` of the consumer's when it is unpickled there."""

    def __init__(self, i, send_ms, recv_ms):
        self.i, self.send_ms, self.recv_ms = i, send_ms, recv_ms

    def __reduce__(self):
        _burn(self.send_ms / 1e3)
        return (_costly_arrived, (self.i, self.recv_ms))


def _burn(seconds):
    end = time.thread_time() + seconds  # this thread's CPU, whatever the load
    while time.thread_time() < end:
        pass


def _costly_arrived(i, recv_ms):
    _burn(recv_ms / 1e3)
    return i


class Costly(torch.utils.data.Dataset):
    """12 samples of 2 ms of CPU each, each costing 4 ms to send and 3 ms to receive (module
    level: Python 3.14's default start method, forkserver, pickles the dataset)."""

    def __len__(self):
        return 12

    def __getitem__(self, i):
        _burn(0.002)
        return _Costly(i, 4, 3)


def _first(samples):
    return samples[0]


def test_the_measurement_counts_the_cpu_of_sending_and_receiving_a_batch():
    # PyTorch pickles a batch on the worker's queue feeder thread, not in the loop that made
    # it, and unpickles it in the consumer's next(): CPU on the cores that the batch's and the
    # step's own clocks do not see. Planted: 4 ms to send a batch, 3 ms to receive it.
    loader = torch.utils.data.DataLoader(Costly(), batch_size=1, num_workers=2,
                                         collate_fn=_first)
    m, tuned, seen = _one_epoch_measured(loader, 2)
    assert sorted(seen) == list(range(12))  # the planted objects arrived as themselves
    # Each batch's own CPU is its 2 ms; the rest of its worker's, per batch, its 4 ms feeder
    # (and the loop between batches: a little more, never less).
    for cpu, _off in m.batches:
        assert 0.002 <= cpu < 0.004
    assert 0.004 <= m.side_s < 0.012, m.side_s
    # The consumer's 3 ms in next() is in the steps' CPU part: on the mean, as the model takes
    # it (a next() that unpickled a batch that came early, from the other worker, and kept it
    # for later, paid 6 ms; the next() that took it from there, nothing).
    assert len(m.steps) == 12 and m.mean_step()[0] >= 0.003, m.steps
    tuned.close()


def test_the_measurement_counts_the_steps_other_threads():
    # The step's parallel regions run on more threads than the training thread (torch's intra-op
    # pool): planted, each step burns 3 ms on the training thread and 3 ms on a thread of its
    # own; the process's CPU in the steps is twice the training thread's.
    import threading

    def step():
        helper = threading.Thread(target=_burn, args=(0.003,))
        helper.start()
        _burn(0.003)
        helper.join()

    loader = torch.utils.data.DataLoader(Sleepy(), batch_size=4, num_workers=1)
    m, tuned, _ = _one_epoch_measured(loader, 1, step=step)
    # The training thread's step: its 3 ms, and starting the helper, and receiving the batch;
    # the other threads' CPU in the steps, per step: the helper's 3 ms (and little more).
    assert m.mean_step()[0] >= 0.003
    assert 0.0029 <= (m.step_threads - 1) * m.mean_step()[0] <= 0.0045, m.step_threads
    assert tuned.decisions[0]["previous"]["step_threads"] == m.step_threads
    tuned.close()


def _slow_init(worker_id):
    time.sleep(0.5)


def test_the_measurement_of_start_up_and_of_the_tree_memory():
    # PyTorch starts the workers one by one inside iter() and sends the first indices once all
    # have started: a worker's start-up is iter()'s time / N; what a worker does on its own
    # before its first batch (a 0.5 s worker_init_fn) runs in parallel and is measured apart.
    # The memory model's inputs come from /proc at the epoch's boundaries.
    loader = torch.utils.data.DataLoader(Sleepy(), batch_size=4, num_workers=3,
                                         worker_init_fn=_slow_init)
    m, tuned, _ = _one_epoch_measured(loader, 3)
    assert m.start_s > 0 and m.worker_init_s >= 0.2  # the 0.5 s sleep, less up to 3 forks
    # The model begins every worker after the 3 start-ups and its own worker_init_fn.
    one = simulate_epoch([(0.0, 0.0)], 3, 2, 2, start_s=m.start_s, init_s=m.worker_init_s)
    assert one["last_take"] >= 3 * m.start_s and one["last_take"] >= m.worker_init_s
    mem = m.memory
    assert mem["measured_workers"] == 3 and mem["batches_per_worker"] == len(tuned) / 3
    assert 0 < mem["shared_bytes"] < mem["tree_bytes"] and mem["worker_private_bytes"] > 0
    assert mem["batch_bytes"] == 4 * 2 * 8  # a batch: 4 samples of 2 int64
    # At the setting it measured, the model gives back the tree it read (the batches in flight
    # added: 3 x 2 of 64 bytes).
    assert predict_memory(m, 3, 2) == pytest.approx(mem["tree_bytes"] + 6 * 64, abs=1)
    tuned.close()


def test_a_loop_left_early_decides_nothing():
    loader = torch.utils.data.DataLoader(Sleepy(), batch_size=4, num_workers=1)
    tuned = lotus.torch.autotune(loader, verbose=False)
    for k, _batch in enumerate(tuned):
        if k == 2:
            break
    assert tuned.decisions == [] and tuned.setting == (1, 2)
    tuned.close()


# ---- lotus-tool whatif/tune's options for the same terms ---------------------------------------

def test_lotus_tool_takes_the_consumers_cpu_and_the_off_cpu_share():
    import subprocess
    tool = os.environ.get("LOTUS_TOOL")
    if not tool:
        pytest.skip("LOTUS_TOOL (the lotus-tool of this build) is not set")
    golden = HERE.parent / "tool" / "data" / "golden"
    for cmd in ("whatif", "tune"):
        args = [tool, cmd, str(golden), "--cores", "1", "--json", "--step-cpu-ms", "5",
                "--offcpu-share", "0.5"] + (["--workers", "4"] if cmd == "whatif" else [])
        r = subprocess.run(args, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        if cmd == "whatif":
            model = json.loads(r.stdout)["model"]
            assert (model["step_cpu_ms"], model["offcpu_share"]) == (5.0, 0.5)
        bad = subprocess.run(args[:-1] + ["1.5"] if cmd == "tune" else
                             [tool, cmd, str(golden), "--workers", "4", "--offcpu-share", "1.5"],
                             capture_output=True, text=True, timeout=60)
        assert bad.returncode == 2 and "--offcpu-share" in bad.stderr


# ---- replays of recorded jobs (issue #62) --------------------------------------------------------

H200 = json.loads((HERE / "data" / "h200_resnet50_epochs.json").read_text())


class RecordedJob:
    """The H200 ResNet-50 job of tests/python/data/h200_resnet50_epochs.json replayed: an epoch at
    a setting takes the recorded seconds (the recorded steady epochs at that worker count in turn;
    between recorded counts, linear in the count). The first epoch of the process is the recorded
    one (10.6 s at 2 workers: worker start-up and cuDNN's autotuning), the first after persistent
    workers restart is the recorded restart epoch at that count (else the recorded restarts' mean
    ratio to their steady epochs). What the tuner measures is what such an epoch would show: 32
    batches that each take the CPU time that makes the model's epoch the recorded steady one (the
    recorded tuner's calibration was 1.00-1.03 in its steady epochs), and the consumer's step from
    the loop's time outside next(), 10 ms of it on the CPU. A warm-up's first batches are 30 %
    slower (cold), and in the process's first epoch the first 3 steps carry the GPU's extra busy
    time of that epoch (cuDNN's autotuning, waited for in the step)."""

    START_S = 0.03  # a worker's start-up (not recorded; the recorded restarts cost 0.2-0.6 s)

    def __init__(self, noise=None):
        self.cores = H200["cores"]
        self.steady, self.restart = {}, {}
        for n, epochs in H200["sweep"].items():
            self.steady[int(n)] = [e["wall"] for e in epochs[1:]]
        auto = H200["autotune_from_2"]
        self.first = auto[0]
        for prev, e in zip(auto, auto[1:]):
            if e["workers"] != prev["workers"]:
                self.restart[e["workers"]] = e["wall"]
            else:
                self.steady.setdefault(e["workers"], []).append(e["wall"])
        ratios = [w / self.mean(n) for n, w in self.restart.items()]
        self.restart_ratio = sum(ratios) / len(ratios)
        outside = [e["wall"] - e["wait"] for eps in H200["sweep"].values() for e in eps[1:]]
        self.step = (0.010, sum(outside) / len(outside) / H200["steps"] - 0.010)
        self.gpu_warmup = self.first["gpu_busy"] - sum(
            e["gpu_busy"] for e in H200["sweep"]["2"][1:]) / 2
        self.noise = noise or {}
        self.running, self.count, self.epochs = None, {}, 0

    def mean(self, n):
        if n in self.steady:
            return sum(self.steady[n]) / len(self.steady[n])
        known = sorted(self.steady)
        lo = max([k for k in known if k < n], default=known[0])
        hi = min([k for k in known if k > n], default=known[-1])
        if lo == hi:
            return self.mean(lo)
        return self.mean(lo) + (self.mean(hi) - self.mean(lo)) * (n - lo) / (hi - lo)

    def steady_epoch(self, n):
        k = self.count.get(n, 0)
        self.count[n] = k + 1
        runs = self.steady.get(n)
        return runs[k % len(runs)] if runs else self.mean(n)

    def batch_cpu(self, n):
        """The batch CPU time with which the model's epoch at n workers is the recorded one."""
        target, lo, hi = self.mean(n), 0.0, 4.0
        for _ in range(50):
            mid = (lo + hi) / 2
            r = simulate_epoch([(mid, 0.0)] * H200["steps"], n, 2, self.cores, self.step)
            lo, hi = (mid, hi) if r["seconds"] < target else (lo, mid)
        return (lo + hi) / 2

    def epoch(self, workers, pf):
        self.epochs += 1
        first = self.running is None
        fresh = first or self.running != (workers, pf)
        self.running = (workers, pf)
        cpu = self.batch_cpu(workers)
        batches = [(cpu, 0.0)] * H200["steps"]
        steps = [self.step] * H200["steps"]
        if first:
            secs = self.first["wall"]
        elif fresh:
            secs = self.restart.get(workers, self.restart_ratio * self.mean(workers))
        else:
            secs = self.steady_epoch(workers) * self.noise.get(self.epochs, 1.0)
        if fresh:
            batches[:workers] = [(1.3 * cpu, 0.0)] * min(workers, len(batches))
        if first:
            for k in range(3):
                steps[k] = (self.step[0], self.step[1] + self.gpu_warmup / 3)
        return EpochMeasurement(workers, pf, batches, steps, secs,
                                start_s=self.START_S if fresh else 0.0,
                                worker_start_s=self.START_S, main_rss=2 << 30,
                                worker_rss=600 * MiB)


def replay_h200(epochs=6, **kw):
    job = RecordedJob(**kw)
    lines = []
    tuner = Tuner(2, 2, cores=job.cores, persistent_workers=True, pin_memory=True,
                  memory_budget=H200["memory_budget_bytes"], log=lines.append)
    times = drive(job, tuner, epochs)
    return job, tuner, times, lines


def test_replay_of_the_h200_job_from_2_workers_reaches_the_best_by_the_3rd_boundary():
    # Issue #62's acceptance: the recorded autotune went 2 -> 3, 3, 8, 9, 9, 9 and settled at 9,
    # 19-53 % above the sweep's best (12 workers: 1.87 s).
    job, tuner, times, lines = replay_h200()
    best = min(job.steady[12])  # the issue's 1.87 s (12 workers' steady epochs: 1.92, 1.87 s)
    assert best == pytest.approx(1.87, abs=0.005)
    d = tuner.decisions
    # The first epoch is a warm-up: said, and neither calibrating nor a miss; its first quarter
    # (worker start-up, cuDNN's autotuning in the first steps) is not taken as steady state.
    assert "a warm-up (workers started" in lines[0]
    assert d[0]["previous"]["warmup"] and d[0]["calibration"] == 1.0
    # A large predicted gain is taken in one move: from 2 workers to the model's choice.
    assert d[0]["workers"] >= 8 and d[0]["reason"].startswith("the model's choice")
    # By the 3rd boundary it runs 12 workers (or a count whose recorded epoch is within 5 %),
    # and it stays there; it never settles at 9.
    for x in d[2:]:
        assert job.mean(x["workers"]) <= 1.05 * best, [y["workers"] for y in d]
    assert d[-1]["settled"] and d[-1]["workers"] == d[2]["workers"]
    assert not any(x["settled"] and x["workers"] == 9 for x in d)
    # The restart epoch after the move is a warm-up too: not a model miss.
    assert d[1]["previous"]["warmup"] and d[0]["miss_counted"] is False
    assert all(x["caution"] == 0 for x in d)
    assert max(times[3:]) <= 1.05 * max(job.steady[d[2]["workers"]])


def test_a_favourable_miss_does_not_make_it_careful():
    # Issue #62: "careful (caution 1): predicted gain 51.8 % is within the last miss of 81.6 %",
    # after a move that gained more than predicted. A miss on the fast side is no reason to move
    # less: the caution stays 0 and the next move goes the whole way.
    tuner = Tuner(1, 2, cores=2, persistent_workers=True, max_workers=32)
    first = tuner.decide(measured(1, 2, IO["batches"]))
    predicted = tuner.decisions[0]["predicted_epoch_seconds"]
    slower = [(cpu, 2 * off) for cpu, off in IO["batches"]]  # the model now wants more workers
    m2 = measured(*first, slower, seconds=0.6 * predicted)  # 40 % faster than predicted
    free = Tuner(*first, cores=2, persistent_workers=True, max_workers=32).decide(m2)
    second = tuner.decide(m2)
    d = tuner.decisions
    assert d[0]["error"] > 0.10 and d[1]["caution"] == 0
    assert second == free and "careful" not in d[1]["reason"]
    # The same miss on the slow side makes it careful, as before.
    t = Tuner(1, 2, cores=2, persistent_workers=True, max_workers=32)
    t.decide(measured(1, 2, IO["batches"]))
    t.decide(measured(*first, slower, seconds=1.3 * predicted))
    assert t.decisions[1]["caution"] == 1


def test_replay_one_noisy_epoch_does_not_end_the_search():
    # Issue #62: "the last change gained -8.2 % (< 2 %): settled": one noisy epoch ended the
    # search 20 % above the best. Here the first epoch after a good move (6 -> 2 CPU-bound
    # workers, 30 % faster, 6 start-ups an epoch included) is 60 % slower than the setting runs
    # (a stall from elsewhere): a 1x % "loss" in one epoch, within the 20 % an epoch may vary
    # before any is measured. It runs one more epoch there, measures the noise from the two, and
    # keeps the move.
    world = World(**CPU, start_s=0.03)
    best = sweep_best(world)
    world = World(**CPU, start_s=0.03)
    epoch = world.epoch
    count = [0]

    def noisy(workers, pf):
        count[0] += 1
        m = epoch(workers, pf)
        if count[0] == 2:
            m.seconds *= 1.6
        return m

    world.epoch = noisy
    lines = []
    tuner = Tuner(6, 2, cores=2, log=lines.append)
    times = drive(world, tuner, 6)
    d = tuner.decisions
    assert d[0]["workers"] == 2
    assert re.fullmatch(r"the last change lost 1\d %, within the epoch-to-epoch noise \(±20 %, "
                        r"taken until two epochs at one setting measure it\): one more epoch at 2 "
                        r"workers to tell", d[1]["reason"]), d[1]["reason"]
    assert not d[1]["settled"] and d[1]["workers"] == 2
    assert d[2]["previous"]["noise"] == pytest.approx(0.6)
    assert all(x["workers"] == 2 for x in d)  # never back to 6
    assert max(times[3:6]) <= 1.10 * best
    assert d[-1]["settled"]
    assert "lost" in lines[1] and "gained -" not in "".join(lines)


class LoadWorld(World):
    """A shared host: other processes' threads wanting a core change from epoch to epoch
    (`loads[k]` in epoch k + 1, the last one after)."""

    def __init__(self, loads, **kw):
        super().__init__(**kw)
        self.loads, self.count = loads, 0

    def epoch(self, workers, pf):
        self.foreign = self.loads[min(self.count, len(self.loads) - 1)]
        self.count += 1
        return super().epoch(workers, pf)


def test_replay_on_a_shared_host_reports_the_other_work_and_does_not_blame_its_move():
    # Issue #62: on a shared host (load 3-5 from other work) autotune moved 1 -> 3 workers,
    # measured the epoch under the new load, printed "gained -42.5 % (< 2 %)" and went back. Here
    # the first epoch is quiet and 4 threads of other work arrive with the second: the run-queue
    # figures show them, the line says so, the move is not judged on that epoch, its miss is
    # not the model's, and the tuner goes on to the loaded machine's best.
    lines = []
    world = LoadWorld([0.0, 4.0], **CPU)
    tuner = Tuner(1, 2, cores=2, log=lines.append, contention="threads")
    times = drive(world, tuner, 6)
    d = tuner.decisions
    assert d[0]["changed"] and d[0]["load"] is None and "other work" not in lines[0]
    assert d[1]["load"] == ("other work on the job's cores: 4.0 threads wanting a core (from the "
                            "run-queue wait: other processes, or the training process's own "
                            "threads besides its loop)")
    assert d[1]["load"] in lines[1]
    assert d[1]["reason"].startswith("epoch 2 ran beside more other work than the one before it: "
                                     "the last change is not judged on it; ")
    assert d[0]["miss_counted"] is False and d[1]["caution"] == 0
    assert not any("lost" in x["reason"] or "back to" in x["reason"] for x in d)
    loaded = World(**CPU, foreign=4.0)
    assert max(times[3:6]) <= 1.05 * sweep_best(loaded)


def test_the_memory_budget_counts_proportional_set_sizes(tmp_path):
    # Issue #62: with a budget of 1.05x the 3-worker job's Pss, autotune stayed at 1 worker
    # (4.0 s an epoch; 2 workers fit and took 2.0 s): it summed RSS, which counts the pages a
    # worker shares with the main process after fork (interpreter, libraries, data) once per
    # worker. A process's memory is now its Pss (/proc/<pid>/smaps_rollup).
    from lotus.autotune import _pss, _rss
    rollup = tmp_path / "smaps_rollup"
    rollup.write_text("55d4-7ffd ---p 00000000 00:00 0  [rollup]\nRss:   204800 kB\n"
                      "Pss:   51200 kB\nPss_Anon:   1024 kB\n")
    assert _pss(str(rollup)) == 51200 * 1024
    assert _pss(str(tmp_path / "missing")) is None
    if _pss() is None:
        pytest.skip("/proc/self/smaps_rollup cannot be read here")
    shared = bytearray(b"x" * (96 * MiB))  # touched here, shared with the child after fork
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child reads only: every page of `shared` stays shared
        try:
            with open("/proc/self/statm", "rb") as f:
                rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            os.write(w, json.dumps([_rss(), rss, shared[-1]]).encode())
        finally:
            os._exit(0)
    os.close(w)
    got = b""
    while True:
        chunk = os.read(r, 4096)
        if not chunk:
            break
        got += chunk
    os.close(r)
    os.waitpid(pid, 0)
    measured, rss, _ = json.loads(got)
    # Half of the 96 MiB (and of everything else both map) is the child's share.
    assert measured < rss - 40 * MiB
    assert len(shared) == 96 * MiB


def test_a_loss_is_judged_against_what_ran_not_against_a_warm_up():
    # The first epoch at 1 worker was 30 % slower than its steady state (a warm-up the model does
    # not see); the move is 12 % slower than 1 worker's steady epoch. The previous rule compared
    # the move with that warm-up and kept it (a "gain" of 14 %). Now: the model's steady epoch
    # of 1 worker says 12 % lost, beyond the noise over 2 epochs, but only a warm-up ran there:
    # back to 1 worker to measure it, and the move is not taken again.
    world = slower_world(1.12)
    epoch = world.epoch
    count = [0]

    def first_slow(workers, pf):
        count[0] += 1
        m = epoch(workers, pf)
        if count[0] == 1:
            m.seconds *= 1.3
        return m

    world.epoch = first_slow
    tuner = Tuner(1, 2, cores=2, persistent_workers=True)
    times = drive(world, tuner, 7)
    d = tuner.decisions
    moved = d[0]["workers"]
    assert moved > 1 and d[1]["reason"].endswith(f"one more epoch at {moved} workers to tell")
    assert d[2]["reason"] == (
        "the last change lost 12 % over 2 epochs against the model's steady epoch at 1 worker, "
        "more than the epoch-to-epoch noise (±2.0 % measured); that setting ran only its "
        "warm-up: back to 1 worker to measure it")
    assert d[2]["workers"] == 1 and not d[2]["settled"]
    assert all(x["workers"] == 1 for x in d[2:])
    assert times[-1] == pytest.approx(min(times))


def test_a_stateful_dataloader_is_tuned_as_one_and_resumes_where_the_tuned_loop_stopped():
    """issue #71: autotune(StatefulDataLoader) tunes StatefulDataLoaders (snapshot_every_n_steps
    kept); its state_dict() after 5 batches of a tuned epoch, loaded into a new tuned loader over a
    new StatefulDataLoader (another sampler seed), gives the epoch's other 7 batches in the tuned
    loop's order, at the setting they were taken at; a DataLoader subclass is refused up front."""
    sd = pytest.importorskip("torchdata.stateful_dataloader",
                             reason="torchdata's StatefulDataLoader is not installed")

    def make():
        return sd.StatefulDataLoader(Sleepy(), batch_size=2, shuffle=True, num_workers=1,
                                     snapshot_every_n_steps=3)

    tuned = lotus.torch.autotune(make(), max_workers=3, verbose=False)
    assert tuned.snapshot_every_n_steps == 3
    first = [b[:, 0].tolist() for b in tuned]  # epoch 1 decides epoch 2's setting
    assert sorted(sum(first, [])) == list(range(24))
    setting = tuned.setting
    assert tuned.decisions[0]["workers"] == setting[0] > 1  # I/O-like: it moved off 1 worker
    it = iter(tuned)
    head = [next(it)[:, 0].tolist() for _ in range(5)]
    state = tuned.state_dict()
    assert type(tuned._current) is sd.StatefulDataLoader
    assert tuned._current.snapshot_every_n_steps == 3
    rest = [b[:, 0].tolist() for b in it]  # the uninterrupted epoch's other batches
    assert len(rest) == 7 and sorted(sum(head + rest, [])) == list(range(24))
    del it
    tuned.close()

    resumed = lotus.torch.autotune(make(), max_workers=3, verbose=False)
    resumed.load_state_dict(state)
    assert resumed.setting == setting
    pids = set()
    got = []
    for b in resumed:
        got.append(b[:, 0].tolist())
        pids |= set(b[:, 1].tolist())
    assert got == rest
    assert len(pids) == setting[0]  # the workers of the setting the state was taken at
    assert resumed.decisions == []  # the rest of an epoch decides nothing
    assert sorted(sum([b[:, 0].tolist() for b in resumed], [])) == list(range(24))
    resumed.close()

    class Custom(torch.utils.data.DataLoader):
        pass
    with pytest.raises(TypeError, match="not the subclass .*Custom"):
        lotus.torch.autotune(Custom(Sleepy(), batch_size=2))
    plain = lotus.torch.autotune(torch.utils.data.DataLoader(Sleepy(), batch_size=2))
    assert not hasattr(plain, "state_dict")


def test_a_tuned_stateful_loaders_state_resumes_a_plain_stateful_dataloader():
    """A tuned StatefulDataLoader's state_dict() is the tuned loader's own state plus the setting
    under "lotus.autotune": loaded as it is into a plain StatefulDataLoader of that num_workers (a
    job that drops autotune and keeps its checkpoint), it gives the rest of the epoch, the batches
    the tuned loop would have given; the earlier form ({"lotus.autotune": ..., "loader": ...})
    still resumes a tuned loader."""
    sd = pytest.importorskip("torchdata.stateful_dataloader",
                             reason="torchdata's StatefulDataLoader is not installed")

    def make(workers=1, prefetch_factor=None):
        return sd.StatefulDataLoader(Sleepy(), batch_size=2, shuffle=True, num_workers=workers,
                                     prefetch_factor=prefetch_factor, snapshot_every_n_steps=3)

    tuned = lotus.torch.autotune(make(), max_workers=3, verbose=False)
    assert sorted(sum([b[:, 0].tolist() for b in tuned], [])) == list(range(24))
    setting = tuned.setting  # the second epoch's
    it = iter(tuned)
    head = [next(it)[:, 0].tolist() for _ in range(5)]
    state = tuned.state_dict()
    rest = [b[:, 0].tolist() for b in it]
    assert len(rest) == 7 and sorted(sum(head + rest, [])) == list(range(24))
    del it
    tuned.close()
    meta = state["lotus.autotune"]
    assert meta == {"num_workers": setting[0], "prefetch_factor": setting[1]}
    assert "loader" not in state and any(k.startswith("_") for k in state), sorted(state)

    workers = meta["num_workers"]
    plain = make(workers, meta["prefetch_factor"] if workers > 0 else None)
    plain.load_state_dict(state)
    assert [b[:, 0].tolist() for b in plain] == rest
    assert sorted(sum([b[:, 0].tolist() for b in plain], [])) == list(range(24))  # next epoch

    wrapped = {"lotus.autotune": meta,
               "loader": {k: v for k, v in state.items() if k != "lotus.autotune"}}
    resumed = lotus.torch.autotune(make(), max_workers=3, verbose=False)
    resumed.load_state_dict(wrapped)
    assert resumed.setting == setting
    assert [b[:, 0].tolist() for b in resumed] == rest
    resumed.close()
