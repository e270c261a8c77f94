# SPDX-License-Identifier: MIT
"""The MCP server of ``python -m lotus.mcp`` (tools/docs/MCP.md), on the MCP Python SDK's MCPServer.

Each tool runs lotus-tool (the binary installed with the package, or $LOTUS_TOOL, or --tool) with
its machine-readable output and hands back what it printed, parsed: the findings, predictions and
verdicts are lotus-tool's, never recomputed here. What this module adds is the fence around it:
paths resolved and kept inside the roots given at start, directories counted (bounded) before
lotus-tool reads them, every number bounded, lotus-tool's time and output capped, and every
answer's size bounded.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import selectors
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Annotated, Any, Dict, List, Literal, Optional

try:
    import anyio
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
    from mcp.types import CallToolResult, Resource, TextContent, ToolAnnotations
except ImportError as e:  # pragma: no cover - the message is the point
    raise ImportError(
        f"lotus.mcp needs the MCP Python SDK ({e}): pip install 'lotus-trace[mcp]' "
        "(or pip install mcp)") from e
from pydantic import BaseModel, ConfigDict, Field, model_validator

# Bounds: the defaults of the command-line options below.
MAX_FILES = 20000          # entries in a trace directory (its subdirectories included)
TIMEOUT_S = 120.0          # one lotus-tool run
MAX_OUTPUT = 8 << 20       # bytes of lotus-tool's stdout read
MAX_RESULT = 1 << 20       # bytes of one answer (its JSON)
MAX_READ = 256 << 10       # bytes of one resource read
MAX_PATH = 4096            # characters of a path argument
MAX_TRACES = 200           # trace directories listed by lotus://traces
MAX_LISTED = 1000          # entries listed by a directory resource
MAX_DEPTH = 6              # levels below a root searched for trace directories
CONCURRENT = 2             # lotus-tool runs at once

TRACE_NAME = re.compile(r"(_main_pid_|_worker_pid_|^\.[^/]*\.lotus-meta_|^\.[^/]*\.lotus-live_)")
FINDINGS_DOC = "FINDINGS.md"


class Refused(ToolError):
    """An argument refused before anything is read."""


# ---- The roots and the paths in them ------------------------------------------------------------

class Fence:
    """The roots given at start, resolved, and the checks every path argument passes."""

    def __init__(self, roots: List[str], max_files: int):
        self.roots: List[Path] = []
        self.spelled: List[Path] = []  # the roots as given (absolute, unresolved): /tmp/x for /private/tmp/x
        for r in roots:
            p = Path(r).expanduser()
            self.spelled.append(Path(os.path.abspath(p)))
            try:
                p = p.resolve(strict=True)
            except (OSError, RuntimeError) as e:
                raise SystemExit(f"lotus.mcp: --root {r}: {e}")
            if not p.is_dir():
                raise SystemExit(f"lotus.mcp: --root {r}: not a directory")
            if p not in self.roots:
                self.roots.append(p)
        self.max_files = max_files

    def inside(self, p: Path) -> bool:
        return any(p == r or r in p.parents for r in self.roots)

    def resolve(self, arg: Any, what: str, want_dir: bool = True) -> Path:
        """The real path of `arg` (absolute, relative to a root, or lotus://trace/<root>/<path>),
        refused unless it and its resolution lie inside a root."""
        if not isinstance(arg, str) or not arg.strip():
            raise Refused(f"{what}: expected a path inside the roots, got {arg!r}")
        if len(arg) > MAX_PATH:
            raise Refused(f"{what}: a path of at most {MAX_PATH} characters, got {len(arg)}")
        if "\x00" in arg:
            raise Refused(f"{what}: a path may not contain NUL")
        candidates: List[Path]
        if arg.startswith("lotus://trace/"):
            rest = arg[len("lotus://trace/"):]
            index, _, rel = rest.partition("/")
            if not index.isdigit() or int(index) >= len(self.roots):
                raise Refused(f"{what}: {arg}: no root {index!r} (roots 0..{len(self.roots) - 1})")
            parts = [x for x in rel.split("/") if x not in ("", ".")]
            if ".." in parts:
                raise Refused(f"{what}: '..' is refused: {arg}")
            candidates = [self.roots[int(index)].joinpath(*parts)]
        else:
            parts = arg.split("/")
            if ".." in parts:
                raise Refused(f"{what}: '..' is refused: {arg}")
            p = Path(os.path.expanduser(arg)) if arg.startswith("~") else Path(arg)
            if p.is_absolute():
                # Refused on its name first: nothing outside the roots is even looked at.
                lexical = Path(os.path.normpath(p))
                if not any(lexical == r or r in lexical.parents for r in self.roots + self.spelled):
                    raise Refused(f"{what}: {arg} is outside the roots ({self.roots_text()})")
                candidates = [p]
            else:
                candidates = [r / p for r in self.roots]
        found = None
        for c in candidates:
            if os.path.lexists(c):
                found = c
                break
        if found is None:
            raise Refused(f"{what}: {arg}: no such {'directory' if want_dir else 'file'} in the roots "
                          f"({self.roots_text()})")
        try:
            real = found.resolve(strict=True)
        except (OSError, RuntimeError) as e:
            raise Refused(f"{what}: {arg}: {e.strerror if isinstance(e, OSError) else e}")
        if not self.inside(real):
            raise Refused(f"{what}: {arg} resolves to a place outside the roots (a symlink out of them)")
        if want_dir and not real.is_dir():
            raise Refused(f"{what}: {arg}: not a directory")
        return real

    def roots_text(self) -> str:
        return ", ".join(str(r) for r in self.roots)

    def check_tree(self, d: Path, what: str) -> int:
        """Count the entries of directory `d` and its subdirectories, stopping at max_files (an
        error: lotus-tool is not started on it), and refuse a symlink whose target leaves the
        roots (lotus-tool would follow it). Returns the count."""
        count = 0
        stack = [(d, 0)]
        while stack:
            cur, depth = stack.pop()
            try:
                it = os.scandir(cur)
            except OSError as e:
                raise Refused(f"{what}: {cur}: {e.strerror}")
            with it:
                for e in it:
                    count += 1
                    if count > self.max_files:
                        raise Refused(
                            f"{what}: {d} holds more than {self.max_files} entries: not read (a "
                            f"trace directory holds a few files per process; start the server with "
                            f"a larger --max-files for a job this large)")
                    if e.is_symlink():
                        try:
                            target = Path(os.path.realpath(e.path))
                        except OSError:
                            continue
                        if not self.inside(target):
                            raise Refused(f"{what}: {e.path} is a symlink to a place outside the roots")
                        continue  # not followed into: its target is inside a root
                    if depth < 2 and e.is_dir(follow_symlinks=False):
                        stack.append((Path(e.path), depth + 1))
        return count


# ---- lotus-tool -----------------------------------------------------------------------------------

def find_tool(explicit: Optional[str]) -> str:
    """lotus-tool: --tool, else $LOTUS_TOOL, else the binary installed with the package, else the
    first on PATH."""
    for cand in (explicit, os.environ.get("LOTUS_TOOL")):
        if cand:
            if not os.access(cand, os.X_OK):
                raise SystemExit(f"lotus.mcp: lotus-tool {cand} is not an executable")
            return os.path.abspath(cand)
    import lotus
    path = lotus.tool_path()
    if path is None:
        raise SystemExit("lotus.mcp: lotus-tool not found: this lotus package was installed without "
                         "it (reinstall with the tool), or give --tool PATH or LOTUS_TOOL")
    return path


class Runner:
    """Runs lotus-tool with a time limit and a cap on what it prints; a few runs at once."""

    def __init__(self, tool: str, timeout_s: float, max_output: int):
        self.tool = tool
        self.timeout_s = timeout_s
        self.max_output = max_output
        self.slots = threading.BoundedSemaphore(CONCURRENT)

    def run(self, args: List[str], timeout_s: Optional[float] = None,
            command: Optional[List[str]] = None, cwd: Optional[str] = None):
        """(exit status, stdout bytes, stderr text); ToolError when it runs too long or prints
        more than the cap. `command`: what runs instead of lotus-tool (args follow it)."""
        limit = self.timeout_s if timeout_s is None else timeout_s
        if not self.slots.acquire(timeout=limit):
            raise ToolError(f"lotus-tool is busy with {CONCURRENT} other questions; ask again")
        try:
            return self._run(args, limit, command or [self.tool], cwd)
        finally:
            self.slots.release()

    def _run(self, args: List[str], limit: float, command: List[str], cwd: Optional[str]):
        env = dict(os.environ)
        env.pop("LOTUS_LOG_FILE", None)  # lotus-tool is never traced itself
        what = f"lotus-tool {args[0]}" if command == [self.tool] else "the pre-flight"
        proc = subprocess.Popen(command + args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env, start_new_session=True, cwd=cwd)
        out, err = bytearray(), bytearray()
        over = None
        deadline = time.monotonic() + limit
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ, out)
        sel.register(proc.stderr, selectors.EVENT_READ, err)
        try:
            while sel.get_map():
                left = deadline - time.monotonic()
                if left <= 0:
                    over = f"{what} took longer than {limit:g} s: stopped"
                    break
                for key, _ in sel.select(min(left, 1.0)):
                    chunk = os.read(key.fileobj.fileno(), 65536)
                    if not chunk:
                        sel.unregister(key.fileobj)
                        continue
                    buf = key.data
                    cap = self.max_output if buf is out else 65536
                    if len(buf) + len(chunk) > cap:
                        if buf is out:
                            over = (f"{what} printed more than {cap} bytes: stopped "
                                    f"(ask about a smaller part: an epoch, a window, fewer ops)")
                            break
                        chunk = chunk[:max(0, cap - len(buf))]
                    buf += chunk
                if over:
                    break
        finally:
            sel.close()
            if over:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except OSError:
                    pass
            proc.stdout.close()
            proc.stderr.close()
            try:
                rc = proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                rc = proc.wait()
        if over:
            raise ToolError(over)
        return rc, bytes(out), err.decode("utf-8", "replace")

    def json(self, args: List[str], timeout_s: Optional[float] = None) -> Any:
        rc, out, err = self.run(args, timeout_s)
        if rc != 0:
            raise ToolError(f"lotus-tool {args[0]} failed (exit {rc}): {tail(err)}")
        try:
            return json.loads(out)
        except ValueError as e:
            raise ToolError(f"lotus-tool {args[0]} printed no JSON ({e}): {tail(err)}")


def tail(text: str, n: int = 2000) -> str:
    text = text.strip()
    return text if len(text) <= n else "..." + text[-n:]


def answer(data: Dict[str, Any], max_result: int) -> CallToolResult:
    """A structured answer, with its JSON as the text for clients that read only text; refused
    beyond max_result bytes."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    if len(text.encode()) > max_result:
        raise ToolError(f"the answer is {len(text.encode())} bytes, over the server's "
                        f"{max_result} (--max-result-bytes): ask about a smaller part (an epoch, "
                        f"a window, fewer ops)")
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


# ---- Output schemas: the fields lotus-tool's JSON always holds (more are allowed) ---------------

class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class Finding(_Open):
    severity: Literal["act", "note", "fine"] = Field(description="act: worth changing something; "
                                                     "note: worth knowing; fine")
    kind: str = Field(description="the rule (explain(kind) gives it)")
    subject: Dict[str, Any] = Field(description="what it is about: op, rank, worker, cause, ...")
    text: str = Field(description="the finding's sentence")
    evidence: str = Field(description="the numbers behind it")
    advice: str = Field(description="what to change, or why nothing")
    numbers: Dict[str, Any] = Field(description="the figures: ms, shares in [0, 1], counts")


class Diagnosis(_Open):
    """lotus-tool report --json: the findings in the report's order (acts first)."""
    findings: List[Finding]


class RankPrediction(_Open):
    """One rank's prediction (lotus-tool whatif --json of a run of one rank)."""
    claim: bool = Field(description="false: the model withholds this prediction (no_claim_why says why)")
    no_claim_why: Optional[str] = Field(None, description="why the prediction is withheld")
    measured: Dict[str, Any] = Field(description="the run as measured: workers, epochs, epoch_seconds, wait_share ...")
    model: Dict[str, Any] = Field(description="the setting modelled: workers, prefetch_factor, cores ...")
    replay: Dict[str, Any] = Field(description="the model's replay of the run's own setting")
    predicted: Dict[str, Any] = Field(description="epoch_seconds, wait_share, batches_per_second, peak_memory_bytes ...")


class Prediction(_Open):
    """lotus-tool whatif --json: one rank's prediction (these fields), or with several ranks
    `ranks`, each rank's (with its `rank` label)."""
    model_config = ConfigDict(extra="allow", json_schema_extra={"anyOf": [
        {"required": ["claim", "measured", "model", "replay", "predicted"]}, {"required": ["ranks"]}]})
    claim: Optional[bool] = Field(None, description="false: the model withholds this prediction "
                                  "(no_claim_why says why)")
    no_claim_why: Optional[str] = Field(None, description="why the prediction is withheld")
    measured: Optional[Dict[str, Any]] = None
    model: Optional[Dict[str, Any]] = None
    replay: Optional[Dict[str, Any]] = Field(None, description="the model's replay of the run's own setting")
    predicted: Optional[Dict[str, Any]] = None
    ranks: Optional[List[RankPrediction]] = Field(None, description="several ranks: each one's prediction")

    @model_validator(mode="after")
    def _one_or_ranks(self):
        if self.ranks is None and None in (self.claim, self.measured, self.model, self.replay,
                                           self.predicted):
            raise ValueError("neither one rank's prediction nor ranks")
        return self


class OpVerdict(_Open):
    name: str
    verdict: str = Field(description="slower, faster or same (or why none)")
    ci95: Optional[List[Optional[float]]] = Field(description="the change's 95 % interval")


class RunVerdict(_Open):
    name: str
    verdict: str
    ci95: Optional[List[Optional[float]]]


class Comparison(_Open):
    """lotus-tool diff --json: per-op verdicts with their intervals, then the run's figures."""
    ops: List[OpVerdict]
    run: List[RunVerdict]
    threshold: float
    basis: str


class LiveView(_Open):
    """lotus-tool top --once: one frame of a running job's live figures."""
    dir: str
    frame: str = Field(description="the frame top prints: wait share, batches/s, ops, workers")


class Capture(_Open):
    """lotus-tool capture: the directory the job's flight recorders wrote."""
    dir: str
    capture_dir: str = Field(description="the capture's directory (diagnose it with diagnose)")
    notes: str


class Preflight(_Open):
    """python -m lotus.torch preflight --json: the script stopped at its first DataLoader
    iterator, what its workers would be sent, what they would lack, and the time to first batch
    by start method (tools/docs/WHATIF.md, "Before the run")."""
    script: str
    problems: List[Dict[str, Any]] = Field(description="what would fail, each with the start "
                                           "methods it fails under")
    predictions: Dict[str, Any] = Field(description="per start method: the predicted time to "
                                        "first batch (ms), or why none")
    remedies: List[str]


class Rule(_Open):
    """A finding's rule, from tools/docs/FINDINGS.md."""
    kind: str
    looks_at: str
    act_when: str
    note_or_fine: str
    rules_every_finding_follows: str
    kinds: List[str] = Field(description="every finding kind, in the report's order")


# ---- tools/docs/FINDINGS.md ----------------------------------------------------------------------

def findings_doc() -> str:
    """The text of FINDINGS.md: the copy shipped in the package, else the source tree's."""
    here = Path(__file__).resolve().parent
    for p in (here / FINDINGS_DOC, here.parents[2] / "docs" / FINDINGS_DOC):
        if p.is_file():
            return p.read_text(encoding="utf-8")
    raise ToolError("tools/docs/FINDINGS.md is not installed with this package")


def parse_rules(doc: str) -> Dict[str, Any]:
    rows: Dict[str, Dict[str, str]] = {}
    order: List[str] = []
    table = doc.split("## The findings", 1)[-1]
    for line in table.splitlines():
        m = re.match(r"^\| `([a-z_]+)` \| (.*) \|$", line)
        if not m:
            continue
        cells = [c.strip() for c in m.group(2).split(" | ")]
        if len(cells) != 3:
            continue
        order.append(m.group(1))
        rows[m.group(1)] = {"looks_at": cells[0], "act_when": cells[1], "note_or_fine": cells[2]}
    m = re.search(r"^## Two rules every finding follows\n(.*?)(?=^## )", doc, re.S | re.M)
    shared = m.group(1).strip() if m else ""
    return {"rows": rows, "order": order, "shared": shared}


# ---- The trace directories under the roots -------------------------------------------------------

def trace_uri(fence: Fence, p: Path) -> str:
    for i, r in enumerate(fence.roots):
        if p == r or r in p.parents:
            rel = p.relative_to(r).as_posix()
            return f"lotus://trace/{i}/{'' if rel == '.' else rel}"
    raise ResourceError("outside the roots")


def find_traces(fence: Fence):
    """([{uri, path, trace_files}], truncated): the directories under the roots that hold trace
    files or sidecars, at most MAX_DEPTH levels down and MAX_TRACES of them, after looking at no
    more than max_files entries (symlinks not followed)."""
    found: List[Dict[str, Any]] = []
    seen = 0
    truncated = False
    for r in fence.roots:
        stack = [(r, 0)]
        while stack and not truncated:
            cur, depth = stack.pop()
            files = 0
            subdirs = []
            try:
                with os.scandir(cur) as it:
                    for e in it:
                        seen += 1
                        if seen > fence.max_files:
                            truncated = True
                            break
                        if e.is_dir(follow_symlinks=False):
                            subdirs.append(Path(e.path))
                        elif TRACE_NAME.search(e.name):
                            files += 1
            except OSError:
                continue
            if files:
                found.append({"uri": trace_uri(fence, cur), "path": str(cur), "trace_files": files})
                if len(found) >= MAX_TRACES:
                    truncated = True
            if depth < MAX_DEPTH:
                stack.extend((s, depth + 1) for s in sorted(subdirs, reverse=True))
    found.sort(key=lambda t: t["path"])
    return found, truncated


class LotusServer(MCPServer):
    """MCPServer whose resources/list also names each trace directory under the roots (a
    directory resource of the lotus://trace/ template)."""

    def __init__(self, fence: Fence, **kwargs):
        super().__init__(**kwargs)
        self._fence = fence

    async def list_resources(self):
        listed = await super().list_resources()
        found, _ = await anyio.to_thread.run_sync(find_traces, self._fence)
        for t in found:
            listed.append(Resource(uri=t["uri"], name=t["uri"][len("lotus://trace/"):],
                                   mime_type="application/json",
                                   description=f"trace directory {t['path']} ({t['trace_files']} "
                                               "trace files and sidecars): its entries"))
        return listed


# ---- The server ----------------------------------------------------------------------------------

SERVER_HELP = (
    "lotus profiles ML input pipelines (PyTorch DataLoader workers, C++ loaders) and answers "
    "questions about a run from its trace directory: diagnose (the findings: is training waiting "
    "for batches, why, what to change), predict (what another DataLoader setting would give, or "
    "why the model withholds it), compare (did a change help: per-op verdicts with intervals), "
    "live (a running job), explain (a finding's rule), and, where the server allows it, "
    "preflight (a training script run up to its first DataLoader iterator: what its workers would "
    "lack, the time to first batch by start method). Trace directories are those under the "
    "server's roots: read lotus://traces to list them.")

TracePath = Annotated[str, Field(
    max_length=MAX_PATH,
    description="A trace directory: absolute, relative to a root, or lotus://trace/<root>/<path> "
                "(lotus://traces lists them)")]


def build_server(fence: Fence, runner: Runner, allow_capture: bool, max_result: int,
                 allow_preflight: bool = False) -> MCPServer:
    import lotus
    mcp = LotusServer(fence, name="lotus", version=getattr(lotus, "__version__", ""),
                      instructions=SERVER_HELP, log_level="WARNING")
    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                                open_world_hint=False)

    def trace(arg: str, what: str = "trace_dir") -> Path:
        d = fence.resolve(arg, what)
        fence.check_tree(d, what)
        return d

    @mcp.tool(annotations=read_only)
    def diagnose(trace_dir: TracePath) -> Annotated[CallToolResult, Diagnosis]:
        """The run's findings, in the order of lotus-tool report (acts first): each with its
        severity, kind, subject, sentence, evidence, advice and figures. The first `act`
        finding is the thing to change; `input_bound` is the verdict (is training waiting for
        its batches). Same as `lotus-tool report DIR --json`."""
        d = trace(trace_dir)
        return answer(runner.json(["report", str(d), "--json"]), max_result)

    @mcp.tool(annotations=read_only)
    def predict(
        trace_dir: TracePath,
        workers: Annotated[int, Field(ge=1, le=4096, description="num_workers to predict (1..4096)")],
        start_method: Annotated[Optional[Literal["fork", "spawn", "forkserver"]], Field(
            description="start the workers by fork, spawn or forkserver (default: the measured one)")] = None,
        persistent_workers: Annotated[bool, Field(
            description="keep the workers alive across epochs (persistent_workers=True)")] = False,
        prefetch_factor: Annotated[Optional[int], Field(
            ge=1, le=65536, description="batches per worker outstanding (default: the measured one, else 2)")] = None,
        memory_budget: Annotated[Optional[str], Field(
            pattern=r"^[0-9]{1,15}(\.[0-9]{1,6})?[KMGTkmgt]?$", max_length=24,
            description="bytes the job may use, e.g. 8G: warn when the predicted peak exceeds it "
                        "(default: this machine's memory)")] = None,
        unordered: Annotated[bool, Field(
            description="deliver batches as they arrive (PyTorch's in_order=False)")] = False,
    ) -> Annotated[CallToolResult, Prediction]:
        """What a DataLoader setting would give, from one run: lotus-tool whatif's replay of the
        measured batches through its model of the DataLoader (epoch time, wait share,
        batches/s, time to first batch, peak memory). `claim` false: the model withholds the
        prediction and `no_claim_why` says why (quote it rather than guess). Same as
        `lotus-tool whatif DIR --workers N ... --json`."""
        d = trace(trace_dir)
        args = ["whatif", str(d), "--workers", str(workers), "--json"]
        if start_method:
            args += ["--start-method", start_method]
        if persistent_workers:
            args.append("--persistent-workers")
        if prefetch_factor is not None:
            args += ["--prefetch-factor", str(prefetch_factor)]
        if memory_budget:
            args += ["--memory-budget", memory_budget]
        if unordered:
            args.append("--unordered")
        return answer(runner.json(args), max_result)

    @mcp.tool(annotations=read_only)
    def compare(base_dir: TracePath, new_dir: TracePath) -> Annotated[CallToolResult, Comparison]:
        """Did a change help? Two runs compared op by op (count, mean, p50, p90, the mean's
        relative change with a 95 % bootstrap interval, a verdict: slower, faster, same), then
        the run's figures (preprocessing per batch, wait share, epoch time, batches/s). Same as
        `lotus-tool diff BASE NEW --json`."""
        b = trace(base_dir, "base_dir")
        n = trace(new_dir, "new_dir")
        return answer(runner.json(["diff", str(b), str(n), "--json"]), max_result)

    @mcp.tool(annotations=read_only)
    def live(dir: TracePath) -> Annotated[CallToolResult, LiveView]:
        """A running job now: one frame of `lotus-tool top --once` (per rank the input-wait
        share and batches/s over the last 10 s, per op its rate and percentiles, per worker its
        busy share and the batch it is in; STALLED workers marked)."""
        d = trace(dir, "dir")
        rc, out, err = runner.run(["top", str(d), "--once", "--no-color"])
        if rc != 0:
            raise ToolError(f"lotus-tool top failed (exit {rc}): {tail(err)}")
        return answer({"dir": str(d), "frame": out.decode("utf-8", "replace")}, max_result)

    @mcp.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False,
                                          idempotent_hint=False, open_world_hint=False))
    def capture(
        dir: TracePath,
        reason: Annotated[str, Field(max_length=200, pattern=r"^[ -~]*$",
                                     description="why (written into the capture's sidecars)")] = "mcp",
        timeout_s: Annotated[float, Field(ge=1, le=120, description="seconds to wait for the processes")] = 10,
    ) -> Annotated[CallToolResult, Capture]:
        """Ask a running job (traced with LOTUS_FLIGHT) for a capture of its last seconds, wait
        for it and return its directory, to diagnose. Only when the server was started with
        --allow-capture: it writes into the job's trace directory."""
        if not allow_capture:
            raise ToolError("capture is off: the server was started without --allow-capture")
        d = trace(dir, "dir")
        rc, out, err = runner.run(["capture", str(d), "--reason", reason, "--timeout", f"{timeout_s:g}"],
                                  timeout_s=timeout_s + 30)
        if rc != 0:
            raise ToolError(f"lotus-tool capture failed (exit {rc}): {tail(err)}")
        lines = out.decode("utf-8", "replace").strip().splitlines()
        where = lines[-1].strip() if lines else ""
        return answer({"dir": str(d), "capture_dir": where, "notes": tail(err)}, max_result)

    @mcp.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False,
                                          idempotent_hint=False, open_world_hint=False))
    def preflight(
            script: Annotated[str, Field(description="the training script: a file in the roots")],
            args: Annotated[List[Annotated[str, Field(max_length=1024)]],
                            Field(max_length=32, description="its arguments")] = [],  # noqa: B006
            start_method: Optional[Literal["fork", "spawn", "forkserver"]] = None,
            workers: Annotated[Optional[int], Field(ge=0, le=64)] = None,
            timeout_s: Annotated[float, Field(ge=1, le=600)] = 300) -> Annotated[CallToolResult,
                                                                                 Preflight]:
        """Before training: run the script (with this server's Python) until its first DataLoader
        iterator would start, then stop it: what spawn/forkserver workers would be sent and lack,
        CUDA first, the time to first batch by start method, the remedies. Runs the user's code:
        only with --allow-preflight."""
        if not allow_preflight:
            raise ToolError("preflight is off: it runs the script, and the server was started "
                            "without --allow-preflight")
        f = fence.resolve(script, "script", want_dir=False)
        if not f.is_file():
            raise Refused(f"script: {script}: not a file")
        opts: List[str] = ["--json"]
        if start_method:
            opts += ["--start-method", start_method]
        if workers is not None:
            opts += ["--workers", str(workers)]
        rc, out, err = runner.run(opts + [str(f), *args], timeout_s,
                                  command=[sys.executable, "-m", "lotus.torch", "preflight"],
                                  cwd=str(f.parent))
        if rc != 0:
            raise ToolError(f"the pre-flight failed (exit {rc}): {tail(err)}")
        try:
            data = json.loads(out)
        except ValueError as e:
            raise ToolError(f"the pre-flight printed no JSON ({e}): {tail(err)}")
        return answer(data, max_result)

    @mcp.tool(annotations=read_only)
    def explain(finding: Annotated[str, Field(min_length=1, max_length=64, description=
                                              "a finding's kind, e.g. startup, input_bound, top_op")]
                ) -> Annotated[CallToolResult, Rule]:
        """The rule behind a finding kind, from tools/docs/FINDINGS.md: what it looks at, when it
        is an act, when a note or fine, and the two rules every finding follows."""
        rules = parse_rules(findings_doc())
        kind = finding.strip().lower()
        if kind not in rules["rows"]:
            raise ToolError(f"no finding kind {finding!r}; the kinds: {', '.join(rules['order'])}")
        row = rules["rows"][kind]
        return answer({"kind": kind, **row, "rules_every_finding_follows": rules["shared"],
                       "kinds": rules["order"]}, max_result)

    # ---- resources: the trace directories under the roots and their files ----

    def uri_of(p: Path) -> str:
        return trace_uri(fence, p)

    @mcp.resource("lotus://traces", name="traces", mime_type="application/json",
                  description="The trace directories under the server's roots (bounded listing)")
    def traces() -> str:
        found, truncated = find_traces(fence)
        return json.dumps({"roots": [str(r) for r in fence.roots], "traces": found,
                           "truncated": truncated})

    @mcp.resource("lotus://trace/{root}/{+path}{?offset}", name="trace", description=(
        "A directory under root number <root> (its entries, as JSON) or a file (its first "
        f"{MAX_READ} bytes; ?offset=N for the next ones)"))
    def trace_entry(root: str, path: str, offset: str = "0") -> str | bytes:
        if not re.fullmatch(r"[0-9]{1,15}", offset):
            raise ResourceError(f"offset: a byte offset (digits), got {offset!r}")
        offset = int(offset)
        try:
            p = fence.resolve(f"lotus://trace/{root}/{path}", "uri", want_dir=False)
        except ToolError as e:
            raise ResourceNotFoundError(str(e))
        if p.is_dir():
            entries = []
            n = 0
            with os.scandir(p) as it:
                for e in it:
                    n += 1
                    if len(entries) < MAX_LISTED:
                        try:
                            st = e.stat(follow_symlinks=False)
                        except OSError:
                            continue
                        kind = ("dir" if stat.S_ISDIR(st.st_mode) else "symlink"
                                if stat.S_ISLNK(st.st_mode) else "file")
                        entries.append({"name": e.name, "type": kind, "bytes": st.st_size})
                    elif n > fence.max_files:
                        break
            entries.sort(key=lambda x: x["name"])
            return json.dumps({"uri": uri_of(p), "path": str(p), "entries": entries,
                               "truncated": n > len(entries)})
        if not p.is_file():
            raise ResourceNotFoundError(f"{p}: not a regular file")
        with open(p, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            f.seek(offset)
            data = f.read(MAX_READ)
        more = offset + len(data) < size
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return data
        if more:
            text += f"\n[lotus.mcp: {size - offset - len(data)} more bytes: {uri_of(p)}?offset={offset + len(data)}]\n"
        return text

    @mcp.prompt(name="slow_input_pipeline", title="Why is my input pipeline slow?")
    def slow_input_pipeline(trace_dir: str, baseline_dir: str = "") -> str:
        """Walk a run from its findings to a checked change: diagnose, predict, compare."""
        base = (f"Then compare the new run with the baseline {baseline_dir} (compare base_dir="
                f"{baseline_dir} new_dir=<the new run>)" if baseline_dir else
                "After the user has rerun with the change, compare this run (base_dir) with the new "
                "run's trace directory (new_dir)")
        return (
            f"My training job's input pipeline seems slow. Its lotus trace is {trace_dir}.\n"
            "1. Call diagnose on it. Read the findings in order: the first with severity `act` is "
            "the thing to change; `input_bound` says whether training waits for its batches at all "
            "(if it does not, the input pipeline is not what makes training slow: say so and stop). "
            "Use explain(kind) for a finding whose rule you need.\n"
            "2. Where the advice is a DataLoader setting (num_workers, persistent_workers, "
            "prefetch_factor, the start method), call predict with that setting and quote its "
            "predicted epoch time and wait share against the measured ones. If `claim` is false, "
            "quote `no_claim_why` and do not promise a gain. Where the advice is an op (a "
            "transform, the decode), say which and what the findings advise; predict cannot model it.\n"
            f"3. Tell me the one change to make, in my loader's words, and what it should gain. {base}: "
            "report the verdicts that matter (epoch time, wait share, the ops that changed) with "
            "their intervals, and whether the gain matched the prediction.")

    return mcp


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m lotus.mcp",
        description="MCP server (stdio) answering questions about lotus traces with lotus-tool: "
                    "diagnose, predict, compare, live, capture, explain, preflight. Reads only "
                    "inside the --root directories; runs no user code unless --allow-preflight.")
    ap.add_argument("--root", action="append", required=True, metavar="DIR",
                    help="a directory whose trace directories may be read (repeat for several)")
    ap.add_argument("--allow-capture", action="store_true",
                    help="let the capture tool ask a running job (LOTUS_FLIGHT) for a capture, "
                         "which it writes into its trace directory")
    ap.add_argument("--allow-preflight", action="store_true",
                    help="let the preflight tool run a training script of the roots (with this "
                         "Python) up to its first DataLoader iterator")
    ap.add_argument("--tool", metavar="PATH",
                    help="lotus-tool to run (default: $LOTUS_TOOL, else the one installed with lotus)")
    ap.add_argument("--timeout", type=float, default=TIMEOUT_S, metavar="S",
                    help=f"seconds one lotus-tool run may take (default {TIMEOUT_S:g})")
    ap.add_argument("--max-files", type=int, default=MAX_FILES, metavar="N",
                    help=f"entries a trace directory may hold (default {MAX_FILES})")
    ap.add_argument("--max-result-bytes", type=int, default=MAX_RESULT, metavar="N",
                    help=f"bytes one answer may hold (default {MAX_RESULT})")
    a = ap.parse_args(argv)
    if not 1 <= a.timeout <= 3600:
        ap.error("--timeout: 1..3600 seconds")
    if not 1 <= a.max_files <= 10_000_000:
        ap.error("--max-files: 1..10000000")
    if not 1024 <= a.max_result_bytes <= 64 << 20:
        ap.error("--max-result-bytes: 1024..67108864")
    fence = Fence(a.root, a.max_files)
    runner = Runner(find_tool(a.tool), a.timeout, max(MAX_OUTPUT, a.max_result_bytes))
    server = build_server(fence, runner, a.allow_capture, a.max_result_bytes, a.allow_preflight)
    server.run("stdio")
    return 0


if __name__ == "__main__":
    sys.exit(main())
