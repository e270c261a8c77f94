# SPDX-License-Identifier: MIT
"""torchdata's StatefulDataLoader: the record set of torch's DataLoader (``dataloader.py``).

Its iterator has torch's multiprocessing shape with a payload of its own (``_get_data`` returns
``(idx, (batch, worker_id, state_dict))``) and a worker loop of its own; the fetchers are torch's,
so the worker-side records come from ``dataloader.py``'s fetch wrappers. A loader resumed with
``load_state_dict()`` in the middle of an epoch numbers its batches from 0 again: lotus adds the
snapshot's step, so every record carries the index of the batch in the epoch it continues, and the
batches torchdata replays inside ``__init__`` to reach the saved position
(``snapshot_every_n_steps`` > 1) are loaded again (worker records) but get no wait or consumed
record: the training loop never sees them.
"""

from . import _contract, _patch, _sites
from .dataloader import _NOT_A_BATCH, main_targets, make_replacement

GROUP_RECORDS = {
    "stateful_workers": "StatefulDataLoader worker-side batch records",
    "stateful_main": "StatefulDataLoader main-process records (SBatchQueued/Wait/Consumed)",
    "stateful_sites": "StatefulDataLoader creation sites (the startup lines' site fields)",
}


def _batch_of(payload):
    """The batch in a StatefulDataLoader arrival: (batch, worker_id, state_dict)."""
    if type(payload) is tuple and len(payload) == 3:
        return payload[0]
    return _NOT_A_BATCH


def _resume_offset(args, kwargs):
    """The epoch's index of a resumed iterator's batch 0: the step of the snapshot it restores."""
    state = kwargs.get("next_iter_state", args[0] if args else None)
    if not isinstance(state, dict):
        return 0
    try:
        from torchdata.stateful_dataloader import stateful_dataloader as sd
        it = sd._StatefulMultiProcessingDataLoaderIter
        step = state[it._SNAPSHOT][it._SNAPSHOT_STEP]
    except (ImportError, AttributeError, KeyError, TypeError):
        return 0
    return step if type(step) is int and step > 0 else 0


def targets():
    try:
        from torchdata.stateful_dataloader import stateful_dataloader as sd
    except ImportError:  # no torchdata, or one without StatefulDataLoader
        return []
    out = [("stateful_workers", "stateful._worker_loop", sd, "_worker_loop", None,
            ("dataset_kind", "dataset|dataset_holder", "index_queue", "..."))]
    out += main_targets("stateful_main", sd._StatefulMultiProcessingDataLoaderIter,
                        "_StatefulMultiProcessingDataLoaderIter",
                        ("self", "loader", "next_iter_state", "..."),
                        unwrap=_batch_of, resume_offset=_resume_offset)
    own_init = sd.StatefulDataLoader.__dict__.get("__init__")
    if own_init is not None:  # its own __init__ (DataLoader's is dataloader.py's target)
        out.append(("stateful_sites", "stateful.StatefulDataLoader.__init__",
                    sd.StatefulDataLoader, "__init__", _sites.make_loader_init(own_init),
                    ("self", "...")))
    return out


def install():
    return _patch.install(targets(), GROUP_RECORDS, make=make_replacement)


def _check_run():
    """``--check``: a StatefulDataLoader stopped after half an epoch, resumed from its state_dict()
    in a new loader, to the epoch's end."""
    from torchdata.stateful_dataloader import StatefulDataLoader

    def loader():
        return StatefulDataLoader(_contract.Samples(_contract.compose()),
                                  batch_size=_contract.BATCH_SIZE, num_workers=_contract.WORKERS)

    first = loader()
    it = iter(first)
    n = sum(len(next(it)) for _ in range(_contract.BATCHES // 2))
    state = first.state_dict()
    del it
    resumed = loader()
    resumed.load_state_dict(state)
    n += sum(len(b) for b in resumed)
    return {"samples": n, "epochs": 1, "complete": False}


FAMILY = _contract.Family(
    "stateful", install, order=30,
    check=_contract.Check("StatefulDataLoader", f"{_contract.WORKERS} workers, resumed from "
                          f"state_dict() after {_contract.BATCHES // 2} batches",
                          "torchdata.stateful_dataloader", _check_run, hands_out=True))
