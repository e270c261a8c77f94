# SPDX-License-Identifier: MIT
"""The pre-flight's fresh interpreter: what a spawned DataLoader worker does before its first batch.

Run by ``python -m lotus.torch preflight`` (``_preflight.py``) as ``python THIS_FILE IN OUT``;
imports nothing of lotus. IN (JSON): the script's path, its argv, the parent's sys.path and working
directory, the parent's authkey (hex: torch's shared tensors are fetched from the parent's resource
sharer, as a worker fetches them), the pickle of the loader's members (a file), the first batch's
indices. Like multiprocessing's spawn it imports the script by path as ``__mp_main__`` (so its
``if __name__ == "__main__":`` block does not run), then imports torch's DataLoader, unpickles the
members, runs ``worker_init_fn`` as worker 0, sets up as torch's worker loop does and fetches the
first batch; OUT (JSON): when each step ended (ns, this clock), the modules imported, and any step
that failed. A script whose top level starts a DataLoader iterator when imported so is stopped
there (a spawned worker of such a script fails), and said.
"""

import sys
import time

_T_START = time.time_ns()  # the interpreter has started: the first line of this program


class _TopLevelLoader(BaseException):
    pass


class _StopAtLoader:
    """A meta-path finder: once torch's dataloader module is executed, its iterators stop at
    __init__ (the script's top level, imported as __mp_main__, must not start a loader)."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch.utils.data.dataloader":
            return None
        sys.meta_path.remove(self)
        try:
            import importlib.util
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        real = spec.loader.exec_module

        def exec_module(module):
            real(module)
            base = getattr(module, "_BaseDataLoaderIter", None)
            if base is not None and _STATE["armed"]:
                def stop(self, loader, *a, **k):
                    if _STATE["armed"]:
                        raise _TopLevelLoader()
                    return _STATE["init"](self, loader, *a, **k)
                _STATE["init"] = base.__init__
                base.__init__ = stop
        spec.loader.exec_module = exec_module
        return spec


_STATE = {"armed": True, "init": None}


def worker_body(members, cfg, out):
    """What a DataLoader worker does before its first batch is sent, given the loader's members:
    worker_init_fn as worker 0, the worker loop's setup, the first batch fetched and pickled for
    the result queue. Each step's time in `out` (ns); a failed step in out["errors"]. Also run in
    a forked child of the pre-flight (a fork worker's start, measured)."""
    from multiprocessing.reduction import ForkingPickler
    dataset, collate_fn, init_fn, kind_iterable, auto_collation, drop_last = members
    if collate_fn is None:  # left out by the pre-flight (it does not pickle): torch's own
        from torch.utils.data._utils import collate
        collate_fn = collate.default_collate if auto_collation else collate.default_convert
    try:
        from torch.utils.data._utils import worker as tw
        info = tw.WorkerInfo(id=0, num_workers=cfg["workers"], seed=cfg["seed"],
                             dataset=dataset)
        tw._worker_info = info
    except BaseException as e:  # noqa: BLE001
        out["errors"]["worker_info"] = f"{type(e).__name__}: {e}"
    cpu0 = time.thread_time_ns()
    t0 = time.time_ns()
    if init_fn is not None:
        try:
            init_fn(0)
        except BaseException as e:  # noqa: BLE001
            out["errors"]["worker_init_fn"] = f"{type(e).__name__}: {e}"
    out["init_fn_ns"] = time.time_ns() - t0
    out["init_cpu_ns"] = time.thread_time_ns() - cpu0
    t0 = time.time_ns()
    fetcher = None
    try:  # torch's worker loop's own setup: its seeds and its fetcher
        import random
        import torch
        torch.set_num_threads(1)
        random.seed(cfg["seed"])
        torch.manual_seed(cfg["seed"])
        from torch.utils.data._utils.fetch import (_IterableDatasetFetcher,
                                                   _MapDatasetFetcher)
        if kind_iterable:
            fetcher = _IterableDatasetFetcher(dataset, auto_collation, collate_fn, drop_last)
        else:
            fetcher = _MapDatasetFetcher(dataset, auto_collation, collate_fn, drop_last)
    except BaseException as e:  # noqa: BLE001
        out["errors"]["setup"] = f"{type(e).__name__}: {e}"
    out["setup_ns"] = time.time_ns() - t0
    if fetcher is not None and cfg.get("first_index") is not None:
        t0 = time.time_ns()
        try:
            batch = fetcher.fetch(cfg["first_index"])
            # The batch's way to the main process: pickled for the result queue (tensors
            # moved to shared memory, as a worker's are) and rebuilt (their memory fetched
            # through multiprocessing's resource sharer, as the main process does).
            ForkingPickler.loads(ForkingPickler.dumps(batch))
            out["first_batch_ns"] = time.time_ns() - t0
        except BaseException as e:  # noqa: BLE001
            out["errors"]["first_batch"] = f"{type(e).__name__}: {e}"
            return
        del batch
        after = cfg.get("after_first")  # (the fork probe's: lotus.loaders._fork)
        if after is not None:
            after(fetcher)


def main():
    import json
    with open(sys.argv[1]) as f:
        cfg = json.load(f)
    out = {"t_start": _T_START, "errors": {}}
    out_path = sys.argv[2]
    sys.path[:] = cfg["sys_path"]
    sys.argv[:] = cfg["argv"]
    import os
    os.chdir(cfg["cwd"])
    import multiprocessing
    multiprocessing.current_process().authkey = bytes.fromhex(cfg["authkey"])
    sys.meta_path.insert(0, _StopAtLoader())
    out["t_main0"] = time.time_ns()
    try:
        from multiprocessing import spawn
        fixup = getattr(spawn, "_fixup_main_from_path", None)
        if fixup is not None:
            fixup(cfg["script"])
        else:
            import runpy
            import types
            mod = types.ModuleType("__mp_main__")
            mod.__dict__.update(runpy.run_path(cfg["script"], run_name="__mp_main__"))
            sys.modules["__main__"] = sys.modules["__mp_main__"] = mod
    except _TopLevelLoader:
        out["errors"]["main"] = ("the script's top level starts a DataLoader iterator when a "
                                 "worker imports it as __mp_main__ (no `if __name__ == "
                                 "\"__main__\":` guard around the training loop)")
    except BaseException as e:  # noqa: BLE001 - said in the report
        out["errors"]["main"] = f"{type(e).__name__}: {e}"
    out["t_main"] = time.time_ns()
    _STATE["armed"] = False
    import torch.utils.data  # noqa: F401 - a worker's loop is torch's
    out["t_torch"] = time.time_ns()
    members = None
    try:
        from multiprocessing.reduction import ForkingPickler
        with open(cfg["pickle"], "rb") as f:
            data = f.read()
        out["t_read"] = time.time_ns()
        members = ForkingPickler.loads(data)
    except BaseException as e:  # noqa: BLE001
        out["errors"]["unpickle"] = f"{type(e).__name__}: {e}"
    out["t_unpickle"] = time.time_ns()
    if members is not None:
        worker_body(members, cfg, out)
    out["t_end"] = time.time_ns()
    out["modules"] = sorted(k for k, v in list(sys.modules.items()) if v is not None)
    with open(out_path, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    import os
    os._exit(0)  # no exit handler of the script's (its atexit hooks are the parent's business)
