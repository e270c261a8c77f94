#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""lotus beside the profilers a user could pick, on the same pipeline, whole process, in one run.

    PYTHONPATH=<build>/python /usr/bin/python3 bench/python/peers.py [--rounds 5] [--images 512]
        [--workers 2] [--epochs 2] [--out DIR] [--venv DIR] [--only lotus,py-spy,...]

The pipeline is examples/python_pipeline/pipeline.py (ImageFolder over generated JPEGs, four
torchvision transforms, a DataLoader with --workers fork workers, --epochs epochs). Each round runs
every variant once, in turn (rounds interleaved, so drift of the machine falls on all alike):

* untraced: the pipeline alone (`--no-trace`);
* lotus: the same program traced by lotus.torch (every worker's ops and batches, the main
  process's batch waits), its trace in OUT;
* py-spy: `py-spy record --subprocesses --rate 100` (sampled stacks of every process);
* VizTracer: `viztracer` (every Python call of every process, its default tracing);
* Scalene: `scalene run --cpu-only` (its sampled CPU profile per line).

Per variant: the whole process's wall time (the command from exec to exit, interpreter start,
imports, the profiler's own start and its output at exit included), its CPU time (the process tree
and the profiler: user + system of every waited-for descendant), the process tree's peak resident
memory (summed over the tree, sampled every 20 ms), the bytes it wrote, and medians over the
rounds (after one warm-up round that is not counted: bytecode written, as an installed package has
it, and the JPEGs in the page cache); each round starts one variant later than the one before; a
ratio is the median over the rounds of the variant's figure over the untraced run's of the same
round (the machine's drift over the rounds cancels), with a 95 % interval of that median (the
percentile bootstrap over the rounds: with this VM's ±3 % spread a run, 21 rounds leave it about
±1.5 % wide, 61 rounds about ±0.7 %). The peers are installed from PyPI into --venv
(Debian's Python with its system packages: torch and torchvision as the pipeline uses them), pinned
in tools/scripts/pip-stacks.txt's [peers] stack; --only leaves the others out.
"""
import argparse
import os
import pathlib
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from framework_tests import dir_bytes  # noqa: E402  (the bytes under a folder, not into links)

ROOT = pathlib.Path(__file__).resolve().parents[2]
PIPELINE = ROOT / "examples" / "python_pipeline" / "pipeline.py"
STACKS = ROOT / "tools" / "scripts" / "pip-stack.sh"

# What each can tell about a data loader, from its output (not measured: what its format holds).
CAN_TELL = {
    "untraced": "-",
    "lotus": "every op's time per worker process, every batch's preparation and the main "
             "process's wait for it (Lotus format)",
    "py-spy": "sampled stacks of every process (100 Hz): where time goes, no op or batch "
              "boundaries",
    "VizTracer": "every Python call of every process: ops by function name, no batch "
                 "boundaries or waits",
    "Scalene": "sampled CPU time per line, summed over the run",
}


def peers_venv(venv):
    """A venv of Debian's Python with system packages (torch) and the [peers] stack."""
    py = venv / "bin" / "python"
    pins = subprocess.run(["bash", str(STACKS), "--list", "peers"], capture_output=True,
                          text=True, check=True).stdout.split()
    stamp = venv / ".lotus-peers"
    if py.exists() and stamp.exists() and stamp.read_text() == " ".join(pins):
        return py
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    cache = pathlib.Path(os.environ.get("LOTUS_WHEEL_CACHE",
                                        pathlib.Path.home() / ".cache" / "lotus-wheels")) / "peers"
    cache.mkdir(parents=True, exist_ok=True)
    subprocess.run([str(py), "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
                    "-d", str(cache), *pins], check=True)
    subprocess.run([str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    "--no-index", "--find-links", str(cache), *pins], check=True)
    stamp.write_text(" ".join(pins))
    return py


def tree_rss(root_pid):
    """Summed resident memory (bytes) of root_pid and its descendants, from /proc."""
    children = {}
    rss = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                st = f.read()
            fields = st[st.rindex(")") + 2:].split()
            children.setdefault(int(fields[1]), []).append(int(d))
            rss[int(d)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            continue
    total, todo = 0, [root_pid]
    while todo:
        p = todo.pop()
        total += rss.get(p, 0)
        todo.extend(children.get(p, []))
    return total


class RunFailed(Exception):
    """A command exited non-zero: its message and the end of its standard error."""


def run_once(cmd, out, env):
    """(wall s, CPU s, peak tree RSS bytes, bytes written) of one whole command; RunFailed when it
    exits non-zero."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    peak = [0]
    done = threading.Event()

    def sample():
        while not done.wait(0.02):
            peak[0] = max(peak[0], tree_rss(p.pid))

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    _, err = p.communicate(timeout=1800)
    wall = time.monotonic() - t0
    done.set()
    t.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise RunFailed(f"{' '.join(cmd)} failed ({p.returncode}):\n"
                        f"{err.decode(errors='replace')[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, peak[0], dir_bytes(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--images", type=int, default=512)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--out")
    ap.add_argument("--lotus-env", action="append", default=[], metavar="NAME:KEY=VALUE",
                    help="one more lotus variant, traced with KEY=VALUE in its environment "
                         "(what a part of lotus costs: LOTUS_RESOURCES=0, LOTUS_DISABLE=1)")
    ap.add_argument("--venv", default=str(pathlib.Path.home() / ".cache" / "lotus-venvs" / "peers"))
    ap.add_argument("--only", help="comma-separated variants (default: all)")
    a = ap.parse_args()
    root = pathlib.Path(a.out or tempfile.mkdtemp(prefix="lotus-peers-"))
    root.mkdir(parents=True, exist_ok=True)
    py = peers_venv(pathlib.Path(a.venv))
    vbin = py.parent
    data = root / "data"
    args = ["-n", str(a.images), "-w", str(a.workers), "-e", str(a.epochs)]
    # The JPEGs once, shared by every run through a link in its own output folder.
    subprocess.run([str(py), str(PIPELINE), "--out", str(root), "--no-trace", "-e", "1",
                    "-n", str(a.images), "-w", "0"], check=True, stdout=subprocess.DEVNULL)
    env = dict(os.environ)
    # Bytecode as a user's install has it (pip compiles it): without it every run would compile
    # lotus's and the peers' sources again. The first round below writes it and is not counted.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    variants = {
        "untraced": lambda o: [str(py), str(PIPELINE), "--out", str(o), "--no-trace", *args],
        "lotus": lambda o: [str(py), str(PIPELINE), "--out", str(o), *args],
        "py-spy": lambda o: [str(vbin / "py-spy"), "record", "--subprocesses", "--rate", "100",
                             "--format", "speedscope", "--output", str(o / "py-spy.json"),
                             "--", str(py), str(PIPELINE), "--out", str(o), "--no-trace",
                             *args],
        "VizTracer": lambda o: [str(vbin / "viztracer"), "--quiet", "--output_file",
                                str(o / "viztracer.json"), "--", str(PIPELINE), "--out", str(o),
                                "--no-trace", *args],
        "Scalene": lambda o: [str(vbin / "scalene"), "run", "--cpu-only", "-o",
                              str(o / "scalene.json"), str(PIPELINE), "---", "--out", str(o),
                              "--no-trace", *args],
    }
    variant_env = {}
    for spec in a.lotus_env:
        name, _, kv = spec.partition(":")
        key, eq, value = kv.partition("=")
        if not name or not key.startswith("LOTUS_") or not eq or name in variants:
            ap.error(f"--lotus-env wants NAME:LOTUS_KEY=VALUE with a new NAME, not {spec!r}")
        variants[name] = variants["lotus"]
        variant_env[name] = {key: value}
        CAN_TELL[name] = f"lotus with {key}={value}"
    if a.only:
        keep = set(a.only.split(",")) | {"untraced"} | set(variant_env)
        variants = {k: v for k, v in variants.items() if k in keep}
    results = {k: {} for k in variants}  # variant -> {round: figures}
    failed = {k: 0 for k in variants}
    names = list(variants)
    for r in range(-1, a.rounds):  # round -1: a warm-up (bytecode, page cache), not counted
        # Each round starts one variant later: none always runs first, right after another.
        k = r % len(names) if r >= 0 else 0
        for name in names[k:] + names[:k]:
            cmd = variants[name]
            out = root / f"{name}-{r}"
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir()
            (out / "data").symlink_to(data)
            try:
                got = run_once(cmd(out), out, {**env, **variant_env.get(name, {})})
            except RunFailed as e:
                # lotus and the baseline must run; a peer's failed run (Scalene's sampling has
                # killed a DataLoader worker) is counted as failed and left out of its figures.
                if name == "untraced" or name == "lotus" or name in variant_env:
                    sys.exit(str(e))
                print(f"{name}: {str(e).splitlines()[0]}", file=sys.stderr)
                failed[name] += r >= 0
                got = None
            if r >= 0 and got is not None:
                results[name][r] = got
            shutil.rmtree(out, ignore_errors=True)  # the disk is shared: keep one run's output
        print(f"round {r + 1} of {a.rounds} done" if r >= 0 else "warm-up done", file=sys.stderr)
    results = {k: v for k, v in results.items() if v}  # a peer that never ran: no row
    med = {k: [statistics.median(x[i] for x in v.values()) for i in range(4)]
           for k, v in results.items()}
    # The ratios pair each run with the untraced run of its round: the machine's drift over the
    # rounds (seen: 10 % over 3 minutes) falls on both sides of each ratio.
    base = results["untraced"]
    ratios = {k: [[x[i] / base[r][i] for r, x in v.items()] for i in (0, 1)]
              for k, v in results.items()}
    paired = {k: [statistics.median(r) for r in v] for k, v in ratios.items()}
    print(f"examples/python_pipeline: {a.images} JPEGs, {a.workers} fork workers, {a.epochs} "
          f"epochs; medians of {a.rounds} interleaved rounds; python {sys.version.split()[0]}\n")
    print("| variant | wall (s) [range] | × untraced [95 % interval] | CPU (s) | × | peak tree RSS "
          "(MiB) | output | what it can tell |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for name, m in med.items():
        walls = [x[0] for x in results[name].values()]
        lo, hi = median_interval(ratios[name][0])
        runs = f" ({failed[name]} of {a.rounds} runs failed)" if failed[name] else ""
        print(f"| {name}{runs} | {m[0]:.2f} [{min(walls):.2f}–{max(walls):.2f}] | "
              f"{paired[name][0]:.3f} [{lo:.3f}–{hi:.3f}] | {m[1]:.2f} | {paired[name][1]:.2f} | "
              f"{m[2] / 2**20:.0f} | {m[3] / 1e6:.1f} MB | {CAN_TELL[name]} |")


def median_interval(values, resamples=4000, seed=1):
    """A 95 % interval of the median of `values` (the percentile bootstrap, `resamples` draws,
    a fixed seed: the same rounds give the same interval): how far the rounds' noise leaves the
    median ratio from the one more rounds would converge to."""
    rng = random.Random(seed)
    n = len(values)
    if n < 2:
        return values[0], values[0]
    meds = sorted(statistics.median(rng.choices(values, k=n)) for _ in range(resamples))
    return meds[int(0.025 * resamples)], meds[int(0.975 * resamples) - 1]


if __name__ == "__main__":
    main()
