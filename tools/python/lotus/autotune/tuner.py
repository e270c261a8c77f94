# SPDX-License-Identifier: MIT
"""autotune's decision rule, apart from any DataLoader: Tuner.decide(measurement) at each epoch
boundary replays the epoch through the model (model.py) for every setting and returns the next
(workers, prefetch_factor). The rules are tools/docs/WHATIF.md §5 ("The decision rules")."""

import copy as _copy
import math as _math
import numbers as _numbers
import os as _os
import time as _time

from .model import memory_inputs, predict_memory, simulate_epoch

MISS = 0.10        # a prediction off by more than this makes the next decision more careful
SETTLE_GAIN = 0.02  # a change that gained less than this ends the tuning
PAYBACK_EPOCHS = 5  # persistent workers: a change must repay its restart within this many epochs
GAP_SHARE = 0.10    # a cheaper setting may give up at most this share of the best's predicted gain
MIN_GAIN = 0.01     # a move predicted to gain less than this is not made
RESTART_GAIN = 0.05  # persistent workers: a restart for a predicted gain under this is not made
PREFETCH_FACTORS = (1, 2, 4)
NOISE_PRIOR = 0.20  # the epoch-to-epoch noise taken until two epochs at one setting measure it
WARMUP_SHARE = 0.25  # the first quarter of a warm-up epoch's batches and steps is not steady state
LARGE_GAIN = 0.30  # careful or not, a predicted gain this large and over 3x the last miss: one move
PROBE_COST = 0.05  # a tie at the cores is measured when an epoch there costs at most this more
LOAD_SEEN = 0.5     # other work fitted at this many threads (or 10 % of the cores) is reported


def memory_budget_bytes(budget=None):
    """A budget in bytes: an int, a string with K, M, G or T (powers of 1024, as lotus-tool's
    --memory-budget), or None: this machine's physical memory (lotus-tool tune's default)."""
    if budget is None:
        return _os.sysconf("SC_PHYS_PAGES") * _os.sysconf("SC_PAGE_SIZE"), "this machine"
    if isinstance(budget, (int, float)):
        if not budget > 0:
            raise ValueError(f"memory_budget must be positive, not {budget!r}")
        return int(budget), "option"
    text = str(budget).strip()
    i = 0
    while i < len(text) and (text[i].isdigit() or text[i] == "."):
        i += 1
    try:
        value = float(text[:i])
    except ValueError:
        raise ValueError(f"memory_budget {budget!r} is not a size (bytes, or 8G, 512MiB)") from None
    unit = text[i:].strip().upper()
    scale = 1
    if unit and unit[0] in "KMGT":
        scale = 1024 ** ("KMGT".index(unit[0]) + 1)
        unit = unit[1:]
    if unit not in ("", "B", "IB", "I") or not value > 0:
        raise ValueError(f"memory_budget {budget!r} is not a size (bytes, or 8G, 512MiB)")
    return int(value * scale), "option"


def pytorch_suggested_max_workers():
    """The maximum PyTorch's DataLoader warns above (_check_worker_number_rationality): the CPUs
    this process may run on (its affinity), else os.cpu_count()."""
    try:
        return len(_os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return _os.cpu_count() or 1


def _cores():
    return pytorch_suggested_max_workers()


def _autogroup():
    """Linux's autogroup is on: the scheduler shares the CPUs among sessions first."""
    try:
        with open("/proc/sys/kernel/sched_autogroup_enabled") as f:
            return f.read().strip() == "1"
    except OSError:
        return False



# ---- the decisions -------------------------------------------------------------------------------

def _count(value):
    """An int (not a bool; numpy's ints are ints), or None."""
    if isinstance(value, bool) or not isinstance(value, _numbers.Integral):
        return None
    return int(value)


def check_arguments(max_workers=None, cores=None, tolerance=0.03, prefetch_factors=PREFETCH_FACTORS,
                    memory_budget=None):
    """autotune's and Tuner's arguments, checked: each bad one raises ValueError saying what it
    takes. Returns (max_workers, cores, tolerance, prefetch_factors) as the tuner uses them.

    max_workers: None (the default range) or an int >= 1. 0 is refused, not read as the default:
      no workers is a DataLoader with num_workers=0, nothing to tune.
    cores: None (this process's CPUs) or a number > 0 (a fraction: a CPU quota).
    tolerance: a number >= 0. prefetch_factors: ints >= 1, at least one.
    memory_budget: None, bytes (> 0) or a size such as "8G" (memory_budget_bytes)."""
    if max_workers is not None:
        n = _count(max_workers)
        if n is None or n < 1:
            hint = (" (0 workers is a DataLoader with num_workers=0: nothing to tune)"
                    if n == 0 else "")
            raise ValueError(f"max_workers must be an int >= 1, or None for the default, not "
                             f"{max_workers!r}{hint}")
        max_workers = n
    if cores is not None:
        if (isinstance(cores, bool) or not isinstance(cores, _numbers.Real)
                or not _math.isfinite(cores) or not cores > 0):
            raise ValueError(f"cores must be a number > 0, or None for this process's CPUs, not "
                             f"{cores!r}")
        cores = float(cores)
    if (isinstance(tolerance, bool) or not isinstance(tolerance, _numbers.Real)
            or not _math.isfinite(tolerance) or tolerance < 0):
        raise ValueError(f"tolerance must be a number >= 0 (a share of the best epoch), not "
                         f"{tolerance!r}")
    try:
        pfs = tuple(prefetch_factors)
    except TypeError:
        pfs = None
    if not pfs or any(_count(pf) is None or pf < 1 for pf in pfs):
        raise ValueError(f"prefetch_factors must be ints >= 1, at least one, not "
                         f"{prefetch_factors!r}")
    if isinstance(memory_budget, bool):
        raise ValueError(f"memory_budget must be bytes or a size such as '8G', not "
                         f"{memory_budget!r}")
    memory_budget_bytes(memory_budget)  # raises ValueError for a bad one
    return max_workers, cores, float(tolerance), tuple(int(pf) for pf in pfs)


class Tuner:
    """The decision rule, apart from any DataLoader: `decide(measurement)` at each epoch boundary
    returns the next (workers, prefetch_factor) and appends to `decisions`."""

    def __init__(self, workers, prefetch_factor, memory_budget=None, cores=None, max_workers=None,
                 prefetch_factors=PREFETCH_FACTORS, tolerance=0.03, persistent_workers=False,
                 log=None, contention="threads", pin_memory=False):
        max_workers, cores, tolerance, prefetch_factors = check_arguments(
            max_workers, cores, tolerance, prefetch_factors, memory_budget)
        self.workers = max(1, int(workers))
        self.prefetch_factor = int(prefetch_factor or 2)
        self.budget, self.budget_from = memory_budget_bytes(memory_budget)
        self.cores = cores if cores is not None else float(_cores())
        self.max_workers = max_workers
        self.prefetch_factors = prefetch_factors
        self.tolerance = tolerance
        self.persistent = persistent_workers
        self.pin_memory = bool(pin_memory)
        self.log = log
        if contention == "auto":
            contention = "share" if _autogroup() else "threads"
        if contention not in ("threads", "share", "off"):
            raise ValueError(f"contention must be auto, threads, share or off, not {contention!r}")
        self.contention = contention
        self.decisions = []
        self.caution = 0
        self.settled = False
        self._history = []  # (setting, steady seconds, fitted load, warm-up) per epoch
        self._last_miss = 0.0  # the last miss on the slow side (the model was optimistic)
        self._measured = {}  # setting -> the fastest steady epoch measured at it
        self._steady = {}    # setting -> its steady epochs (warm-ups left out), in order
        self._estimate = {}  # setting -> its steady epoch as estimated from a warm-up
        self._calib = 1.0    # the last steady epoch's calibration (a warm-up's is not taken)
        self._calibrated = False  # a steady epoch has calibrated the model
        self._noise = None   # the largest epoch-to-epoch difference at an unchanged setting
        self._pending = None  # (previous setting, new setting): a change not judged yet
        self._inputs_of = (None, None)  # (the measurement, the model's inputs from it)
        self._last_fit = (0.0, self.cores)
        self._shared_last = None  # the tree's shared part at the end of the last epoch
        self._mem_drift = 0.0     # its largest change between two epochs (memory's noise)

    def _predict(self, m, workers, pf, start_s, fit=None):
        """The model's epoch at (workers, pf) from the measurement `m`, under the other processes'
        load fitted to it, or under `fit` ((foreign threads, cores) of another epoch)."""
        # The measured CPU time of a batch is its own (thread CPU time does not stretch with
        # sharing) and its off-CPU time has the run-queue wait taken out: unlike lotus-tool
        # whatif's wall times, no work_scale is needed.
        batches, step, fitted, cores = self._inputs(m)
        if fit is not None:
            fitted, cores = fit
        r = simulate_epoch(batches, workers, pf, cores, step, start_s=start_s, foreign=fitted,
                           **_measured_terms(m))
        return r["seconds"]

    def _inputs(self, m):
        """The model's batches, step, foreign threads and cores from a measurement. The run-queue
        wait the loader's own threads do not explain by sharing the cores among themselves comes
        from other processes, in one of two ways (`contention`):
        "threads": every thread competes for the cores on its own (no autogroup): `foreign`
          threads of other processes are fitted, each of ours runs at C / (k + foreign);
        "share": the scheduler shares the CPUs among groups first (Linux's autogroup: a session's
          processes are one group): the job's group gets fewer cores, whatever its thread count;
          the cores are fitted, each of ours runs at C' / k.
        Either is fitted so that the model's run-queue wait at the measured setting (workers' and
        consumer's) equals the measured one, and kept for every setting."""
        if self._inputs_of[0] is m:
            return self._inputs_of[1]
        step = m.mean_step()
        target = m.batch_runq_s + m.step_runq_s

        def runq(foreign=0.0, cores=None):
            r = simulate_epoch(m.batches, m.workers, m.prefetch_factor, cores or self.cores,
                               step, start_s=m.start_s, foreign=foreign, **_measured_terms(m))
            return r["runq_workers_s"] + r["runq_main_s"]

        foreign, cores = 0.0, self.cores
        unexplained = target > 0 and runq() < target * (1 - 1e-6) - 1e-9
        if self.settled:
            foreign, cores = self._last_fit  # nothing is searched: the last fit is kept
        elif unexplained and self.contention == "threads":
            lo, hi = 0.0, 1.0
            while runq(foreign=hi) < target and hi < 256:
                lo, hi = hi, hi * 2
            for _ in range(8):
                mid = (lo + hi) / 2
                if runq(foreign=mid) < target:
                    lo = mid
                else:
                    hi = mid
            foreign = (lo + hi) / 2
        elif unexplained and self.contention == "share":
            lo, hi = self.cores / 64, self.cores  # the wait falls as the cores grow
            for _ in range(10):
                mid = (lo + hi) / 2
                if runq(cores=mid) > target:
                    lo = mid
                else:
                    hi = mid
            cores = (lo + hi) / 2
        m.foreign, m.cores = foreign, cores
        self._last_fit = (foreign, cores)
        got = (m.batches, step, foreign, cores)
        self._inputs_of = (m, got)
        return got

    def _load_words(self, fit):
        """Other work on the machine as fitted from the run-queue wait, in words, or None."""
        foreign, cores = fit
        # Whose threads the run-queue wait cannot tell: other processes, or the training
        # process's own besides its loop (on an H200 job alone on its machine, CUDA's and
        # torch's threads fitted as 3-4, and 13 in the first epoch).
        if foreign >= LOAD_SEEN:
            return (f"other work on the job's cores: {foreign:.1f} threads wanting a core "
                    f"(from the run-queue wait: other processes, or the training process's own "
                    f"threads besides its loop)")
        if cores < 0.9 * self.cores:
            return (f"other work on the job's cores leaves it {cores:.1f} of {self.cores:g} "
                    f"cores (from the run-queue wait: other processes, or the training "
                    f"process's own threads besides its loop)")
        return None

    def _load_changed(self, before, after):
        """Whether the other processes' fitted load differs between two epochs by enough that
        comparing them would judge the load, not the setting: a quarter of the cores (at least
        one thread) more or fewer threads, or a quarter of the cores more or fewer."""
        (f0, c0), (f1, c1) = before, after
        quarter = max(1.0, 0.25 * self.cores)
        return abs(f1 - f0) >= quarter or abs(c1 - c0) >= 0.25 * self.cores

    def _noise_bound(self):
        """The epoch-to-epoch difference a change must beat to be told from noise: the largest
        measured at an unchanged setting (at least 2 %), else NOISE_PRIOR."""
        if self._noise is None:
            return NOISE_PRIOR
        return max(self._noise, SETTLE_GAIN)

    def _noise_words(self):
        bound = self._noise_bound()
        if self._noise is None:
            return f"±{_pct(bound)} %, taken until two epochs at one setting measure it"
        return f"±{_pct(bound)} % measured"

    def decide(self, m):
        """Takes the epoch just measured (at the current setting); returns the next setting.

        Each setting is scored by its steady epoch: with persistent workers a new setting's
        start-up is paid once (the epoch after the change) and pays back over the epochs after
        it, so it is not counted in the score; without them it is paid every epoch and is. The
        decision's predicted_epoch_seconds is the next epoch's, start-up included.

        A warm-up epoch (the first, or the first after persistent workers restarted: worker
        start-up, a first batch's imports, cuDNN's autotuning in the training step) is not steady
        state: its first quarter of batches and steps is left out of the model's inputs, it
        calibrates nothing, its miss is not the model's, and it does not judge the last change."""
        t_decide = _time.perf_counter()
        r = self._begin_round(m)
        self._candidates(r)
        if self.settled:
            r.reason = "settled"
        elif self._pending is not None and self._pending[1] == r.cur and r.load_changed:
            more = "more" if _load(r.fit_now) > _load(r.prev_fit) else "less"
            r.note = (f"epoch {r.epoch} ran beside {more} other work than the one before it: the "
                      f"last change is not judged on it; ")
        elif self._pending is not None and self._pending[1] == r.cur and not r.warm:
            self._judge_change(r)
        if not r.reason:
            self._choose(r)
        return self._decided(r, t_decide)

    def _begin_round(self, m):
        """The epoch measured: the previous decision checked against it, the model's replay of
        it, its calibration and steady epoch, the other processes' load fitted to it."""
        cur = (self.workers, self.prefetch_factor)
        warm = bool(m.warmup if m.warmup is not None else (
            not self._history or (self.persistent and m.start_s > 0)))
        mm = _steady_part(m) if warm else m
        self._drift(m)
        replay = self._predict(mm, m.workers, m.prefetch_factor, m.start_s)
        fit_now = (getattr(mm, "foreign", 0.0), getattr(mm, "cores", self.cores))
        m.foreign, m.cores = fit_now
        prev_fit = self._history[-1][2] if self._history else None
        load_changed = prev_fit is not None and not self.settled and self._load_changed(
            prev_fit, fit_now)
        self._check_last_decision(m, warm, load_changed)
        r = _Round(m=mm, epoch=len(self._history) + 1, cur=cur, warm=warm, replay=replay,
                   fit_now=fit_now, prev_fit=prev_fit, load_changed=load_changed)
        self._steady_epoch(r, m.seconds)
        self._history.append((cur, r.steady_now, fit_now, warm))
        last = self.decisions[-1] if self.decisions else None
        r.last = last
        r.last_stayed = (last is not None and not last["changed"] and last["error"] is not None
                         and last["error"] <= MISS and not warm)
        r.start_new = mm.worker_start_s
        return r

    def _drift(self, m):
        """Memory's epoch-to-epoch noise: the largest change of the tree's shared part between two
        epochs (the model holds it fixed; on a machine shared with other jobs a library's pages
        are divided among every process mapping it, and it moved by 30 MiB between two epochs at
        one setting). A setting fits with that much to spare."""
        mem = getattr(m, "memory", None)
        if not mem:
            return
        shared = float(mem["shared_bytes"])
        if self._shared_last is not None:
            self._mem_drift = max(self._mem_drift, abs(shared - self._shared_last))
        self._shared_last = shared

    def _fits(self, mem):
        return mem + self._mem_drift <= self.budget

    def _check_last_decision(self, m, warm, load_changed):
        """The previous decision against the epoch that followed it. Only a miss on the slow side
        (the model was optimistic) makes the next decision careful: a move that gained more than
        predicted is no reason to move less. A warm-up's miss, or one under another load of other
        work than the prediction's, is not the model's."""
        if not self.decisions:
            return
        d = self.decisions[-1]
        d["measured_epoch_seconds"] = m.seconds
        miss = abs(d["predicted_epoch_seconds"] - m.seconds) / m.seconds if m.seconds > 0 else 0
        d["error"] = miss
        slow = ((m.seconds - d["predicted_epoch_seconds"]) / m.seconds
                if m.seconds > 0 else 0.0)
        if warm or load_changed:
            d["miss_counted"] = False
        elif slow > MISS:
            self.caution += 1
            self._last_miss = slow
            d["miss_counted"] = True
        else:
            self.caution = max(0, self.caution - 1)
            self._last_miss = max(0.0, slow)
            d["miss_counted"] = miss > MISS

    def _steady_epoch(self, r, seconds):
        """The calibration (measured / replay of a steady epoch; a warm-up's is not taken) and the
        epoch as every epoch at this setting pays it: what the settle rule and the measured-before
        rule compare (a warm-up's: the model's, calibrated). With persistent workers that is
        without the start-up (paid once, as the model attributes it); without them every epoch
        starts its workers, and the start-up stays in (taking it out let 6 workers on 2 cores,
        whose 6 start-ups an epoch cost more than 2's, be judged as fast as 2 and settle there).
        A steady epoch at an unchanged setting also measures the epoch-to-epoch noise."""
        m, cur, replay = r.m, r.cur, r.replay
        if not r.warm and replay > 0:
            self._calib = seconds / replay
            self._calibrated = True
        r.calib = self._calib
        steady_model = replay
        if m.start_s > 0 and replay > 0 and self.persistent:
            steady_model = self._predict(m, m.workers, m.prefetch_factor, 0.0)
        if r.warm:
            r.steady_now = steady_model * r.calib
            # (the model's steady epoch, and the measured one without the start-up the model
            # attributes to it: more than the steady epoch, by the rest of the warm-up). Without
            # persistent workers every epoch starts its workers as the first did, so the first
            # is a warm-up of the main process alone, and before any steady epoch calibrated the
            # model its figure is no evidence: the measured one stands for both (on a CPU-bound
            # job the model was 38 % optimistic, so the 6 workers it left looked faster than the
            # 2 it chose, and ran again).
            upper = seconds * steady_model / replay if replay > 0 else seconds
            measured_only = not self.persistent and not self._calibrated
            self._estimate[cur] = (upper if measured_only else r.steady_now, upper)
            return
        r.steady_now = seconds * steady_model / replay if replay > 0 else seconds
        if (self._history and self._history[-1][0] == cur and not self._history[-1][3]
                and not r.load_changed):
            before = self._history[-1][1]
            if before > 0 and r.steady_now > 0:
                diff = abs(before - r.steady_now) / min(before, r.steady_now)
                self._noise = max(self._noise or 0.0, diff)
        self._steady.setdefault(cur, []).append(r.steady_now)
        self._measured[cur] = min(r.steady_now, self._measured.get(cur, _math.inf))

    def _candidates(self, r):
        """The current setting and (unless settled) every setting of the grid, scored."""
        m = r.m
        top = self.max_workers or min(64, max(8 * int(self.cores), 2 * self.workers, 16))
        top = max(1, min(top, max(1, len(m.batches))))
        cap = None
        if self.pin_memory and _cpu_bound(m.batches):
            # The pin-memory thread copies every batch in the main process, and the model does
            # not run it: CPU-bound workers leave it a core, at the grid's counts (the GPU job of
            # bench/README on an H200: 16 workers on 16 cores took 2.10 s an epoch, 12 took 1.87 s; the main
            # process and its pin thread starved).
            cap = max(1, int(_math.floor(m.cores + 1e-9)) - 1)
        r.candidates = {}
        r.top, r.cap = top, cap
        r.stay = self._cand(r, *r.cur)
        if not self.settled:
            # Every worker count to 8, then 10, 12, 16, 20, 24, 32, 40, 48, 64 (to `top`).
            grid = [n for n in (*range(1, 9), 10, 12, 16, 20, 24, 32, 40, 48, 64) if n < top]
            grid.append(top)
            if cap is not None:
                grid = [n for n in grid if n <= cap] or [1]
            for n in grid:
                for pf in self.prefetch_factors:
                    self._cand(r, n, pf)
        r.fitting = [c for c in r.candidates.values() if c["fits"]]

    def _cand(self, r, n, pf):
        """A setting's score: the model's steady epoch there, calibrated (with a start-up only
        where every epoch pays it: workers not persistent), and its predicted memory."""
        c = r.candidates.get((n, pf))
        if c is None:
            mem = predict_memory(r.m, n, pf)
            start = 0.0 if self.persistent else r.start_new
            secs = self._predict(r.m, n, pf, start) * r.calib
            c = r.candidates[(n, pf)] = {"workers": n, "prefetch_factor": pf, "score": secs,
                                         "memory": mem, "fits": self._fits(mem)}
        return c

    def _judge_change(self, r):
        """The last change, judged on steady epochs (the mean of those at each setting; a setting
        that only ran its warm-up: the model's estimate of its steady epoch) and against the
        epoch-to-epoch noise: one epoch within the noise is not evidence."""
        cur, m = r.cur, r.m
        prev_setting = self._pending[0]
        runs = self._steady[cur]
        now_secs = sum(runs) / len(runs)
        before = self._steady.get(prev_setting)
        if before:
            prev_secs = upper = sum(before) / len(before)
        else:
            # Only its warm-up ran: the model's steady epoch there, and for a loss the measured
            # warm-up (a loss is declared only against what was measured).
            prev_secs, upper = self._estimate.get(prev_setting, (now_secs, now_secs))
            upper = max(prev_secs, upper)
        gain = (prev_secs - now_secs) / prev_secs if prev_secs > 0 else 0.0
        loss = (now_secs - upper) / upper if upper > 0 else 0.0
        bound = self._noise_bound()
        epochs = f" over {len(runs)} epochs" if len(runs) > 1 else ""
        change = f"the last change {_gained(gain)}{epochs}"
        back_fits = self._fits(predict_memory(m, prev_setting[0], prev_setting[1]))
        if self.decisions and self.decisions[-1]["probe"]:
            # The tie the model could not split, measured: each side ran, and the model, which
            # predicted no difference, cannot tell them apart better than that. The faster one is
            # kept (the model's next choice would be on the very difference it cannot see).
            self._settle()
            back = now_secs > prev_secs and back_fits
            if back:
                r.nxt = prev_setting
            r.reason = (f"{change} (the tie at the cores, measured): "
                        + (f"back to {_workers(prev_setting[0])}, " if back else "") + "settled")
        elif gain >= SETTLE_GAIN:
            self._pending = None
        elif loss > bound:
            change = f"the last change {_gained(-loss)}{epochs}"
            self._settle()
            r.reason = (f"{change}, more than the epoch-to-epoch noise ({self._noise_words()}): "
                        f"settled")
            if back_fits:
                r.nxt = prev_setting
                r.reason = (f"{change}, more than the epoch-to-epoch noise "
                            f"({self._noise_words()}): back to {_workers(prev_setting[0])}, "
                            f"settled")
        elif len(runs) < 2 and self._probe_setting(r) is not None:
            # One epoch within the noise says little; the tie at the cores the model cannot split
            # says more, and its epoch is spent measuring it rather than this setting again.
            self._pending = None
            r.reason = (f"{change}, within the epoch-to-epoch noise ({self._noise_words()}): "
                        f"kept")
            self._probe(r)
        elif len(runs) < 2:
            r.reason = (f"{change}, within the epoch-to-epoch noise ({self._noise_words()}): "
                        f"one more epoch at {_workers(cur[0])} to tell")
        elif not before and -gain > bound and back_fits:
            # Slower than the model's steady epoch of the previous setting, but not than its
            # measured warm-up: measure it (not settled; a setting that ran is not taken again
            # unless it ran 2 % faster).
            r.nxt = prev_setting
            r.reason = (f"{change} against the model's steady epoch at "
                        f"{_workers(prev_setting[0])}, more than the epoch-to-epoch noise "
                        f"({self._noise_words()}); that setting ran only its warm-up: back to "
                        f"{_workers(prev_setting[0])} to measure it")
        elif self._probe_setting(r) is not None:
            # Kept; a tie at the cores the model cannot split is measured before settling.
            self._pending = None
            r.reason = (f"{change}, within the epoch-to-epoch noise ({self._noise_words()}) "
                        f"and under the 2 % a change must gain: kept")
            self._probe(r)
        else:
            self._settle()
            r.reason = (f"{change}, within the epoch-to-epoch noise ({self._noise_words()}) "
                        f"and under the 2 % a change must gain: settled")

    def _settle(self):
        self.settled = True
        self._pending = None

    def quiet_epoch(self, seconds):
        """An epoch once settled, measured by its time alone (AutotunedLoader then runs the plain
        loader: nothing else is measured, and nothing changes): the last decision is checked
        against it, and one more decision keeps the setting, predicted to take as long. Returns
        the setting."""
        t_decide = _time.perf_counter()
        last = self.decisions[-1]
        last["measured_epoch_seconds"] = seconds
        last["error"] = (abs(last["predicted_epoch_seconds"] - seconds) / seconds
                         if seconds > 0 else 0.0)
        cur = (self.workers, self.prefetch_factor)
        d = _copy.deepcopy(last)
        d.update({"epoch": last["epoch"] + 1, "workers": cur[0], "prefetch_factor": cur[1],
                  "predicted_epoch_seconds": seconds, "measured_epoch_seconds": None,
                  "changed": False, "settled": True, "error": None, "held_small": False,
                  "probe": False, "refused": [], "load": None, "quiet": True,
                  "reason": "settled; its batches are no longer measured (the plain loader runs: "
                            "its epoch time alone checks the setting)"})
        d["previous"].update({"workers": cur[0], "prefetch_factor": cur[1],
                              "measured_epoch_seconds": seconds, "warmup": False})
        self._history.append((cur, seconds, self._last_fit, False))
        d["decide_seconds"] = _time.perf_counter() - t_decide
        self.decisions.append(d)
        if self.log:
            self.log(decision_line(d, last))
        return cur

    def _choose(self, r):
        """The model's choice among the settings that fit the memory budget, held back by the
        rules of _held (careful after a miss, a gain too small, a restart not repaid, a setting
        already measured)."""
        if not r.stay["fits"] and r.fitting:
            best = min(r.fitting,
                       key=lambda c: (c["score"], c["workers"], c["prefetch_factor"]))
            r.nxt = (best["workers"], best["prefetch_factor"])
            r.reason = (f"the current setting is predicted above the memory budget "
                        f"({self._over_words(r.stay)})")
            return
        if not r.fitting:
            least = min(r.candidates.values(), key=lambda c: (c["memory"], c["workers"]))
            r.reason = (f"no setting is predicted within the memory budget (the least: "
                        f"{self._over_words(least)})")
            return
        target, pick = self._target(r)
        stay = r.stay
        r.saved = stay["score"] - pick["score"]  # predicted seconds per epoch
        r.gain = r.saved / stay["score"] if stay["score"] > 0 else 0
        # What the change costs once: the new workers' start-up, as the model sees it (without
        # persistent workers every epoch pays it, and the score has it).
        r.restart_s = 0.0
        if self.persistent and target != r.cur:
            r.restart_s = max(0.0, self._predict(r.m, target[0], target[1], r.start_new)
                              * r.calib - pick["score"])
        held = self._held(r, target, pick)
        if held is None:
            r.nxt = target
            r.reason = self._move_words(r)
        elif held and r.last_stayed and not self.settled and self._probe_setting(r) is None:
            # As for the model's choice twice: staying was right last time (a tie at the cores
            # it cannot split is measured first).
            self._settle()
            r.reason += "; its last prediction within 10 %: settled"
        if r.nxt == r.cur and not self.settled:
            self._probe(r)
        self._refuse(r)

    def _probe(self, r):
        """A tie the model cannot split, measured instead: CPU-bound batches at the cores, where
        processor sharing sees no gain in one more worker than the cores. The main process shares
        the cores too (its step, receiving every batch), and on 2 cores the sweeps found 3-4
        workers 7-9 % faster than 2 (bench/README.md), which the model predicts alike. So, staying
        at N <= the cores, with N + 1 (same prefetch_factor) unmeasured, predicted within
        `tolerance` of the current setting without start-up and within PROBE_COST with it, and
        within the budget, one epoch runs there (the decision's `probe`: the one exception to
        "never a setting predicted slower"); the change is then judged on what it measured: the
        faster of the two is kept, settled. Not with persistent workers (a restart for a predicted
        tie). Careful or not: a probe is a measurement, one worker away, not a move on the model's
        figures (on the cpu3 pipeline the move to 2 workers missed by 14 %, and the careful tuner
        spent an epoch more at 2 before measuring 3, the fastest). One epoch at a new setting
        within the noise measures the tie first rather than the same setting again
        (_judge_change)."""
        probe = self._probe_setting(r)
        if probe is None:
            return
        n, pf = probe
        r.nxt = (n, pf)
        r.probe = True
        r.reason += (f"; {_workers(n)} is predicted within {100 * self.tolerance:.0f} % of it "
                     f"without start-up, a tie at the cores the model cannot split: one epoch "
                     f"there to measure it")

    def _probe_setting(self, r):
        """The setting _probe would measure from here, or None; found once a round (several rules
        ask, and nothing it reads changes within a decision)."""
        if r.probe_setting is _UNSET:
            r.probe_setting = self._find_probe_setting(r)
        return r.probe_setting

    def _find_probe_setting(self, r):
        n, pf = r.cur[0] + 1, r.cur[1]
        if (self.persistent or not _cpu_bound(r.m.batches)
                or r.cur[0] > self.cores + 1e-9 or n > r.top or (r.cap is not None and n > r.cap)
                or (n, pf) in self._measured or (n, pf) in self._estimate):
            return None
        c = self._cand(r, n, pf)
        # A tie in what the model cannot tell (the batches' throughput; its start-up, which it
        # can, left out), and an epoch there predicted at most PROBE_COST slower, start-up in.
        here = self._predict(r.m, r.cur[0], pf, 0.0)
        there = self._predict(r.m, n, pf, 0.0)
        if (not c["fits"] or there > here * (1 + self.tolerance)
                or c["score"] > r.stay["score"] * (1 + PROBE_COST)):
            return None
        return n, pf

    def _over_words(self, c):
        drift = (f" + {_mib(self._mem_drift)} of drift measured" if self._mem_drift >= 1 << 20
                 else "")
        return (f"{_workers(c['workers'])}, prefetch_factor {c['prefetch_factor']}: predicted "
                f"{_mib(c['memory'])}{drift} > budget {_mib(self.budget)}")

    def _refuse(self, r):
        """The settings the budget refused that the model predicts faster than the next one: the
        fastest of each worker count, in r.refused, and the first three in the reason, each with
        its predicted memory ("3 workers, prefetch_factor 2: predicted 452 MiB > budget 427
        MiB")."""
        nxt = r.candidates.get(r.nxt) or r.stay
        faster = {}
        for c in r.candidates.values():
            if not c["fits"] and c["score"] < nxt["score"] * (1 - MIN_GAIN):
                seen = faster.get(c["workers"])
                if seen is None or c["score"] < seen["score"]:
                    faster[c["workers"]] = c
        r.refused = [faster[n] for n in sorted(faster)]
        if r.refused:
            words = "; ".join(self._over_words(c) for c in r.refused[:3])
            more = len(r.refused) - 3
            r.reason += (f"; refused over the memory budget, though predicted faster: {words}"
                         + (f"; and {more} more worker counts" if more > 0 else ""))

    def _target(self, r):
        """The model's pick: the cheapest setting predicted within `tolerance` of the best, and
        with caution c > 0 at most 1/2**c of the way (in workers) to it, unless its gain is
        large (r.whole). Returns (setting, its candidate)."""
        stay = r.stay
        best_score = min(c["score"] for c in r.fitting)
        # Cheaper (fewer workers) is taken within `tolerance` of the best, but giving up at most
        # a tenth of what the best is predicted to gain over the current setting: where the gain
        # is small the model's differences are as small as its error, and on the development VM
        # the fewest workers within 3 % (2 CPU-bound workers on 2 cores) were 9 % slower than its
        # best (3).
        slack = min(best_score * self.tolerance,
                    GAP_SHARE * max(0.0, stay["score"] - best_score))
        pick = min((c for c in r.fitting if c["score"] <= best_score + slack),
                   key=lambda c: (c["workers"], _pf_order(c["prefetch_factor"])))
        target = (pick["workers"], pick["prefetch_factor"])
        cur = r.cur
        r.needed = self._last_miss if self.caution > 0 else 0.0
        r.whole = False
        if self.caution > 0 and target[0] != cur[0]:
            full = (stay["score"] - pick["score"]) / stay["score"] if stay["score"] > 0 else 0.0
            if full >= LARGE_GAIN and full > 3 * r.needed:
                # A gain this large survives the last miss three times over: one move.
                r.whole = True
            else:
                # Careful: at most 1/2**caution of the way in workers (at least one).
                frac = 0.5 ** self.caution
                n = cur[0] + (target[0] - cur[0]) * frac
                n = int(_math.ceil(n)) if target[0] > cur[0] else int(_math.floor(n))
                if n == cur[0]:
                    n = cur[0] + (1 if target[0] > cur[0] else -1)
                c = self._cand(r, n, target[1])
                if c["fits"]:
                    target, pick = (n, target[1]), c
        return target, pick

    def _held(self, r, target, pick):
        """Why the current setting stays instead of `target`: sets r.reason and returns whether a
        move the model wants was held back (True) or there is none to make (False); None: move."""
        cur, gain, needed, saved = r.cur, r.gain, r.needed, r.saved
        what = f"{_workers(target[0])}, prefetch_factor {target[1]}"
        seen = self._measured.get(target)
        if target == cur and r.last_stayed and self._probe_setting(r) is None:
            # Converged: the model chose this setting again, and its last prediction here landed
            # within 10 % (a tie at the cores it cannot split is measured first: _probe).
            self._settle()
            r.reason = "the model's choice again, its last prediction within 10 %: settled"
        elif target == cur:
            r.reason = "the current setting is the model's choice"
        elif pick["score"] > r.stay["score"]:
            r.reason = "no setting is predicted faster than the current one"
        elif gain < MIN_GAIN:
            # Within an epoch's noise: moving would be on the model's rounding.
            r.reason = f"{what} is predicted only {100 * gain:.1f} % faster (< 1 %)"
            return True
        elif self.caution > 0 and gain <= needed:
            r.reason = (f"careful (caution {self.caution}): predicted gain {100 * gain:.1f} % is "
                        f"within the last miss of {100 * needed:.1f} %")
        elif self.persistent and gain < RESTART_GAIN:
            return self._held_small(r, what)
        elif r.restart_s > PAYBACK_EPOCHS * saved:
            # Persistent workers restart on any change (a new prefetch_factor too): the restart
            # is paid once, the gain every epoch after it (at least 1 % here).
            r.reason = (f"{what} would repay its restart ({r.restart_s:.3f} s) in "
                        f"{r.restart_s / saved:.0f} epochs, more than {PAYBACK_EPOCHS}")
            return True
        elif seen is not None and seen >= r.steady_now * (1 - SETTLE_GAIN):
            # A measurement beats a prediction: that setting ran, and was not faster.
            r.reason = f"{what} already ran in {seen:.3f} s, not 2 % faster than now"
        elif gain < self.tolerance and self._probe_setting(r) is not None:
            # A gain within the model's tolerance is its rounding; the tie at the cores it cannot
            # split is worth the epoch more (_probe).
            r.reason = (f"{what} is predicted only {100 * gain:.1f} % faster (within the "
                        f"{100 * self.tolerance:.0f} % tolerance)")
        else:
            return None
        return False

    def _held_small(self, r, what):
        """Persistent workers: the restart is certain, a gain under RESTART_GAIN is not: it is
        within the model's error on a real job (10-35 % an epoch on the H200 job of bench/README)
        and one epoch's noise could not confirm it (that H200 job: prefetch 1 and 2 at 12
        workers were toggled for a predicted 1.9 %, each time a restart)."""
        r.held_small = True
        r.reason = (f"{what} is predicted {100 * r.gain:.1f} % faster: under the "
                    f"{100 * RESTART_GAIN:.0f} % a restart of the persistent workers must be for")
        if r.last is not None and r.last.get("held_small"):
            # Twice in a row nothing worth a restart: nothing left to tune.
            self._settle()
            r.reason += "; twice in a row: settled"
        return True

    def _move_words(self, r):
        gain = 100 * r.gain
        if self.caution == 0:
            return f"the model's choice (predicted gain {gain:.1f} %)"
        if r.whole:
            return (f"careful (caution {self.caution}), but the predicted gain {gain:.1f} % is "
                    f"over 3 times the last miss of {100 * r.needed:.1f} %: the whole way")
        return (f"careful (caution {self.caution}): 1/{2 ** self.caution} of the way, predicted "
                f"gain {gain:.1f} %")

    def _decided(self, r, t_decide):
        """The decision's record (appended to `decisions`, printed through `log`) and the next
        setting."""
        m, cur, nxt = r.m, r.cur, r.nxt
        reason = r.note + r.reason
        if nxt != cur and not self.settled:
            self._pending = (cur, nxt)
        start = 0.0 if (self.persistent and nxt == cur) else r.start_new
        predicted = self._predict(m, nxt[0], nxt[1], start) * r.calib
        d = {"epoch": r.epoch + 1, "workers": nxt[0], "prefetch_factor": nxt[1],
             "predicted_epoch_seconds": predicted, "measured_epoch_seconds": None,
             "previous": {"workers": cur[0], "prefetch_factor": cur[1],
                          "measured_epoch_seconds": m.seconds, "replay_seconds": r.replay,
                          "step_runq_share": (m.step_runq_s / m.seconds) if m.seconds else 0.0,
                          "foreign_threads": m.foreign, "cores_fitted": m.cores,
                          "handoff_seconds": m.handoff_s,
                          "side_seconds": getattr(m, "side_s", 0.0),
                          "step_threads": getattr(m, "step_threads", 1.0),
                          "steady_epoch_seconds": r.steady_now, "warmup": r.warm,
                          "noise": self._noise},
             "predicted_peak_rss_bytes": predict_memory(m, nxt[0], nxt[1]),
             "memory": {**memory_inputs(m),
                        **predict_memory(m, nxt[0], nxt[1], detail=True)},
             "refused": [{"workers": c["workers"], "prefetch_factor": c["prefetch_factor"],
                          "predicted_peak_bytes": c["memory"],
                          "predicted_epoch_seconds": c["score"]} for c in r.refused],
             "memory_budget_bytes": self.budget, "memory_drift_bytes": self._mem_drift,
             "changed": nxt != cur, "caution": self.caution,
             "settled": self.settled, "calibration": r.calib, "reason": reason, "error": None,
             "held_small": r.held_small, "probe": r.probe,
             "load": self._load_words(r.fit_now)}
        d["decide_seconds"] = _time.perf_counter() - t_decide  # the tuner's own cost
        self.decisions.append(d)
        self.workers, self.prefetch_factor = nxt
        if self.log:
            self.log(decision_line(d, self.decisions[-2] if len(self.decisions) > 1 else None))
        return nxt


_UNSET = object()


class _Round:
    """One decision's state: the epoch measured (m: its steady part for a warm-up) and what the
    rules found so far (nxt, reason, note)."""

    def __init__(self, **fields):
        self.reason, self.note, self.held_small = "", "", False
        self.refused = []
        self.probe = False
        self.probe_setting = _UNSET  # Tuner._probe_setting's answer, once asked
        self.__dict__.update(fields)
        self.nxt = self.cur

def _load(fit):
    """A fitted load as one number: threads wanting a core, or cores taken away."""
    return fit[0] - fit[1]


def _measured_terms(m):
    """The model's terms a measurement carries beside its batches and step, as simulate_epoch
    takes them (a measurement of an older lotus, or a test's, may lack the later ones)."""
    return {"handoff": m.handoff_s, "init_s": getattr(m, "worker_init_s", 0.0),
            "side": getattr(m, "side_s", 0.0), "step_threads": getattr(m, "step_threads", 1.0)}


def _cpu_bound(batches):
    """The batches spent under half their time off the CPU."""
    cpu = sum(b[0] for b in batches)
    off = sum(b[1] for b in batches)
    return cpu > 0 and off < cpu


def _steady_part(m):
    """A warm-up epoch's measurement without its first quarter: those batches take the mean of
    the others (the epoch keeps its length), those steps are left out of the consumer's mean."""
    s = _copy.copy(m)
    k = int(len(m.batches) * WARMUP_SHARE)
    if 0 < k < len(m.batches):
        rest = m.batches[k:]
        mean = (sum(b[0] for b in rest) / len(rest), sum(b[1] for b in rest) / len(rest))
        s.batches = [mean] * k + list(rest)
    j = int(len(m.steps) * WARMUP_SHARE)
    if 0 < j < len(m.steps):
        s.steps = list(m.steps[j:])
    return s


def _pct(x):
    """A share as a percentage in words: one decimal under 10 %, none above."""
    v = 100 * abs(x)
    return f"{v:.1f}" if v < 10 else f"{v:.0f}"


def _gained(gain):
    return f"gained {_pct(gain)} %" if gain >= 0 else f"lost {_pct(gain)} %"


def _mib(b):
    return f"{b / 1048576:.0f} MiB"


def _pf_order(pf):
    """Among settings predicted alike: PyTorch's default prefetch_factor 2 first, then deeper,
    then 1. The model sees no cost in a shallow queue, but every sweep of the three pipelines of
    bench/python/autotune_regret.py on the development VM found its best at 2 or 4, and 1 was up
    to 14 % slower at the same workers (latencies of handing batches over, not modelled)."""
    return (0, 0) if pf == 2 else (1, -pf)


def _workers(n):
    return f"{n} worker" if n == 1 else f"{n} workers"


def decision_line(d, previous=None):
    """The line printed for a decision. Every figure in it is a field of the decisions."""
    p = d["previous"]
    checked = ""
    if previous is not None and previous.get("measured_epoch_seconds") is not None:
        checked = (f" (predicted {previous['predicted_epoch_seconds']:.3f} s, error "
                   f"{100 * previous['error']:.0f} %)")
    if p.get("warmup"):
        checked += ", a warm-up (workers started: not steady state, not a model miss)"
    load = f"{d['load']}; " if d.get("load") else ""
    return (f"lotus.autotune: epoch {d['epoch'] - 1} ran {_workers(p['workers'])}, "
            f"prefetch_factor {p['prefetch_factor']}: {p['measured_epoch_seconds']:.3f} s"
            f"{checked}; epoch {d['epoch']}: {_workers(d['workers'])}, prefetch_factor "
            f"{d['prefetch_factor']}, predicted {d['predicted_epoch_seconds']:.3f} s, peak memory "
            f"{_mib(d['predicted_peak_rss_bytes'])} of {_mib(d['memory_budget_bytes'])}; "
            f"{load}{d['reason']}")

