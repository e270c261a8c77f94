# SPDX-License-Identifier: MIT
"""``python -m lotus.torch --check``: what lotus.torch records on this Python's torch stack.

Runs the small traced loader of each family (``loaders.families()``) whose library is installed
(its ``Check``: a DataLoader with 2 workers, a StatefulDataLoader resumed from a checkpoint in the
middle of an epoch, a torchdata.nodes pipeline, ...), each in a fresh interpreter with its own
trace prefix, checks the records against the contract every family keeps (``_contract.py``), and
prints one line per family. Exit 0 when every
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

from . import _contract, families, libraries


# The fresh interpreter's program: lotus.torch hands its instrument() to _child (this module never
# imports lotus.torch, whose `python -m lotus.torch --check` imports this one).
_CHILD = ("import sys, lotus.torch; from lotus.loaders import _check; "
          "_check._child(lotus.torch.instrument, sys.argv[1], sys.argv[2])")


def _child(instrument, name, prefix):
    """In the fresh interpreter: run family `name`'s check, print its JSON result last."""
    check = next(f for f in families() if f.name == name).check
    with _warnings.catch_warnings(record=True) as caught:
        _warnings.simplefilter("always")
        __import__(check.needs)
        instrument(log_file=prefix)
        info = check.run()
    import lotus
    lotus.flush()
    info["warnings"] = [str(w.message) for w in caught
                        if "lotus" in str(w.message) and issubclass(w.category, RuntimeWarning)]
    print(_json.dumps(info))


def _versions():
    out = [f"Python {_sys.version.split()[0]}"]
    for mod in libraries():
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


def check_family(fam, tmp):
    """Run family `fam`'s check in a fresh interpreter (its trace under directory `tmp`): its row,
    {"family", "run", "status" ("ok", "incomplete", "failed", "not installed"), "records",
    "problems", "described"}."""
    check = fam.check
    row = {"family": check.label, "run": check.what}
    why = _import_error(check.needs)
    if why == "not installed":
        row.update(status="not installed", records={}, problems=[])
        return row
    if why is not None:
        row.update(status="failed", records={}, problems=[f"{check.needs} {why}"])
        return row
    prefix = _os.path.join(tmp, fam.name, "trace", "lotustrace_log")
    env = dict(_os.environ)
    env.pop("LOTUS_LOG_FILE", None)
    env["PYTHONPATH"] = _os.pathsep.join(
        [_package_root()] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    r = _subprocess.run([_sys.executable, "-c", _CHILD, fam.name, prefix],
                        capture_output=True, text=True, env=env, timeout=600)
    lines = r.stdout.strip().splitlines()
    try:
        info = _json.loads(lines[-1]) if r.returncode == 0 and lines else None
    except ValueError:
        info = None
    if info is None:
        tail = (r.stderr.strip().splitlines() or ["no output"])[-1]
        row.update(status="failed", records={}, problems=[f"the run failed: {tail}"])
        return row
    files = _contract.read(_os.path.dirname(prefix))
    counts = _contract.summary(files)
    problems = list(info["warnings"])
    problems += _contract.check(files, epochs=info.get("epochs", 1), queued=check.hands_out,
                                complete=info.get("complete", True))
    expected = info.get("expected_batches", _contract.BATCHES)
    if counts["main"]["Consumed"] < expected:
        problems.append(f"{counts['main']['Consumed']} of {expected} batches have "
                        "main-process records")
    row.update(status="ok" if not problems else "incomplete",
               records={"main": dict(counts["main"]), "worker": dict(counts["worker"]),
                        "ops": dict(counts["ops"])},
               problems=problems, described=_describe(counts, counts["ops"]))
    return row


def run_check(out=_sys.stdout, json_out=False):
    with _tempfile.TemporaryDirectory(prefix="lotus-check-") as tmp:
        results = [check_family(fam, tmp) for fam in families() if fam.check is not None]
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
