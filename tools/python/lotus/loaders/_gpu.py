# SPDX-License-Identifier: MIT
"""The GPU's side of the main process's batch hand-overs (lotus.torch; a process that uses CUDA).

At each hand-over (the iterator's ``_next_data``) the main process records a CUDA event A on the
current stream before asking for the batch and an event B once it has it. A completes when the
GPU has finished the work queued before the call (or at the call, if it was idle by then), B when
the stream reaches it, so

* elapsed(A_i, B_i) is how long the GPU had nothing to do because batch i was late (about 0 when
  it still had queued work when the batch came), and
* elapsed(B_i, A_i+1) is the GPU's time for step i: from the batch's arrival until the GPU finished
  the work queued before the next batch was asked for (the host's own time where the host, not
  the GPU, was the slower).

The events are read later, with ``query()`` at later hand-overs (never a synchronisation), from a
bounded pool: at most ``MAX_PENDING`` hand-overs unread; a hand-over beyond that is not measured
and counted lost. Each read hand-over becomes a sidecar line (FORMAT.md §5)::

    gpu <idx> <arrival_ns> <idle_ns> <step_ns>     (step_ns "-": unknown; arrival: realtime)
    gpu_lost <n>                                   (a running count; the last line counts)

Nothing happens in a process where CUDA is not initialized: lotus never initializes CUDA itself,
and writes no line, no file and no event then.

``set_event_source`` replaces the CUDA events by another source (tests: a simulated stream).
"""

import atexit
import collections
import time

from .. import _lotus

MAX_PENDING = 64  # hand-overs whose events are not read yet
_MAX_UNSENT = 4096  # lines the runtime could not take yet (beyond: counted lost)


class CudaEvents:
    """torch.cuda's events on the current stream, once this process uses CUDA."""

    def __init__(self):
        self._cuda = None
        self._failed = False

    def active(self):
        if self._cuda is None:
            if self._failed:
                return False
            try:
                import torch.cuda as cuda
            except Exception:  # noqa: BLE001 - no torch.cuda: nothing to measure
                self._failed = True
                return False
            self._cuda = cuda
        try:
            # Only a process that initialized CUDA itself (never lotus); False in a forked child.
            return bool(self._cuda.is_initialized())
        except Exception:  # noqa: BLE001
            return False

    def stream(self):
        return self._cuda.current_stream()

    def event(self):
        return self._cuda.Event(enable_timing=True)


_source = CudaEvents()
_tracker = None


def set_event_source(source):
    """Replaces the event source (an object with active(), stream(), event(); an event with
    record(stream), query(), elapsed_time(other) in ms). None restores CUDA's. Tests only."""
    global _source, _tracker, _broken
    if _tracker is not None:
        _tracker.finish()
    _tracker = None
    _broken = False
    _source = source if source is not None else CudaEvents()


class _Handover:
    __slots__ = ("owner", "stream", "a", "b", "idx", "arrival", "after_gap")

    def __init__(self, owner, stream, a, after_gap):
        self.owner = owner
        self.stream = stream
        self.a = a
        self.b = None  # None: the call ended the iteration (its A closes the previous step)
        self.idx = -1
        self.arrival = 0
        self.after_gap = after_gap


class Tracker:
    """The hand-overs of one process: events recorded, read when complete, lines handed on."""

    def __init__(self, source):
        self.src = source
        self.pending = collections.deque()
        self.free = []  # (stream, event) pairs ready for reuse
        self.unsent = []  # lines the runtime did not take yet
        self.lost = 0  # hand-overs whose figures are lost
        self.lost_sent = 0
        self.gap = False  # a hand-over was skipped since the last recorded one

    def _event(self, stream):
        for k in range(len(self.free) - 1, -1, -1):
            s, e = self.free[k]
            if s is stream or s == stream:
                del self.free[k]
                return e
        return self.src.event()

    def _release(self, h):
        for e in (h.a, h.b):
            if e is not None and len(self.free) < 2 * MAX_PENDING + 2:
                self.free.append((h.stream, e))

    def start(self):
        """Event A recorded now, for a hand-over begun later (begin(owner, started)): a new
        iterator's first, whose wait begins in its __init__. Not queued until then, so that the
        reads of other iterators' hand-overs never wait on it."""
        stream = self.src.stream()
        a = self._event(stream)
        a.record(stream)
        return stream, a

    def begin(self, owner, started=None):
        """Before the iterator asks for a batch: event A (or the one `start` recorded), or None
        (not measured)."""
        self.poll()
        if len(self.pending) >= MAX_PENDING:  # the GPU is that far behind: not measured
            self.lost += 1
            self.gap = True
            return None
        stream, a = started if started is not None else self.start()
        h = _Handover(id(owner), stream, a, self.gap)
        self.gap = False
        self.pending.append(h)
        return h

    def end(self, h, idx, arrival_ns):
        """The batch `idx`, arrived at `arrival_ns` (realtime), is in the host's hands: event B."""
        b = self._event(h.stream)
        b.record(h.stream)
        h.b = b
        h.idx = idx
        h.arrival = arrival_ns

    def closed(self, h):
        """The iterator's next() raised (the epoch's end, or an error): no batch, but its A
        ends the previous batch's step."""
        h.idx = -2

    def poll(self, final=False):
        """Reads the hand-overs whose events completed, in order; `final`: the last read (steps
        not complete by now are unknown, hand-overs not complete are lost)."""
        pending = self.pending
        while pending:
            h = pending[0]
            if h.b is None:  # a next() that raised (or, the last one, still running)
                if h.idx == -2 or len(pending) > 1 or final:
                    pending.popleft()
                    self._release(h)
                    continue
                break
            if not h.b.query():
                if not final:
                    break
                self.lost += sum(1 for x in pending if x.b is not None)
                for x in pending:
                    self._release(x)
                pending.clear()
                break
            nxt = pending[1] if len(pending) > 1 else None
            if nxt is None and not final:
                break  # its step ends at the next hand-over
            step = None
            if (nxt is not None and nxt.owner == h.owner and not nxt.after_gap
                    and nxt.stream == h.stream):
                if nxt.a.query():
                    step = h.b.elapsed_time(nxt.a)
                elif not final:
                    break
            idle = h.a.elapsed_time(h.b)
            self.unsent.append(b"gpu %d %d %d %s\n" % (
                h.idx, h.arrival, _ns(idle), b"-" if step is None else b"%d" % _ns(step)))
            pending.popleft()
            self._release(h)
        self._send()

    def _send(self):
        """Hands the lines read to the runtime (the sidecar), with the lost count when it
        changed. The writer may hold the queue just now: the lines go at a later call."""
        body = self.unsent
        count_line = self.lost != self.lost_sent
        if not body and not count_line:
            return True
        lost = self.lost
        data = b"".join(body) + (b"gpu_lost %d\n" % lost if count_line else b"")
        r = _lotus._note_gpu_lines(data)
        if r == 0:
            self.lost_sent = lost
        elif r == 2 and len(body) < _MAX_UNSENT:
            return False
        else:  # no room (the writer is behind or stopped): these hand-overs are lost
            self.lost += len(body)
        body.clear()
        return True

    def finish(self):
        """The last read: at exit (or when the source is replaced)."""
        try:
            self.poll(final=True)
            for _ in range(200):  # the writer holds the queue only for a moment
                if self._send():
                    break
                time.sleep(0.001)
        except Exception:  # noqa: BLE001 - CUDA may be going down: nothing more to read
            pass


def _ns(ms):
    v = int(round(ms * 1e6))
    return v if v > 0 else 0


def _at_exit():
    t = _tracker
    if t is not None:
        t.finish()
        _lotus.flush()


class StepEvents:
    """The GPU's time per step of one loop (lotus.torch.autotune's epochs): event A before each
    next(), B after it; step i (after batch i) is elapsed(B_i, A_i+1), read once complete (never a
    synchronisation). At most MAX_PENDING unread steps: beyond, the oldest is given up."""

    def __init__(self, source):
        self.src = source
        self.pending = collections.deque()  # (step index, B, A)
        self.seconds = {}  # step index -> the GPU's time for it (s)
        self.count = 0  # batches handed over
        self._b = None

        self.broken = False  # a CUDA call failed: no more figures (the loop goes on)

    def before(self):
        if self.broken:
            return
        try:
            stream = self.src.stream()
            a = self.src.event()
            a.record(stream)
            if self._b is not None:
                if len(self.pending) >= MAX_PENDING:
                    self.pending.popleft()
                self.pending.append((self.count - 1, self._b, a))
                self._b = None
        except Exception:  # noqa: BLE001 - never the training loop's failure
            self.broken = True
        self.poll()

    def after(self):
        self.count += 1
        if self.broken:
            return
        try:
            stream = self.src.stream()
            b = self.src.event()
            b.record(stream)
            self._b = b
        except Exception:  # noqa: BLE001
            self.broken = True

    def poll(self):
        pending = self.pending
        try:
            while pending and pending[0][2].query():
                i, b, a = pending.popleft()
                self.seconds[i] = max(0.0, b.elapsed_time(a) / 1e3)
        except Exception:  # noqa: BLE001
            self.broken = True
            pending.clear()


def step_events():
    """A StepEvents for a loop of this process when its training uses CUDA (or a test's
    source), else None."""
    return StepEvents(_source) if _source.active() else None


_exit_hooked = False
_broken = False


def _give_up(e):
    """A CUDA call failed: the GPU's figures stop here (said once); training goes on."""
    global _broken, _tracker
    _broken = True
    _tracker = None
    import warnings
    warnings.warn(f"lotus: the GPU's idle time is no longer measured ({type(e).__name__}: {e})",
                  RuntimeWarning, stacklevel=3)


def start():
    """A new iterator's __init__: its first hand-over's event A, recorded now (None: not
    measured); begin(owner, started) takes it at the first next()."""
    if _broken:
        return None
    try:
        t = tracker()
        return t.start() if t is not None else None
    except Exception as e:  # noqa: BLE001 - never the training loop's failure
        _give_up(e)
        return None


def begin(owner, started=None):
    """Before an iterator's next(): the hand-over measured (None: not measured)."""
    if _broken:
        return None
    try:
        t = tracker()
        return t.begin(owner, started) if t is not None else None
    except Exception as e:  # noqa: BLE001 - never the training loop's failure
        _give_up(e)
        return None


def end(h, idx, arrival_ns):
    """next() returned batch idx, arrived at arrival_ns (idx -1: one lotus did not see arrive;
    its A still ends the step before)."""
    t = _tracker
    if t is None:
        return
    try:
        if idx >= 0:
            t.end(h, idx, arrival_ns)
        else:
            t.closed(h)
    except Exception as e:  # noqa: BLE001
        _give_up(e)


def closed(h):
    """next() raised (the epoch's end, or the loader's error)."""
    t = _tracker
    if t is not None:
        t.closed(h)


def tracker():
    """The process's tracker when its training uses CUDA (or a test's source), else None. Cheap
    when not: one call to torch.cuda.is_initialized()."""
    global _tracker, _exit_hooked
    t = _tracker
    if t is not None:
        return t
    if not _source.active():
        return None
    _tracker = t = Tracker(_source)
    if not _exit_hooked:
        atexit.register(_at_exit)
        _exit_hooked = True
    return t
