#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Every command of lotus-tool on damaged trace directories: a clear message or a result, never a
crash, a hang or an internal exception's text.

    mutated_dirs.py LOTUS_TOOL WORK_DIR [--mutants N] [--seed S]

A realistic directory (two epochs of two workers each, the main process, a sidecar with every kind
of line the runtime writes) is damaged N times, deterministically from the seed: bytes flipped,
lines cut, dropped, repeated or swapped between files, numbers replaced by 0, -1, 2^64, 1e308,
nan or huge, fields added or removed, keys of the sidecar given junk values. On each mutant, check,
stats (text, --json, --csv, --skip-invalid), report (HTML, --json), viz (JSON, Perfetto), whatif,
summarize, diff against the intact directory and top --once (the live file) must each end within their time limit with exit
code 0, 1, 2 or 3, no signal, and, when they fail, one line `lotus-tool: error: ...` that is not
the text of a C++ library exception (std::out_of_range, nlohmann's json.exception, std::stoi, ...).
"""
import argparse
import os
import random
import shutil
import subprocess
import sys

PREFIX = "lotustrace_log"
OPS = ["Loader", "RandomResizedCrop", "RandomHorizontalFlip", "ToTensor", "Normalize"]
# What a C++ library's exception says; the tool's own messages say what was wrong with the input.
INTERNAL = ("basic_string", "json.exception", "stoi", "stoul", "stoll", "stod", "vector::",
            "map::at", "out_of_range", "bad_optional", "bad_variant", "std::", "terminate called",
            "AddressSanitizer", "runtime error:", "LeakSanitizer", "Assertion")


def base_dir(d):
    """Two epochs, 2 workers each (new pids per epoch), 8 batches of 2 samples per epoch."""
    os.makedirs(d)
    main_pid = 1000
    t = 1_795_000_000_000_000_000
    main, side = [], []
    side += ["lotus-meta 1", "version 0.1.0", f"pid {main_pid}", "ppid 1", f"prefix {PREFIX}",
             "start 5130921", "clock tsc 0.444444418", "host vm", "cpus 2 2",
             f"clocksync start {t} 51309220316167 5 64 16000000 16000000", "loader pipeline",
             f"thread {main_pid} train", f"file {PREFIX}_main_pid_{main_pid}"]
    for epoch in range(2):
        idx = 0  # batch indices restart each epoch, as PyTorch's do
        side.append(f"epoch {epoch} {t}")
        workers = [main_pid + 10 + 2 * epoch, main_pid + 11 + 2 * epoch]
        lines = {w: [] for w in workers}
        for b in range(8):
            w = workers[b % 2]
            start = t + b * 3_000_000
            s = start
            for _sample in range(2):
                for op in OPS:
                    dur = 200_000 + 10_000 * len(op)
                    lines[w].append(f"S{op},{s},{dur}")
                    s += dur
            lines[w].append(f"SCollation,{s},150000")
            lines[w].append(f"SBatchPreprocessed_{idx},{start},{s + 150000 - start}")
            side.append(f"batchres {w} {idx} {start} {s + 150000 - start} 5000000 100000 "
                        f"1977 0 1 2")
            main.append(f"SBatchQueued_{idx},{start - 1000},1000")
            wait = 1000 if b % 3 == 2 else 800_000
            main.append(f"SBatchWait_{idx},{s},{wait}")
            main.append(f"SBatchConsumed_{idx},{s + wait + 1000},1000")
            idx += 1
        for w in workers:
            side.append(f"thread {w} worker-{w % 2}")
            side.append(f"file {PREFIX}_worker_pid_{w}")
            with open(os.path.join(d, f"{PREFIX}_worker_pid_{w}"), "w") as f:
                f.write("\n".join(lines[w]) + "\n")
        t += 40_000_000
    side += [f"memory {t} 33173504 32060416 31666176 33173504 32060416 31666176",
             f"opres {main_pid + 10} 4 800000 790000 10000 12 0 1 2 Loader",
             f"stats {len(main) + 8 * 2 * 12} {len(main) + 8 * 2 * 12} 0 0",
             f"clocksync exit {t} 51310344939930 5 64 16000000 16000000"]
    with open(os.path.join(d, f"{PREFIX}_main_pid_{main_pid}"), "w") as f:
        f.write("\n".join(main) + "\n")
    # The live figures file (`top`): an ended process (final 1), as the runtime leaves it.
    bounds = [10000, 25000, 50000, 100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000,
              25000000, 50000000, 100000000, 250000000, 500000000, 1000000000, 2500000000,
              5000000000, 10000000000]
    def hist(n, k):  # n values in bucket k: (bounds[k - 1], bounds[k]]
        return " ".join(["0"] * k + [str(n)] + ["0"] * (19 - k))
    body = (f"pid {main_pid}\nppid 1\nstart 5130921\nhost vm\nrole main\nupdated {t}\n"
            f"since {t - 80_000_000}\nfinal 1\nrecorded 240\ndropped 0\noverflow 0 0\n"
            f"bounds {' '.join(map(str, bounds))}\nwindow 80000000 16 9600000 16\nconsumed 16\n"
            f"wait 16 9600000 {hist(16, 6)}\n"
            f"worker {main_pid + 12} 8 26800000 26800000 {t - 1_000_000}\n"
            f"worker {main_pid + 13} 8 26800000 26800000 {t - 2_000_000}\n"
            + "".join(f"op 32 32 6400000 {hist(32, 4)} {op}\n" for op in OPS)
            + f"inflight {main_pid} wait {t - 500_000} 3 -\nend\n")
    head = "lotus-live 1 %020d %010d\n\n" % (2, 46 + len(body))
    with open(os.path.join(d, f".{PREFIX}.lotus-live_{main_pid}"), "wb") as f:
        f.write((head + body).encode() + b"\0" * 512)
    with open(os.path.join(d, f".{PREFIX}.lotus-meta_{main_pid}"), "w") as f:
        f.write("\n".join(side) + "\n")


NUMBERS = ["0", "-1", "18446744073709551616", "18446744073709551615", "9223372036854775808",
           "1e308", "nan", "inf", "-0", "00000000000000000000001", "4294967296", "1.5", "",
           "99999999999999999999999999999999"]


def mutate(rng, d):
    """One to four damages to the files of `d`, in place."""
    files = sorted(os.listdir(d))
    for _ in range(rng.randint(1, 4)):
        path = os.path.join(d, rng.choice(files))
        data = open(path, "rb").read()
        lines = data.split(b"\n")
        kind = rng.randrange(9)
        if kind == 0 and data:  # bytes flipped
            b = bytearray(data)
            for _ in range(rng.randint(1, 8)):
                b[rng.randrange(len(b))] = rng.randrange(256)
            data = bytes(b)
        elif kind == 1:  # cut anywhere
            data = data[:rng.randrange(len(data) + 1)]
        elif kind == 2 and lines:  # a line dropped or repeated many times
            i = rng.randrange(len(lines))
            lines[i:i + 1] = [] if rng.random() < 0.5 else [lines[i]] * rng.randint(2, 50)
            data = b"\n".join(lines)
        elif kind == 3 and lines:  # a number replaced
            i = rng.randrange(len(lines))
            parts = lines[i].replace(b",", b" ,").split(b" ")
            nums = [k for k, p in enumerate(parts) if p.strip(b",").isdigit()]
            if nums:
                k = rng.choice(nums)
                comma = parts[k].startswith(b",")
                parts[k] = (b"," if comma else b"") + rng.choice(NUMBERS).encode()
            lines[i] = b" ".join(parts).replace(b" ,", b",")
            data = b"\n".join(lines)
        elif kind == 4 and lines:  # a field added or removed
            i = rng.randrange(len(lines))
            sep = b"," if b"," in lines[i] else b" "
            parts = lines[i].split(sep)
            if rng.random() < 0.5 and len(parts) > 1:
                del parts[rng.randrange(len(parts))]
            else:
                parts.insert(rng.randrange(len(parts) + 1), rng.choice(NUMBERS).encode())
            lines[i] = sep.join(parts)
            data = b"\n".join(lines)
        elif kind == 5:  # a line from another file
            other = open(os.path.join(d, rng.choice(files)), "rb").read().split(b"\n")
            if other and lines:
                lines.insert(rng.randrange(len(lines) + 1), rng.choice(other))
                data = b"\n".join(lines)
        elif kind == 6 and lines:  # a sidecar key with junk after it
            i = rng.randrange(len(lines))
            key = lines[i].split(b" ")[0]
            junk = rng.choice([b"", b" ", b" x", b" \xff\xfe", b" " + b"9" * 40,
                               b" 1 2 3 4 5 6 7 8 9 10 11 12", b" " + b"a" * 5000])
            lines.insert(i, key + junk)
            data = b"\n".join(lines)
        elif kind == 7:  # the order of the lines shuffled
            rng.shuffle(lines)
            data = b"\n".join(lines)
        else:  # an empty file
            data = b""
        with open(path, "wb") as f:
            f.write(data)


def commands(d, out, base):
    return [
        ["check", d],
        ["stats", d],
        ["stats", d, "--json"],
        ["stats", d, "--csv"],
        ["stats", d, "--skip-invalid", "--epoch", "1"],
        ["report", d, "-o", os.path.join(out, "r.html")],
        ["report", d, "--json"],
        ["viz", d, "-o", os.path.join(out, "t.json")],
        ["viz", d, "--skip-invalid", "-o", os.path.join(out, "t.pftrace")],
        ["whatif", d, "--workers", "4"],
        ["summarize", d, "-o", os.path.join(out, "s.lsum")],
        ["diff", base, d],
        ["top", d, "--once"],
    ]


def run_one(tool, args, timeout):
    try:
        p = subprocess.run([tool] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return "did not end within %d s" % timeout
    err = p.stderr.decode("utf-8", "replace")
    if p.returncode < 0:
        return "killed by signal %d: %s" % (-p.returncode, err[-2000:])
    if p.returncode not in (0, 1, 2, 3):
        return "exit code %d: %s" % (p.returncode, err[-2000:])
    for word in INTERNAL:
        if word in err:
            return "an internal message (%r): %s" % (word, err[-2000:])
    if p.returncode != 0 and p.returncode != 1 and "lotus-tool: error: " not in err:
        return "exit code %d without a 'lotus-tool: error:' line: %s" % (p.returncode, err[-2000:])
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tool")
    ap.add_argument("work")
    ap.add_argument("--mutants", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=int, default=60)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    base = os.path.join(a.work, "base")
    base_dir(base)
    out = os.path.join(a.work, "out")
    os.makedirs(out)
    # The intact directory: every command succeeds (else the mutants prove nothing).
    for args in commands(base, out, base):
        p = subprocess.run([a.tool] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=a.timeout)
        if p.returncode != 0:
            print("FAIL: the intact directory: %s -> %d: %s" % (" ".join(args), p.returncode,
                                                               p.stderr.decode()[-1500:]))
            return 1
    rng = random.Random(a.seed)
    failures = 0
    codes = {}
    for m in range(a.mutants):
        d = os.path.join(a.work, "m%d" % m)
        shutil.copytree(base, d)
        mutate(rng, d)
        for args in commands(d, out, base):
            why = run_one(a.tool, args, a.timeout)
            if why is not None:
                failures += 1
                print("FAIL: mutant %d (seed %d): lotus-tool %s: %s" % (m, a.seed, " ".join(args),
                                                                       why))
        shutil.rmtree(d)
    shutil.rmtree(a.work, ignore_errors=True)
    print("%d mutants x %d commands: %d failures" % (a.mutants, len(commands("", "", "")), failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
