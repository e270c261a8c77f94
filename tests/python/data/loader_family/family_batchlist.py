# SPDX-License-Identifier: MIT
"""batchlist's Loader: each batch's wait, its consumption and its collation.

A batch is made in the training loop's own next(): SBatchWait_k and SBatchConsumed_k in the
consumer's file, SBatchPreprocessed_k over the same next() around its SCollate record."""

from .. import _lotus
from . import _contract, _patch

GROUP_RECORDS = {"batchlist": "batchlist.Loader records (SBatchWait/Consumed, SCollate)"}


def _collate(samples):
    t0 = _lotus._now() if _patch.state.trace_all else 0
    out = _patch.original("batchlist.collate")(samples)
    if t0:
        _lotus._record("Collate", t0, _lotus._now())
    return out


def _iter(self):
    it = _patch.original("batchlist.Loader.__iter__")(self)
    k = 0
    while True:
        start = _lotus._wait_begin(k) if _patch.gate(self) else 0
        try:
            batch = next(it)
        except StopIteration:
            return
        finally:
            if start:
                _lotus._wait_done()
        if start:
            end = _lotus._now()
            _lotus._batch(_lotus.BATCH_PREPROCESSED, k, start, end)
            _lotus._batch(_lotus.BATCH_WAIT, k, start, end)
            _lotus._batch(_lotus.BATCH_CONSUMED, k)
        k += 1
        yield batch


def install():
    import batchlist  # installed once the program imported it (FAMILY's library)
    return _patch.install([
        ("batchlist", "batchlist.collate", batchlist, "collate", _collate, ("samples",)),
        ("batchlist", "batchlist.Loader.__iter__", batchlist.Loader, "__iter__", _iter,
         ("self",)),
    ], GROUP_RECORDS)


def _check_run():
    import batchlist
    size = _contract.BATCH_SIZE
    loader = batchlist.Loader(range(_contract.BATCHES * size), size)
    return {"samples": sum(len(b) for b in loader), "epochs": 1}


FAMILY = _contract.Family(
    "batchlist", install, order=50, library="batchlist",
    check=_contract.Check("batchlist", f"{_contract.BATCHES} batches", "batchlist", _check_run,
                          hands_out=False))
