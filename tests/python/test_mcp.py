# SPDX-License-Identifier: MIT
"""python -m lotus.mcp, driven by the MCP SDK's own client over stdio (tools/docs/MCP.md).

The traces are real runs of the test suite (tests/tool/data/diff_runs.tar.xz: DataLoader runs
recorded by lotus.torch), unpacked under a root. Every tool is listed with its schemas and called;
each structured answer is validated against the tool's declared output schema (jsonschema, beside
the SDK client's own check), and diagnose / predict / compare / live equal what lotus-tool itself
prints for the same trace. Hostile calls (paths outside the roots, `..`, symlinks out, numbers out
of range, a directory of 100k files) must come back as MCP errors, never as a read outside the
roots. Skipped where the SDK is not installed (the pip-newest stack and `pip-stack.sh mcp` have it).
"""
import asyncio
import json
import os
import pathlib
import subprocess
import sys
import tarfile

import pytest

mcp = pytest.importorskip("mcp")
jsonschema = pytest.importorskip("jsonschema")
from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
DATA = HERE.parent / "tool" / "data" / "diff_runs.tar.xz"
TOOL = os.environ.get("LOTUS_TOOL")

pytestmark = pytest.mark.skipif(not TOOL or not os.access(TOOL, os.X_OK),
                                 reason="LOTUS_TOOL (the lotus-tool binary) is not set")

TOOLS = {"diagnose", "predict", "compare", "live", "capture", "explain", "preflight"}


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """A root holding two real runs (base, new) and, beside it, an outside directory."""
    top = tmp_path_factory.mktemp("mcp")
    r = top / "root"
    r.mkdir()
    with tarfile.open(DATA) as tar:
        members = [m for m in tar.getmembers()
                   if m.name.startswith(("diff_runs/crop320_1/", "diff_runs/crop320_2/"))
                   and m.isfile()]
        tar.extractall(top / "x", members=members)
    (top / "x" / "diff_runs" / "crop320_1").rename(r / "base")
    (top / "x" / "diff_runs" / "crop320_2").rename(r / "new")
    outside = top / "outside"
    outside.mkdir()
    # A trace outside the roots (a copy of base), and a secret beside it.
    for f in (r / "base").iterdir():
        (outside / f.name).write_bytes(f.read_bytes())
    (top / "secret.txt").write_text("not for the agent\n")
    return r


def lotus_tool(*args):
    p = subprocess.run([TOOL, *args], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return p.stdout


def server_params(*roots, extra=()):
    env = {"LOTUS_TOOL": TOOL, "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
           "PYTHONDONTWRITEBYTECODE": "1"}
    args = ["-m", "lotus.mcp"]
    for r in roots:
        args += ["--root", str(r)]
    return StdioServerParameters(command=sys.executable, args=args + list(extra), env=env)


def session(params, body):
    """Run `body(session)` against a server started with `params`; returns its result."""
    async def main():
        with open(os.devnull, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as s:
                    await s.initialize()
                    return await body(s)
    return asyncio.run(asyncio.wait_for(main(), 600))


def structured(result, schema):
    """The call's structured answer, checked against the declared output schema and against its
    text (the same JSON)."""
    assert not result.is_error, result.content[0].text
    data = result.structured_content
    jsonschema.validate(data, schema)
    assert json.loads(result.content[0].text) == data
    return data


def error_text(result):
    assert result.is_error, result.structured_content
    return result.content[0].text


def test_every_tool_on_real_traces(root):
    base, new = root / "base", root / "new"

    async def body(s):
        tools = {t.name: t for t in (await s.list_tools()).tools}
        assert set(tools) == TOOLS
        for t in tools.values():
            assert t.input_schema["type"] == "object" and t.description
            assert t.output_schema and t.output_schema["type"] == "object", t.name
        w = tools["predict"].input_schema["properties"]["workers"]
        assert (w.get("minimum"), w.get("maximum")) == (1, 4096)
        schema = {n: t.output_schema for n, t in tools.items()}
        out = {}
        out["diagnose"] = structured(await s.call_tool("diagnose", {"trace_dir": str(base)}),
                                     schema["diagnose"])
        # Relative to the root, and as a resource URI: the same directory.
        assert structured(await s.call_tool("diagnose", {"trace_dir": "base"}),
                          schema["diagnose"]) == out["diagnose"]
        assert structured(await s.call_tool("diagnose", {"trace_dir": "lotus://trace/0/base"}),
                          schema["diagnose"]) == out["diagnose"]
        out["predict"] = structured(await s.call_tool(
            "predict", {"trace_dir": str(base), "workers": 4, "persistent_workers": True,
                        "prefetch_factor": 4, "memory_budget": "8G"}), schema["predict"])
        out["predict_spawn"] = structured(await s.call_tool(
            "predict", {"trace_dir": str(base), "workers": 2, "start_method": "spawn"}),
            schema["predict"])
        out["compare"] = structured(await s.call_tool(
            "compare", {"base_dir": str(base), "new_dir": str(new)}), schema["compare"])
        out["live"] = structured(await s.call_tool("live", {"dir": str(base)}), schema["live"])
        out["explain"] = structured(await s.call_tool("explain", {"finding": "startup"}),
                                    schema["explain"])
        out["capture"] = error_text(await s.call_tool("capture", {"dir": str(base)}))
        out["schemas"] = schema
        return out

    out = session(server_params(root), body)
    # The answers are lotus-tool's own.
    assert out["diagnose"] == json.loads(lotus_tool("report", str(base), "--json"))
    assert out["diagnose"]["findings"], "a real run has findings"
    assert out["predict"] == json.loads(lotus_tool(
        "whatif", str(base), "--workers", "4", "--json", "--persistent-workers",
        "--prefetch-factor", "4", "--memory-budget", "8G"))
    assert out["predict"]["model"]["workers"] == 4
    # Several ranks: whatif answers {"ranks": [each rank's, with its label]}; the schema takes
    # both forms, and neither an empty object nor a rank without its prediction.
    schema = out["schemas"]["predict"]
    jsonschema.validate({"ranks": [dict(out["predict"], rank="r0")]}, schema)
    for bad in ({}, {"ranks": [{"rank": "r0"}]}, {"claim": True}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
    assert out["predict_spawn"] == json.loads(lotus_tool(
        "whatif", str(base), "--workers", "2", "--json", "--start-method", "spawn"))
    assert out["compare"] == json.loads(lotus_tool("diff", str(base), str(new), "--json"))
    assert out["compare"]["ops"]
    for o in out["compare"]["ops"]:
        if o["ci95"] is not None:
            assert o["verdict"] in ("slower", "faster", "same"), o
    assert out["live"]["frame"] == lotus_tool("top", str(base), "--once", "--no-color")
    # explain: the row of FINDINGS.md's table.
    doc = (HERE.parent.parent / "tools" / "docs" / "FINDINGS.md").read_text()
    assert out["explain"]["kind"] == "startup"
    assert f"| `startup` | {out['explain']['looks_at']} | {out['explain']['act_when']} |" in doc
    assert "input_bound" in out["explain"]["kinds"]
    assert "A change of setting is advised only" in out["explain"]["rules_every_finding_follows"]
    # capture is off unless the server was started with --allow-capture.
    assert "--allow-capture" in out["capture"]


# A training script: a dataset, a lambda collate_fn (spawn and forkserver cannot pickle it) and a
# planted step that must never run (the pre-flight stops at the first iterator).
SCRIPT = """
import sys
import torch
from torch.utils.data import DataLoader, Dataset
class Items(Dataset):
    def __len__(self): return 16
    def __getitem__(self, i): return torch.tensor([i])
if __name__ == "__main__":
    loader = DataLoader(Items(), batch_size=4, num_workers=2, collate_fn=lambda b: b)
    for batch in loader:
        open(sys.argv[1], "w").write("a step ran")
"""


def test_preflight_runs_a_script_of_the_roots_only_when_allowed(root, tmp_path):
    """The pre-flight runs the user's code: off unless --allow-preflight; then a script inside the
    roots answers what `python -m lotus.torch preflight --json` prints (the lambda named, every
    start method predicted or refused, no training step run); one outside them is refused."""
    pytest.importorskip("torch")
    script = root / "train.py"
    script.write_text(SCRIPT)
    step = root / "step_ran"
    outside = tmp_path / "train.py"
    outside.write_text(SCRIPT)

    async def off(s):
        return error_text(await s.call_tool("preflight", {"script": "train.py"}))

    assert "--allow-preflight" in session(server_params(root), off)

    async def on(s):
        schema = {t.name: t.output_schema for t in (await s.list_tools()).tools}["preflight"]
        got = structured(await s.call_tool("preflight", {
            "script": "train.py", "args": [str(step)], "start_method": "spawn", "workers": 2}),
            schema)
        refused = error_text(await s.call_tool("preflight", {"script": str(outside)}))
        bad = await s.call_tool("preflight", {"script": "train.py", "workers": 100000})
        return got, refused, bad

    got, refused, bad = session(server_params(root, extra=["--allow-preflight"]), on)
    assert got["script"].endswith("train.py")
    assert any("lambda" in json.dumps(p) for p in got["problems"]), got["problems"]
    assert set(got["predictions"]) == {"fork", "spawn", "forkserver"}, got["predictions"]
    assert not step.exists()
    assert "outside the roots" in refused, refused
    assert bad.is_error


def test_capture_allowed_asks_the_job(root):
    # No job runs in this directory: lotus-tool capture answers that no process answered, which
    # the server hands back as an error (it would print the capture's directory otherwise).
    job = root / "job"
    job.mkdir()
    for f in (root / "base").iterdir():
        (job / f.name).write_bytes(f.read_bytes())

    async def body(s):
        return error_text(await s.call_tool("capture", {"dir": "job", "timeout_s": 1}))

    text = session(server_params(root, extra=["--allow-capture"]), body)
    assert "lotus-tool capture failed (exit 3)" in text, text


# A running job without torch: a worker thread preparing batches (two ops each) for a loop that
# records its waits with lotus.BatchTracker, traced into argv[1] until the file argv[2] exists.
JOB = """
import os, queue, sys, threading, time
import lotus
out, stop = sys.argv[1], sys.argv[2]
lotus.configure(log_file=os.path.join(out, "lotustrace_log"))
q = queue.Queue(maxsize=4)
def worker():
    i = 0
    while True:
        with lotus.scope(f"BatchPreprocessed_{i}"):
            with lotus.scope("Decode"):
                time.sleep(0.004)
            with lotus.scope("Resize"):
                time.sleep(0.002)
        q.put(i)
        i += 1
threading.Thread(target=worker, daemon=True).start()
bt = lotus.BatchTracker()
i = 0
while not os.path.exists(stop):
    bt.queued(i)
    bt.wait_begin()
    idx = q.get()
    bt.arrived(idx)
    bt.consumed(idx)
    time.sleep(0.002)
    i += 1
lotus.shutdown()
"""


def test_live_and_capture_of_a_running_job(root, tmp_path):
    job = root / "running"
    job.mkdir()
    stop = tmp_path / "stop"
    script = tmp_path / "job.py"
    script.write_text(JOB)
    env = {**os.environ, "LOTUS_FLIGHT": "3"}
    proc = subprocess.Popen([sys.executable, str(script), str(job), str(stop)], env=env)
    try:
        # Until the job's live file shows consumed batches (no time asserted: polled).
        for _ in range(600):
            frame = lotus_tool("top", str(job), "--once", "--no-color")
            if "1 live" in frame and "Decode" in frame:
                break
            assert proc.poll() is None, "the job ended"
            subprocess.run(["sleep", "0.1"])
        else:
            raise AssertionError(frame)

        async def body(s):
            schema = {t.name: t.output_schema for t in (await s.list_tools()).tools}
            live = structured(await s.call_tool("live", {"dir": "running"}), schema["live"])
            cap = structured(await s.call_tool("capture", {"dir": "running", "reason": "agent",
                                                           "timeout_s": 30}), schema["capture"])
            diag = structured(await s.call_tool("diagnose", {"trace_dir": cap["capture_dir"]}),
                              schema["diagnose"])
            return live, cap, diag

        live, cap, diag = session(server_params(root, extra=["--allow-capture"]), body)
    finally:
        stop.touch()
        proc.wait(timeout=120)
    assert live["dir"] == str(job.resolve())
    assert live["frame"].startswith(f"lotus top  {job.resolve()}  1 processes (1 live")
    assert "Decode" in live["frame"] and "Resize" in live["frame"]
    captured = pathlib.Path(cap["capture_dir"])
    assert captured.parent == job.resolve() and captured.name.startswith("capture-")
    assert any(p.name.startswith("lotustrace_log_worker_pid_") for p in captured.iterdir())
    # The reason the agent gave is in the capture's sidecar; its story is lotus-tool's.
    side = next(p for p in captured.iterdir() if ".lotus-meta_" in p.name).read_text()
    assert any(ln.startswith("capture ") and ln.endswith(" agent") for ln in side.splitlines()), side
    assert diag == json.loads(lotus_tool("report", str(captured), "--json"))
    assert diag["findings"][0]["kind"] == "capture"


def test_resources_and_prompt(root):
    async def body(s):
        listed = [str(r.uri) for r in (await s.list_resources()).resources]
        templates = [t.uri_template for t in (await s.list_resource_templates()).resource_templates]
        traces = json.loads((await s.read_resource("lotus://traces")).contents[0].text)
        d = json.loads((await s.read_resource("lotus://trace/0/base")).contents[0].text)
        f = sorted(e["name"] for e in d["entries"] if "_main_pid_" in e["name"])[0]
        text = (await s.read_resource(f"lotus://trace/0/base/{f}")).contents[0].text
        rest = (await s.read_resource(f"lotus://trace/0/base/{f}?offset=100")).contents[0].text
        prompts = [p.name for p in (await s.list_prompts()).prompts]
        prompt = await s.get_prompt("slow_input_pipeline", {"trace_dir": "base"})
        return listed, templates, traces, d, f, text, rest, prompts, prompt

    listed, templates, traces, d, f, text, rest, prompts, prompt = session(server_params(root), body)
    assert "lotus://traces" in listed
    assert {"lotus://trace/0/base", "lotus://trace/0/new"} <= set(listed)  # each trace directory
    assert "lotus://trace/{root}/{+path}{?offset}" in templates
    assert {"lotus://trace/0/base", "lotus://trace/0/new"} <= {t["uri"] for t in traces["traces"]}
    assert not traces["truncated"]
    assert {e["name"] for e in d["entries"]} == {p.name for p in (root / "base").iterdir()}
    assert text == (root / "base" / f).read_text()
    assert rest == (root / "base" / f).read_text()[100:]
    assert prompts == ["slow_input_pipeline"]
    words = prompt.messages[0].content.text
    for step in ("diagnose", "predict", "compare", "no_claim_why"):
        assert step in words


def test_hostile_calls_are_refused(root, tmp_path):
    top = root.parent
    outside = top / "outside"
    # Symlinks inside the root that lead out: a directory, and a trace file in a directory.
    (root / "link_out").symlink_to(outside, target_is_directory=True)
    sneaky = root / "sneaky"
    sneaky.mkdir()
    for f in (root / "new").iterdir():
        (sneaky / f.name).write_bytes(f.read_bytes())
    main = next(p for p in sneaky.iterdir() if "_main_pid_" in p.name)
    main.unlink()
    main.symlink_to(next(p for p in outside.iterdir() if "_main_pid_" in p.name))
    # 100k files in one directory (empty ones: the count, not lotus-tool, must stop it).
    big = root / "big"
    big.mkdir()
    for i in range(100_000):
        os.close(os.open(big / f"lotustrace_log_worker_pid_{i}", os.O_CREAT | os.O_WRONLY, 0o644))

    calls = [
        ("diagnose", {"trace_dir": str(outside)}, "outside the roots"),
        ("diagnose", {"trace_dir": "/etc"}, "outside the roots"),
        ("diagnose", {"trace_dir": str(root / ".." / "outside")}, "'..' is refused"),
        ("diagnose", {"trace_dir": "../outside"}, "'..' is refused"),
        ("diagnose", {"trace_dir": "lotus://trace/0/../outside"}, "'..' is refused"),
        ("diagnose", {"trace_dir": "lotus://trace/7/base"}, "no root"),
        ("diagnose", {"trace_dir": "link_out"}, "outside the roots"),
        ("diagnose", {"trace_dir": str(root / "link_out")}, "outside the roots"),
        ("diagnose", {"trace_dir": "sneaky"}, "symlink to a place outside the roots"),
        ("diagnose", {"trace_dir": "big"}, "more than 20000 entries"),
        ("diagnose", {"trace_dir": "missing"}, "no such directory"),
        ("diagnose", {"trace_dir": "base\x00/etc"}, "NUL"),
        ("diagnose", {"trace_dir": "a" * 5000}, "4096"),
        ("diagnose", {"trace_dir": 17}, "trace_dir"),
        ("compare", {"base_dir": "base", "new_dir": str(outside)}, "outside the roots"),
        ("live", {"dir": "/"}, "outside the roots"),
        ("predict", {"trace_dir": "base", "workers": 10 ** 12}, "workers"),
        ("predict", {"trace_dir": "base", "workers": 0}, "workers"),
        ("predict", {"trace_dir": "base", "workers": -3}, "workers"),
        ("predict", {"trace_dir": "base", "workers": 4, "prefetch_factor": 2 ** 40}, "prefetch_factor"),
        ("predict", {"trace_dir": "base", "workers": 4, "memory_budget": "9" * 400}, "memory_budget"),
        ("predict", {"trace_dir": "base", "workers": 4, "memory_budget": "8G; rm -rf /"}, "memory_budget"),
        ("predict", {"trace_dir": "base", "workers": 4, "start_method": "thread"}, "start_method"),
        ("predict", {"trace_dir": "big", "workers": 4}, "more than 20000 entries"),
        ("capture", {"dir": str(outside)}, "outside the roots"),
        ("explain", {"finding": "x" * 100}, "finding"),
        ("explain", {"finding": "no_such_kind"}, "no finding kind"),
    ]

    async def body(s):
        out = []
        for name, args, _ in calls:
            out.append(error_text(await s.call_tool(name, args)))
        # Resources: the SDK's checks and the server's fence both refuse these.
        refused = []
        for uri in ("lotus://trace/0/../secret.txt", "lotus://trace/0/link_out",
                    "lotus://trace/0/sneaky/" + main.name, "lotus://trace/3/base",
                    "lotus://trace/0/%2e%2e/secret.txt"):
            try:
                r = await s.read_resource(uri)
                refused.append((uri, r.contents[0].text if hasattr(r.contents[0], "text") else "blob"))
            except MCPError as e:
                refused.append((uri, None, str(e)))
        # The server is still answering after all of it.
        alive = structured(await s.call_tool("explain", {"finding": "top_op"}),
                           {"type": "object"})
        return out, refused, alive

    out, refused, alive = session(server_params(root, extra=["--allow-capture"]), body)
    for (name, args, want), text in zip(calls, out):
        assert want in text, (name, args, text)
        assert "not for the agent" not in text
    for entry in refused:
        assert entry[1] is None, f"{entry[0]} was read: {entry[1]!r}"
    assert alive["kind"] == "top_op"


def test_a_runaway_lotus_tool_is_stopped(root, tmp_path):
    # A stand-in for lotus-tool that never stops printing (report) or never ends (whatif): the
    # server stops it at its output cap or its --timeout, with its children, and answers on.
    fake = tmp_path / "fake-tool"
    fake.write_text(f"""#!/bin/sh
echo $$ >> {tmp_path}/pids
case "$1" in
  report) exec yes '{{"findings": []}}' ;;
  whatif) sleep 600 & echo $! >> {tmp_path}/pids; wait ;;
esac
""")
    fake.chmod(0o755)
    params = server_params(root, extra=["--tool", str(fake), "--timeout", "3"])

    async def body(s):
        big = error_text(await s.call_tool("diagnose", {"trace_dir": "base"}))
        slow = error_text(await s.call_tool("predict", {"trace_dir": "base", "workers": 2}))
        alive = structured(await s.call_tool("explain", {"finding": "drift"}), {"type": "object"})
        return big, slow, alive

    big, slow, alive = session(params, body)
    assert "printed more than" in big, big
    assert "took longer than 3 s: stopped" in slow, slow
    assert alive["kind"] == "drift"
    for pid in map(int, (tmp_path / "pids").read_text().split()):
        for _ in range(100):  # reaped by now, or about to be: no process of the group is left
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            subprocess.run(["sleep", "0.1"])
        else:
            raise AssertionError(f"process {pid} of the stopped lotus-tool still runs")


def test_roots_are_checked_at_start(tmp_path):
    p = subprocess.run([sys.executable, "-m", "lotus.mcp", "--root", str(tmp_path / "missing")],
                       capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
                       env={**os.environ, "LOTUS_TOOL": TOOL})
    assert p.returncode != 0 and "--root" in p.stderr
