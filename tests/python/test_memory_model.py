# SPDX-License-Identifier: MIT
"""The memory model autotune and whatif share (tools/lotus-tool/model/memory_model.hpp), against
measured process trees with planted memory (memory_scenario.py's "planted" mode): a 64 MiB array
the main process writes before the workers start and every worker reads (shared), 24 MiB each
worker writes (private) and 2 MiB more per batch it collates (growth). autotune measures the
model's inputs from /proc at the boundaries of one epoch at 1 worker; for 1-4 workers the predicted
tree memory (summed Pss) is within 10 % of the tree's summed Pss measured when the last batch is
taken. Memory only: no timing."""
import json
import pathlib

import pytest

from conftest import HERE, run_python

MIB = 1 << 20


def test_the_model_alone():
    from lotus.autotune import predict_memory
    i = {"shared_bytes": 300 * MIB, "worker_private_bytes": 100 * MIB,
         "worker_start_private_bytes": 40 * MIB, "growth_per_batch_bytes": MIB,
         "batches_per_worker": 60, "measured_workers": 1, "batch_bytes": 2 * MIB,
         "batches_held": 0}
    d = predict_memory(i, 3, 2, detail=True)
    # 3 workers each prepare 20 batches: 40 + 20 MiB; 3 x 2 x 2 MiB in flight; shared once.
    assert d["per_worker_bytes"] == 60 * MIB
    assert d["prefetch_bytes"] == 12 * MIB
    assert d["peak_bytes"] == (300 + 180 + 12) * MIB
    assert predict_memory(i, 1, 2) == (300 + 100 + 4) * MIB
    # whatif's side (a trace): more workers than measured keep the measured peak.
    assert predict_memory({**i, "scale_growth_up": False}, 3, 2) == (300 + 300 + 12) * MIB
    # Fewer workers than measured: each prepares more, never below the measured peak.
    two = {**i, "measured_workers": 2, "batches_per_worker": 30}
    assert predict_memory(two, 1, 1, detail=True)["per_worker_bytes"] == 100 * MIB
    assert predict_memory({**two, "growth_per_batch_bytes": 3 * MIB}, 1, 1,
                          detail=True)["per_worker_bytes"] == (40 + 180) * MIB
    # Batches in flight when measured are taken out of the shared part before N x pf are added.
    held = predict_memory({**i, "batches_held": 5}, 1, 2, detail=True)
    assert held["shared_bytes"] == 290 * MIB


@pytest.mark.skipif(not pathlib.Path("/proc/self/smaps_rollup").exists(),
                    reason="no /proc/self/smaps_rollup (Linux < 4.14)")
def test_planted_memory_predicted_within_ten_percent_for_one_to_four_workers():
    r = run_python([str(HERE / "memory_scenario.py"), json.dumps({"planted": [1, 2, 3, 4]})],
                   timeout=600)
    out = json.loads(r.stdout.splitlines()[-1])
    i = out["inputs"]
    # What autotune measured at 1 worker: the shared array once, the worker's 24 MiB and its
    # growth of 2 MiB a batch (24 batches).
    assert i["measured_workers"] == 1 and i["batches_per_worker"] == 24
    assert i["shared_bytes"] >= 64 * MIB
    assert i["worker_private_bytes"] >= (24 + 24 * 2) * MIB
    assert 1.5 * MIB <= i["growth_per_batch_bytes"] <= 2.5 * MIB, i
    assert i["worker_start_private_bytes"] >= 24 * MIB
    lines = []
    for n in ("1", "2", "3", "4"):
        predicted, measured = out["predicted"][n], out["measured"][n]
        err = (predicted - measured) / measured
        lines.append(f"{n} workers: predicted {predicted / MIB:.0f} MiB, measured "
                     f"{measured / MIB:.0f} MiB ({100 * err:+.1f} %)")
    print("\n".join(lines))
    for n in ("1", "2", "3", "4"):
        predicted, measured = out["predicted"][n], out["measured"][n]
        assert abs(predicted - measured) <= 0.10 * measured, lines
    # The shared array is in the tree once: were it copied per worker, three more workers would
    # add 3 x 64 MiB besides their own 3 x 24 MiB (less the growth they split).
    assert out["measured"]["4"] - out["measured"]["1"] < 3 * 64 * MIB + 3 * 24 * MIB
