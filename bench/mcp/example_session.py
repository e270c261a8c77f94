# SPDX-License-Identifier: MIT
"""The calls of tools/docs/MCP.md's worked example, made with the MCP SDK's client over stdio, as
an agent makes them: diagnose the first run, explain its first act finding, predict its advice,
then compare the first run with the second.

    LOTUS_TOOL=build/tools/lotus-tool/lotus-tool PYTHONPATH=build/python \\
        V/bin/python bench/mcp/example_session.py ROOT BASE NEW [--workers 2]

ROOT: the server's --root; BASE, NEW: the two runs' trace directories (relative to ROOT). Prints
each call and the fields of its answer an agent reads (the whole answers with --full).
"""
import argparse
import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters, stdio_client


def show(name, args, result, keys, full):
    print(f"> {name} {json.dumps(args)}")
    if result.is_error:
        print(f"  error: {result.content[0].text}")
        return None
    data = result.structured_content
    print(json.dumps(data if full else keys(data), indent=2, ensure_ascii=False))
    return data


async def main(a):
    env = {"LOTUS_TOOL": os.environ["LOTUS_TOOL"], "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    params = StdioServerParameters(command=sys.executable, args=["-m", "lotus.mcp", "--root", a.root],
                                   env=env)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as s:
            await s.initialize()
            await s.list_tools()
            args = {"trace_dir": a.base}
            d = show("diagnose", args, await s.call_tool("diagnose", args),
                     lambda d: [{k: f[k] for k in ("severity", "kind", "subject", "text", "advice")}
                                for f in d["findings"] if f["severity"] == "act"][:2], a.full)
            first = next(f for f in d["findings"] if f["severity"] == "act" and f["kind"] != "input_bound")
            args = {"finding": first["kind"]}
            show("explain", args, await s.call_tool("explain", args),
                 lambda d: {"kind": d["kind"], "act_when": d["act_when"]}, a.full)

            def pred(d):
                out = {"claim": d["claim"], "measured_epoch_seconds": d["measured"]["epoch_seconds"],
                       "predicted_epoch_seconds": d["predicted"]["epoch_seconds"]}
                if not d["claim"]:
                    out["no_claim_why"] = d["no_claim_why"]
                return out
            for extra in ({"start_method": "fork"}, {"persistent_workers": True}):
                args = {"trace_dir": a.base, "workers": a.workers, **extra}
                show("predict", args, await s.call_tool("predict", args), pred, a.full)
            args = {"base_dir": a.base, "new_dir": a.new}
            show("compare", args, await s.call_tool("compare", args),
                 lambda d: [{k: r[k] for k in ("name", "base", "new", "change", "ci95", "verdict")}
                            for r in d["run"] if r["name"] in ("epoch_seconds", "wait_share")], a.full)
            args = {"trace_dir": a.new}
            show("diagnose", args, await s.call_tool("diagnose", args),
                 lambda d: [{k: f[k] for k in ("severity", "kind", "text")}
                            for f in d["findings"] if f["kind"] in ("input_bound", "startup")], a.full)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root")
    ap.add_argument("base")
    ap.add_argument("new")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--full", action="store_true")
    asyncio.run(main(ap.parse_args()))
