# SPDX-License-Identifier: MIT
"""A simulated CUDA stream for lotus's GPU-idle figures on machines without a GPU.

`FakeCuda` is an event source for ``lotus.loaders._gpu.set_event_source``: one stream whose
kernels take a planted time (``launch(ms)``, asynchronous as CUDA's are) and events that complete
when the stream reaches them, on the host's monotonic clock. Every event recorded is logged with
the time it completes (``log``), so a test knows the exact figures lotus must report.
"""

import time


class FakeStream:
    def __init__(self, owner):
        self.owner = owner
        self.free_at = 0  # when the work queued so far is done (monotonic ns)


class FakeEvent:
    def __init__(self, owner):
        self.owner = owner
        self.at = None  # completion time (ns) of the last record

    def record(self, stream):
        now = self.owner.clock()
        self.at = max(now, stream.free_at)
        self.owner.log.append(self.at)

    def query(self):
        return self.owner.clock() >= self.at

    def elapsed_time(self, other):
        assert self.at is not None and other.at is not None
        assert self.query() and other.query(), "elapsed_time of an event not complete"
        return (other.at - self.at) / 1e6


class FakeCuda:
    def __init__(self):
        self.clock = time.monotonic_ns
        self.main = FakeStream(self)
        self.log = []  # completion time of every event recorded, in order

    # the event source
    def active(self):
        return True

    def stream(self):
        return self.main

    def event(self):
        return FakeEvent(self)

    # the "training step"
    def launch(self, ms):
        """A kernel of `ms` on the stream, queued now (the host does not wait)."""
        start = max(self.clock(), self.main.free_at)
        self.main.free_at = start + int(ms * 1e6)

    def synchronize(self):
        """The host waits for the stream (as loss.item() does)."""
        while self.clock() < self.main.free_at:
            time.sleep(max(0.0, (self.main.free_at - self.clock()) / 1e9))
