# SPDX-License-Identifier: MIT
"""One reader of the format: lotus.frame (lotus-tool's format library, compiled into the module)
and lotus-tool give equal counts and epochs on every kind of trace the suite makes cheaply: fork
and spawn DataLoaders (two epochs, an out-of-order arrival), persistent workers over three
epochs, no workers (no main file: no epochs), a batch tracker that queues once and consumes
twice, the C++ example pipeline, and a generated three-epoch trace with malformed and truncated
lines. The tool's counts are `stats --json`'s, its epochs `summarize`'s (the cut of
format/epochs.hpp that `diff` compares)."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

from conftest import run_python

HERE = pathlib.Path(__file__).resolve().parent
GEN_TRACE = HERE.parent / "tool" / "gen" / "gen_trace.py"
TOOL = os.environ.get("LOTUS_TOOL")
PIPELINE = os.environ.get("LOTUS_EXAMPLE_PIPELINE")  # examples/pipeline, where ctest built it

pytestmark = pytest.mark.skipif(not TOOL, reason="LOTUS_TOOL not set")


def tool_json(*args):
    r = subprocess.run([TOOL, *map(str, args)], capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def loader_run(tmp_path, **cfg):
    """A DataLoader run traced by lotus.torch (scenario.py, as test_torch.py runs it)."""
    pytest.importorskip("torch")
    trace = tmp_path / "trace"
    flags = tmp_path / "flags"
    flags.mkdir()
    cfg.update(trace=str(trace / "lotustrace_log"), flags=str(flags), data=str(tmp_path / "data"))
    run_python([str(HERE / "scenario.py"), json.dumps(cfg)], timeout=300)
    return trace


def tracker_run(tmp_path):
    """lotus.BatchTracker (C++ lotus::batch_tracker): indices 0..3 queued once, consumed twice
    (reset between): one epoch by lotus-tool's definition, two by the frame reader's old one."""
    out = tmp_path / "trace"
    run_python(f"""
import lotus
lotus.configure(log_file={str(out / 'log')!r})
b = lotus.BatchTracker()
for i in range(4):
    b.queued(i)
for epoch in range(2):
    for i in range(4):
        with lotus.scope("Decode"):
            pass
        b.wait_begin()
        b.arrived(i)
        b.consumed(i)
    b.reset()
lotus.flush()
""")
    return out


def pipeline_run(tmp_path):
    if not PIPELINE:
        pytest.skip("LOTUS_EXAMPLE_PIPELINE not set (examples/pipeline is not built)")
    out = tmp_path / "trace"
    subprocess.run([PIPELINE, "--batches", "12", "--workers", "3", "--log",
                    str(out / "lotustrace_log")], check=True, capture_output=True, timeout=120)
    return out


def generated_run(tmp_path):
    """gen_trace.py's three epochs (new worker pids each), then lines lotus-tool skips: a bad
    number, a batch record without its index, an empty line and a truncated last line."""
    out = tmp_path / "trace"
    subprocess.run([sys.executable, str(GEN_TRACE), str(out), "--records", "1500", "--workers",
                    "3", "--epochs", "3"], check=True, capture_output=True)
    main = sorted(p for p in out.iterdir() if "_main_pid_" in p.name)[0]
    with open(main, "a") as f:
        f.write("SDecode,12x,5\nSBatchWait_,1,2\n\nSBatchConsumed_99,12")
    return out


RUNS = {
    "fork_swap01": lambda p: loader_run(p, context="fork", workers=2, epochs=2, batches=6,
                                        order="swap01"),
    "spawn": lambda p: loader_run(p, context="spawn", workers=2, epochs=2, batches=4),
    "persistent_3_epochs": lambda p: loader_run(p, context="fork", workers=2, epochs=3,
                                                batches=4, persistent=True),
    "no_workers": lambda p: loader_run(p, workers=0, epochs=2, batches=3),
    "tracker_queued_once": tracker_run,
    "cpp_pipeline": pipeline_run,
    "generated_bad_lines": generated_run,
}


def frame_epochs(df):
    """Per main file and epoch, (batches, in-order waits, out-of-order markers), sorted."""
    import lotus

    main = df[(df.role == "main") & df.epoch.notna()]
    out = []
    for _, g in main.groupby(["host", "pid", "tid", "epoch"], dropna=False, sort=True):
        waits = g[g.op == "SBatchWait"]
        out.append((int((g.op == "SBatchConsumed").sum()),
                    int((waits.dur_ns != lotus._lotus.MARKER_NS).sum()),
                    int((waits.dur_ns == lotus._lotus.MARKER_NS).sum())))
    return sorted(out)


@pytest.mark.parametrize("run", list(RUNS))
def test_frame_and_tool_agree(run, tmp_path):
    pytest.importorskip("pandas")
    import lotus.frame

    d = RUNS[run](tmp_path)
    df = lotus.frame.read(d)
    stats = tool_json("stats", d, "--json", "--skip-invalid")
    summary = tool_json("summarize", d, "-o", "-", "--skip-invalid")
    # Counts: every op, every batch kind, the lines skipped.
    ops = df[df.batch.isna()].groupby("op").size().to_dict()
    assert ops == {o["name"]: o["count"] for o in stats["ops"]}
    kinds = df[df.batch.notna()].op.value_counts().to_dict()
    assert kinds.get("SBatchConsumed", 0) == stats["batches_consumed"]
    assert kinds.get("SBatchQueued", 0) == stats["batches_queued"]
    assert kinds.get("SBatchWait", 0) == stats["wait"]["count"]
    assert kinds.get("SBatchPreprocessed", 0) == stats["batch_preprocessing"]["count"]
    assert df.attrs["skipped_lines"] == stats["trace"]["skipped_lines"]
    # Epochs: the tool's cut of each main file (summaries keep it), the frame's epoch column.
    (source,) = summary["sources"]
    tool = sorted((b, w, o) for b, w, _, o, _ in source["main_epochs"]["rows"])
    assert frame_epochs(df) == tool
    # A worker's batch record takes its host and rank's epoch: none beyond the main files'.
    mains = df[(df.role == "main") & df.epoch.notna()]
    workers = df[(df.op == "SBatchPreprocessed") & df.epoch.notna()]
    assert set(workers.epoch) <= set(mains.epoch)
    if run == "tracker_queued_once":
        assert tool == [(8, 8, 0)]  # queued once: one epoch of both passes
    elif run == "no_workers":
        assert tool == [] and df.epoch.isna().all()
    elif run in ("fork_swap01", "spawn", "persistent_3_epochs", "generated_bad_lines"):
        epochs = 3 if run in ("persistent_3_epochs", "generated_bad_lines") else 2
        assert len(tool) == epochs
        assert workers.epoch.nunique() == epochs
        assert len(workers) == kinds["SBatchPreprocessed"]  # every one in an epoch
    if run == "generated_bad_lines":
        assert df.attrs["skipped_lines"] == 4
