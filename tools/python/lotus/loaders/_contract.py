# SPDX-License-Identifier: MIT
"""The record contract: what every loader family's adapter must emit, checked once for all.

A trace is ``{file name: [(record name, start ns, duration ns), ...]}`` (one entry per file of a
prefix; hidden sidecars excluded). For each batch ``k`` the training loop received from a loader
with producers (worker processes, threads), in one epoch:

* the consumer's file (``*_main_pid_*``) holds ``SBatchWait_k`` (a real wait, or the 1 µs marker
  of an out-of-order arrival) and then ``SBatchConsumed_k`` (a 1 µs marker), once each; where the
  loader hands work out (a DataLoader's index queues), ``SBatchQueued_k`` (a 1 µs marker) before the
  wait;
* the producers' files (``*_worker_pid_*``) hold ``SBatchPreprocessed_k`` once, around the batch's
  work: every op record of that batch in the same file before it lies inside its span;
* op records are ``S<name>`` with a name that is not a batch record's.

Batch indices restart at 0 with each epoch; an epoch resumed from a checkpoint goes on with the
indices of the epoch it continues. ``check`` returns the breaches (empty: the trace keeps the
contract) and ``summary`` counts what was recorded, by kind.

A family declares itself at the end of its module with ``FAMILY = Family(...)``: its name, how it
installs, the library whose import installs it, and its ``python -m lotus.torch --check`` run
(``Check``: the run, and its place in the contract). ``lotus.loaders`` finds every module that does
(``loaders.families()``); nothing else lists them. The check's runs are small runs of the sizes
below, over ``Samples``.
"""

import collections as _collections
import os as _os
import pathlib as _pathlib

from .. import _lotus

# ---- the declaration of a family ----------------------------------------------------------------


class Check:
    """A family's ``--check`` run and its place in the contract.

    label: the family's name in --check's lines ("DataLoader"); what: the run, in a few words;
    needs: the module whose absence makes the family "not installed"; run(): the traced run, called
    in a fresh interpreter after ``needs`` is imported and ``lotus.torch.instrument()`` is on; it
    returns {"samples", "epochs", and optionally "complete" (False: a resumed epoch's batches are
    not all consumed) and "expected_batches"}; hands_out: the loader hands work out (index queues:
    SBatchQueued_k before each wait)."""

    __slots__ = ("label", "what", "needs", "run", "hands_out")

    def __init__(self, label, what, needs, run, hands_out):
        self.label, self.what, self.needs, self.run = label, what, needs, run
        self.hands_out = bool(hands_out)


class Family:
    """A loader family: ``FAMILY = Family(...)`` in its module of ``lotus.loaders``.

    name: the module's name; install(): patch the library, return [(owner, attribute, original or
    None)] to undo (``_patch.install``); order: where it installs (and is checked) among the
    families, smallest first; library: a module name whose import installs the family (never
    imported by lotus itself; None: installed by ``instrument()``); check: its ``Check`` or
    None."""

    __slots__ = ("name", "install", "order", "library", "check")

    def __init__(self, name, install, order, library=None, check=None):
        self.name, self.install, self.order = name, install, order
        self.library, self.check = library, check

    def __repr__(self):
        return f"<lotus loader family {self.name}>"


# ---- the small run of every family's check ------------------------------------------------------

BATCHES, BATCH_SIZE, WORKERS = 6, 2, 2


class Samples:
    """A map-style dataset of BATCHES * BATCH_SIZE one-element tensors, through a Compose."""

    def __init__(self, transform=None):
        self.transform = transform

    def __len__(self):
        return BATCHES * BATCH_SIZE

    def __getitem__(self, i):
        import torch
        x = torch.tensor([float(i)])
        return self.transform(x) if self.transform is not None else x


class AddOne:
    def __call__(self, x):
        return x + 1


def compose():
    """A torchvision Compose of one step (AddOne), or None without torchvision."""
    try:
        from torchvision import transforms
    except ImportError:
        return None
    return transforms.Compose([AddOne()])


MARKER_NS = _lotus.MARKER_NS  # the 1 µs of a marker (SBatchQueued, SBatchConsumed, ...)


def _kind(name):
    """(kind, index) of a batch record's name by the format's batch-kind table (lotus-tool's, in
    the module: a word of ``_lotus.BATCH_KINDS``), else (None, None)."""
    return _lotus._batch_kind(name) or (None, None)


def read(directory):
    """The trace of the prefix files in `directory` (hidden sidecars excluded), as ``check`` takes
    it, each file's records read by lotus-tool's rules (the lines it would skip skipped); {} when
    there is no such directory."""
    out = {}
    d = _pathlib.Path(directory)
    if not d.is_dir():
        return out
    for p in sorted(d.iterdir()):
        if not p.name.startswith("."):
            out[p.name] = _lotus._read_records(_os.fsencode(p))
    return out


def summary(files):
    """{'main': Counter(kind), 'worker': Counter(kind), 'ops': Counter(op name)} of a trace."""
    out = {"main": _collections.Counter(), "worker": _collections.Counter(),
           "ops": _collections.Counter()}
    for name, rows in files.items():
        side = "main" if "_main_pid_" in name else "worker"
        for rec, _, _ in rows:
            kind, _ = _kind(rec)
            if kind is not None:
                out[side][kind] += 1
            elif rec.startswith("S"):
                out["ops"][rec[1:]] += 1
    return out


def check(files, epochs=1, queued=True, complete=True):
    """The breaches of the contract in `files` (a list of strings; empty: kept).

    epochs: how many times each batch index is expected (one per epoch run); queued: the loader
    hands work out (SBatchQueued expected); complete: every batch of those epochs was consumed."""
    problems = []
    main = {n: r for n, r in files.items() if "_main_pid_" in n}
    workers = {n: r for n, r in files.items() if "_worker_pid_" in n}
    consumed = _collections.Counter()
    for fname, rows in main.items():
        pending_wait = _collections.Counter()  # index -> waits seen, not yet consumed
        queued_seen = _collections.Counter()
        for rec, start, dur in rows:
            kind, idx = _kind(rec)
            if kind is None:
                continue
            if kind in ("Queued", "Consumed") and dur != MARKER_NS:
                problems.append(f"{fname}: {rec} lasts {dur} ns, not the {MARKER_NS} ns marker")
            if kind == "Queued":
                queued_seen[idx] += 1
            elif kind == "Wait":
                pending_wait[idx] += 1
            elif kind == "Consumed":
                consumed[idx] += 1
                if pending_wait[idx] <= 0:
                    problems.append(f"{fname}: {rec} without an SBatchWait_{idx} before it")
                else:
                    pending_wait[idx] -= 1
                if queued and queued_seen[idx] < consumed[idx]:
                    problems.append(f"{fname}: {rec} without an SBatchQueued_{idx} before it")
            elif kind == "Preprocessed":
                problems.append(f"{fname}: {rec} in a consumer's file")
        for idx, n in sorted(pending_wait.items()):
            if n > 0 and complete:
                problems.append(f"{fname}: SBatchWait_{idx} never consumed")
    produced = _collections.Counter()
    for fname, rows in workers.items():
        group = []
        for rec, start, dur in rows:
            kind, idx = _kind(rec)
            if kind is None:
                group.append((rec, start, dur))
                continue
            if kind != "Preprocessed":
                problems.append(f"{fname}: {rec} in a producer's file")
                continue
            produced[idx] += 1
            for r2, s2, d2 in group:
                if not (start <= s2 and s2 + d2 <= start + dur):
                    problems.append(f"{fname}: {r2} at {s2} is outside {rec}")
            group = []
    if main:
        for idx in sorted(set(consumed) | set(produced)):
            if complete and consumed[idx] != epochs:
                problems.append(f"batch {idx}: consumed {consumed[idx]} times, expected {epochs}")
            if workers and produced[idx] < consumed[idx]:
                problems.append(f"batch {idx}: consumed {consumed[idx]} times, preprocessed "
                                f"{produced[idx]}")
    return problems
