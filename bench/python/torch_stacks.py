# SPDX-License-Identifier: MIT
"""What lotus.torch records on each torch stack: one row per Python interpreter, as a Markdown table.

    PYTHONPATH=build/python /usr/bin/python3 bench/python/torch_stacks.py \
        /usr/bin/python3 build-ci/venv-middle/bin/python build-ci/venv-newest/bin/python

Each interpreter runs ``python -m lotus.torch --check --json`` (a tiny traced DataLoader, a
StatefulDataLoader resumed mid-epoch and a torchdata.nodes pipeline, each checked against the record
contract) with this PYTHONPATH's lotus package; tools/scripts/pip-stack.sh makes the venvs.
"""
import json
import os
import subprocess
import sys


def cell(family):
    if family["status"] == "not installed":
        return "— (not installed)"
    if family["status"] != "ok":
        return f"**{family['status']}**: " + "; ".join(family["problems"][:2])
    rec = family["records"]
    main, worker = rec.get("main", {}), rec.get("worker", {})
    parts = []
    if main:
        parts.append("main " + "/".join(str(main.get(k, 0)) for k in ("Queued", "Wait",
                                                                      "Consumed")))
    if worker:
        parts.append(f"workers {worker.get('Preprocessed', 0)}")
    if rec.get("ops"):
        parts.append("ops " + ", ".join(f"{k} {v}" for k, v in sorted(rec["ops"].items())))
    return "ok: " + "; ".join(parts)


def main(pythons):
    if not pythons:
        print(__doc__, file=sys.stderr)
        return 2
    print("| Python, torch, torchvision, torchdata | DataLoader | StatefulDataLoader | "
          "torchdata.nodes |")
    print("| --- | --- | --- | --- |")
    bad = 0
    for py in pythons:
        r = subprocess.run([py, "-m", "lotus.torch", "--check", "--json"], capture_output=True,
                           text=True, timeout=1800, env=dict(os.environ))
        try:
            out = json.loads(r.stdout)
        except ValueError:
            print(f"| {py} | failed: {(r.stderr.strip().splitlines() or ['no output'])[-1]} | | |")
            bad = 1
            continue
        fam = {f["family"]: f for f in out["families"]}
        print("| " + ", ".join(out["versions"]) + " | " + " | ".join(
            cell(fam[k]) for k in ("DataLoader", "StatefulDataLoader", "torchdata.nodes")) + " |")
        bad |= r.returncode != 0
    return bad


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
