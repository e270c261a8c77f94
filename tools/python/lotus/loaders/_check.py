# SPDX-License-Identifier: MIT
"""``python -m lotus.torch --check``: what lotus.torch records on this Python's torch stack.

Runs a tiny traced loader of each family whose library is installed (a DataLoader with 2 workers,
a StatefulDataLoader resumed from a checkpoint in the middle of an epoch, a torchdata.nodes
pipeline), each in a fresh interpreter with its own trace prefix, checks the records against the
contract every family keeps (``_contract.py``), and prints one line per family. Exit 0 when every
family that is installed records all it should, 1 when one does not (its warning is printed), 2 on
bad arguments. When torch does not import (not installed in this Python, or a broken install) or
no family could be checked, it prints one line saying why on stderr and exits 1: a gate run in the
wrong environment fails, never passes having checked nothing.
"""

import json as _json
import os as _os
import pathlib as _pathlib
import subprocess as _subprocess
import sys as _sys
import tempfile as _tempfile
import warnings as _warnings

from . import _contract

BATCHES, BATCH_SIZE, WORKERS = 6, 2, 2


def _read(directory):
    out = {}
    d = _pathlib.Path(directory)
    if not d.is_dir():
        return out
    for p in sorted(d.iterdir()):
        if p.name.startswith("."):
            continue
        rows = []
        for line in p.read_text().splitlines():
            name, start, dur = line.rsplit(",", 2)
            rows.append((name, int(start), int(dur)))
        out[p.name] = rows
    return out


class _Samples:
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


def _compose():
    try:
        from torchvision import transforms
    except ImportError:
        return None
    return transforms.Compose([AddOne()])


def _run_dataloader(prefix):
    import torch.utils.data as tud
    import lotus.torch
    lotus.torch.instrument(log_file=prefix)
    n = sum(len(b) for b in tud.DataLoader(_Samples(_compose()), batch_size=BATCH_SIZE,
                                           num_workers=WORKERS))
    return {"samples": n, "epochs": 1}


def _run_stateful(prefix):
    from torchdata.stateful_dataloader import StatefulDataLoader
    import lotus.torch
    lotus.torch.instrument(log_file=prefix)
    loader = StatefulDataLoader(_Samples(_compose()), batch_size=BATCH_SIZE, num_workers=WORKERS)
    it = iter(loader)
    n = sum(len(next(it)) for _ in range(BATCHES // 2))
    state = loader.state_dict()
    del it
    resumed = StatefulDataLoader(_Samples(_compose()), batch_size=BATCH_SIZE, num_workers=WORKERS)
    resumed.load_state_dict(state)
    n += sum(len(b) for b in resumed)
    return {"samples": n, "epochs": 1, "complete": False}


def _run_nodes(prefix):
    from . import nodes
    return nodes.check_run(prefix)


FAMILIES = [
    # (name, what the run is, module it needs, runner, hands work out)
    ("DataLoader", f"{WORKERS} workers, {BATCHES} batches", "torch.utils.data", _run_dataloader,
     True),
    ("StatefulDataLoader", f"{WORKERS} workers, resumed from state_dict() after {BATCHES // 2} "
     "batches", "torchdata.stateful_dataloader", _run_stateful, True),
    ("torchdata.nodes", "Mapper, Batcher, Prefetcher, Loader", "torchdata.nodes", _run_nodes,
     False),
]


def _child(name, prefix):
    """In the fresh interpreter: run family `name`, print its JSON result last."""
    runner = next(f[3] for f in FAMILIES if f[0] == name)
    with _warnings.catch_warnings(record=True) as caught:
        _warnings.simplefilter("always")
        info = runner(prefix)
    import lotus
    lotus.flush()
    info["warnings"] = [str(w.message) for w in caught
                        if "lotus" in str(w.message) and issubclass(w.category, RuntimeWarning)]
    print(_json.dumps(info))


def _versions():
    out = [f"Python {_sys.version.split()[0]}"]
    for mod in ("torch", "torchvision", "torchdata"):
        try:
            m = __import__(mod)
            out.append(f"{mod} {getattr(m, '__version__', '?')}")
        except ImportError:
            out.append(f"{mod} not installed")
        except Exception as e:  # a broken install: say so, do not crash
            out.append(f"{mod} fails to import ({type(e).__name__}: {e})")
    return out


def _import_error(module):
    """None when `module` imports; else why not, in a few words ("not installed" for a missing
    one: the caller tells it from a broken one by the prefix)."""
    try:
        __import__(module)
        return None
    except ImportError as e:
        if isinstance(e, ModuleNotFoundError) and e.name and (
                module == e.name or module.startswith(e.name + ".")):
            return "not installed"
        return f"fails to import ({type(e).__name__}: {e})"
    except Exception as e:  # noqa: BLE001 (a broken install: say so, do not crash)
        return f"fails to import ({type(e).__name__}: {e})"


def _describe(counts, ops):
    main = counts["main"]
    worker = counts["worker"]
    parts = []
    if main:
        parts.append("main process " + ", ".join(f"{main[k]} {k.lower()}"
                                                 for k in ("Queued", "Wait", "Consumed")
                                                 if main[k]))
    if worker:
        parts.append(f"workers {worker['Preprocessed']} batches")
    if ops:
        parts.append("ops " + ", ".join(f"{k} {v}" for k, v in sorted(ops.items())))
    return "; ".join(parts) or "nothing"


def _package_root():
    """The directory this lotus package was imported from (the child imports the same one)."""
    import lotus
    return str(_pathlib.Path(lotus.__file__).parent.parent)


def run_check(out=_sys.stdout, json_out=False):
    results = []
    with _tempfile.TemporaryDirectory(prefix="lotus-check-") as tmp:
        for name, what, module, _, queued in FAMILIES:
            row = {"family": name, "run": what}
            why = _import_error(module)
            if why == "not installed":
                row.update(status="not installed", records={}, problems=[])
                results.append(row)
                continue
            if why is not None:
                row.update(status="failed", records={}, problems=[f"{module} {why}"])
                results.append(row)
                continue
            prefix = _os.path.join(tmp, name.replace(".", "_"), "trace", "lotustrace_log")
            env = dict(_os.environ)
            env.pop("LOTUS_LOG_FILE", None)
            env["PYTHONPATH"] = _os.pathsep.join(
                [_package_root()]
                + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
            r = _subprocess.run([_sys.executable, "-c",
                                 "import sys; from lotus.loaders import _check; "
                                 "_check._child(sys.argv[1], sys.argv[2])", name, prefix],
                                capture_output=True, text=True, env=env, timeout=600)
            lines = r.stdout.strip().splitlines()
            try:
                info = _json.loads(lines[-1]) if r.returncode == 0 and lines else None
            except ValueError:
                info = None
            if info is None:
                tail = (r.stderr.strip().splitlines() or ["no output"])[-1]
                row.update(status="failed", records={}, problems=[f"the run failed: {tail}"])
                results.append(row)
                continue
            files = _read(_os.path.dirname(prefix))
            counts = _contract.summary(files)
            problems = list(info["warnings"])
            problems += _contract.check(files, epochs=info.get("epochs", 1), queued=queued,
                                        complete=info.get("complete", True))
            expected = info.get("expected_batches", BATCHES)
            if counts["main"]["Consumed"] < expected:
                problems.append(f"{counts['main']['Consumed']} of {expected} batches have "
                                "main-process records")
            row.update(status="ok" if not problems else "incomplete",
                       records={"main": dict(counts["main"]), "worker": dict(counts["worker"]),
                                "ops": dict(counts["ops"])},
                       problems=problems, described=_describe(counts, counts["ops"]))
            results.append(row)
    versions = _versions()
    if json_out:
        print(_json.dumps({"versions": versions, "families": results}, indent=1), file=out)
    else:
        print("lotus.torch on " + ", ".join(versions), file=out)
        for row in results:
            line = f"  {row['family']}: {row['status']}"
            if row.get("described"):
                line += f" ({row['run']}): {row['described']}"
            print(line, file=out)
            for p in row["problems"][:5]:
                print(f"    {p}", file=out)
    bad = [r for r in results if r["status"] in ("failed", "incomplete")]
    if all(r["status"] == "not installed" for r in results):
        print("lotus.torch --check: no loader family is installed; nothing was checked",
              file=_sys.stderr)
        return 1
    if not json_out:
        if bad:
            print("result: " + ", ".join(r["family"] for r in bad) + " not fully recorded on "
                  "this stack", file=out)
        else:
            print("result: every installed loader family records all lotus.torch knows", file=out)
    return 1 if bad else 0


USAGE = "usage: python -m lotus.torch --check [--json]"


def main(argv):
    if not argv or argv[0] != "--check" or any(a not in ("--check", "--json") for a in argv):
        print(USAGE, file=_sys.stderr)
        return 2
    why = _import_error("torch")
    if why == "not installed":
        why = f"torch is not installed in {_sys.executable}"
    elif why is not None:
        why = "torch " + why
    else:
        why = _import_error("torch.utils.data")
        why = why and "torch.utils.data " + why
    if why is not None:
        print(f"lotus.torch --check: {why}; nothing was checked", file=_sys.stderr)
        return 1
    return run_check(json_out="--json" in argv)
