# SPDX-License-Identifier: MIT
"""python -m lotus.mcp: how long the server takes to start and to answer diagnose (bench/README.md,
"MCP server"). Not a test: figures for a table.

    LOTUS_TOOL=build/tools/lotus-tool/lotus-tool PYTHONPATH=build/python \\
        V/bin/python bench/mcp/bench_mcp.py --trace demo_out/trace [--repeat 11]

V: a venv with the MCP SDK (`bash tools/scripts/pip-stack.sh mcp V`). Runs bench/quiet.sh first.
Start: from spawning `python -m lotus.mcp` (the SDK's stdio client) to the answer of initialize,
and to that of tools/list; a fresh process each repetition; beside it, a bare interpreter and one
importing the SDK's MCPServer (most of the start). diagnose: one session, the call's round trip,
beside `lotus-tool report DIR --json` run directly (the server's own share is the difference).
Medians with min..max; beside the start's wall time, the server process's CPU time (user +
system) from start to exit, which other work on a busy machine moves less than the wall time.
"""
import argparse
import asyncio
import json
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import time

from mcp import ClientSession, StdioServerParameters, stdio_client

HERE = pathlib.Path(__file__).resolve().parent


def child_cpu():
    """CPU seconds (user + system) of this process's reaped children and theirs: the server, and
    the lotus-tool runs it reaped."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def params(root):
    env = {"LOTUS_TOOL": os.environ["LOTUS_TOOL"], "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    return StdioServerParameters(command=sys.executable, args=["-m", "lotus.mcp", "--root", str(root)],
                                 env=env)


async def one_start(root):
    t0 = time.perf_counter()
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params(root), errlog=errlog) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                t1 = time.perf_counter()
                await s.list_tools()
                t2 = time.perf_counter()
    return t1 - t0, t2 - t0


async def diagnose_times(root, trace, n):
    out = []
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params(root), errlog=errlog) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                await s.list_tools()
                for _ in range(n):
                    t0 = time.perf_counter()
                    r = await s.call_tool("diagnose", {"trace_dir": str(trace)})
                    out.append(time.perf_counter() - t0)
                    assert not r.is_error, r.content[0].text
                    findings = r.structured_content["findings"]
    return out, findings


def direct_times(trace, n):
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run([os.environ["LOTUS_TOOL"], "report", str(trace), "--json"], check=True,
                       stdout=subprocess.DEVNULL)
        out.append(time.perf_counter() - t0)
    return out


IMPORTS = (("python -c pass, start to exit", "pass"),
           ("python importing the SDK's MCPServer, start to exit", "import mcp.server.mcpserver"))


def one_import(code):
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - t0


def fmt(xs):
    return f"{statistics.median(xs) * 1e3:.0f} ms ({min(xs) * 1e3:.0f}..{max(xs) * 1e3:.0f})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", required=True, help="a trace directory (the demo's: demo_out/trace)")
    ap.add_argument("--repeat", type=int, default=11)
    a = ap.parse_args()
    subprocess.run(["sh", str(HERE.parent / "quiet.sh"), "--check"], check=True)
    trace = pathlib.Path(a.trace).resolve()
    root = trace.parent
    starts, start_cpu = [], []
    imports = {name: [] for name, _ in IMPORTS}
    for _ in range(a.repeat):  # interleaved: the same load for the three
        c0 = child_cpu()
        starts.append(asyncio.run(one_start(root)))
        start_cpu.append(child_cpu() - c0)
        for name, code in IMPORTS:
            imports[name].append(one_import(code))
    diag, findings = asyncio.run(diagnose_times(root, trace, a.repeat))
    direct = direct_times(trace, a.repeat)
    records = sum(sum(1 for _ in open(p)) for p in trace.iterdir() if not p.name.startswith("."))
    print(f"trace {trace}: {records} records, {len(findings)} findings, first "
          f"{findings[0]['severity']} {findings[0]['kind']}" if findings else "")
    print(f"median of {a.repeat} (min..max); python {sys.version.split()[0]}")
    print("| step | wall time |")
    print("| --- | --- |")
    print(f"| server start to initialize answered | {fmt([s[0] for s in starts])} |")
    print(f"| server start to tools/list answered | {fmt([s[1] for s in starts])} |")
    print(f"| the server process's CPU time, start to exit | {fmt(start_cpu)} |")
    for name, ts in imports.items():
        print(f"| {name} | {fmt(ts)} |")
    print(f"| diagnose round trip (one session) | {fmt(diag)} |")
    print(f"| `lotus-tool report --json` alone | {fmt(direct)} |")
    subprocess.run(["sh", str(HERE.parent / "quiet.sh"), "--end"], check=False)
    json.dump({"start_s": starts, "start_cpu_s": start_cpu, "diagnose_s": diag, "report_s": direct,
               "imports_s": imports},
              sys.stderr)
    print(file=sys.stderr)


if __name__ == "__main__":
    main()
