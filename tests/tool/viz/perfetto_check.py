#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Independent check of `lotus-tool viz -o X.pftrace` against the trace files it was made from.

    perfetto_check.py TOOL PROTO TRACE_DIR... [--compress] [--expect-ranks N]

A protobuf wire-format reader of its own (no Perfetto code, no lotus-tool code) decodes the output:
sequences with their incremental clocks (a sequence id may start several generations, each with
SEQ_INCREMENTAL_STATE_CLEARED), packet defaults and interned names; slices from BEGIN/END pairs per
track; counter values (int64 or double) and the extra counter values of other tracks. It checks that every record of the trace files is exactly one slice with its name,
start and duration; that each file's slices are on its thread's tracks; that flows connect the
batch records of one (trace part, epoch, index) in life-cycle order; that every out-of-order marker
has its instant; and that the counter tracks equal a brute-force recount from the records. It also
runs `protoc --decode` with the project's .proto and compares the packet count. Exit 0 when all
holds, 1 with the first difference.
"""
import bisect
import collections
import os
import re
import struct
import subprocess
import sys
import tempfile
import zlib


def varint(buf, i):
    v = shift = 0
    while True:
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        if b < 0x80:
            return v, i
        shift += 7


def fields(buf):
    """[(field, wire, value)] of one message; value: int for varint/fixed, bytes for LEN."""
    out, i = [], 0
    while i < len(buf):
        key, i = varint(buf, i)
        f, w = key >> 3, key & 7
        if w == 0:
            v, i = varint(buf, i)
        elif w == 1:
            v, i = int.from_bytes(buf[i:i + 8], "little"), i + 8
        elif w == 5:
            v, i = int.from_bytes(buf[i:i + 4], "little"), i + 4
        elif w == 2:
            n, i = varint(buf, i)
            v, i = bytes(buf[i:i + n]), i + n
        else:
            raise ValueError(f"wire type {w}")
        out.append((f, w, v))
    return out


def one(fs, num, default=None):
    vals = [v for f, _, v in fs if f == num]
    return vals[-1] if vals else default


def many(fs, num):
    return [v for f, _, v in fs if f == num]


def signed(v):
    return v - (1 << 64) if v >= 1 << 63 else v


def packets(data):
    for f, _, v in fields(data):
        assert f == 1, f"Trace has field {f}"
        p = fields(v)
        comp = one(p, 50)
        if comp is not None:
            yield from packets(zlib.decompress(comp))
        else:
            yield p


def decode(data):
    tracks = {}  # uuid -> dict(kind, name, pid, tid, parent)
    seqs = {}    # seq -> state
    slices, instants, counters = [], [], collections.defaultdict(list)
    flows = collections.defaultdict(list)  # flow id -> [(ts, name, terminating)]
    count = 0
    for p in packets(data):
        count += 1
        seq = one(p, 10, 0)
        td = one(p, 60)
        if td is not None:
            t = fields(td)
            uuid = one(t, 1)
            info = {"name": (one(t, 2) or b"").decode(), "parent": one(t, 5, 0)}
            if one(t, 3) is not None:
                pd = fields(one(t, 3))
                info.update(kind="process", pid=signed(one(pd, 1, 0)), name=one(pd, 6, b"").decode())
            elif one(t, 4) is not None:
                th = fields(one(t, 4))
                info.update(kind="thread", pid=signed(one(th, 1, 0)), tid=signed(one(th, 2, 0)),
                            name=one(th, 5, b"").decode())
            elif one(t, 8) is not None:
                info.update(kind="counter")
            else:
                info.update(kind="child")
            assert uuid not in tracks, f"track {uuid} described twice"
            tracks[uuid] = info
            continue
        st = seqs.setdefault(seq, {"names": {}, "clock": None, "last": None, "track": None,
                                   "default_clock": None, "stacks": collections.defaultdict(list)})
        if one(p, 13, 0) & 1:
            st["names"] = {}
        d = one(p, 59)
        if d is not None:
            df = fields(d)
            st["default_clock"] = one(df, 58)
            ted = one(df, 11)
            st["track"] = one(fields(ted), 11) if ted is not None else None
            st["extra"] = many(fields(ted), 31) if ted is not None else []
        cs = one(p, 6)
        if cs is not None:
            for c in many(fields(cs), 1):
                cf = fields(c)
                if one(cf, 1) == 64:
                    assert one(cf, 3) == 1, "clock 64 must be incremental"
                    st["last"] = one(cf, 2)
            assert one(fields(cs), 2) == 1, "primary trace clock must be REALTIME"
            continue
        idata = one(p, 12)
        if idata is not None:
            for en in many(fields(idata), 2):
                ef = fields(en)
                st["names"][one(ef, 1)] = one(ef, 2, b"").decode("utf-8", "surrogateescape")
        te = one(p, 11)
        if te is None:
            continue
        clock = one(p, 58, st["default_clock"])
        assert clock == 64, f"track event on clock {clock}"
        ts = st["last"] + one(p, 8)
        st["last"] = ts
        e = fields(te)
        track = one(e, 11, st["track"])
        typ = one(e, 9)
        name = None
        if typ in (1, 3):
            raw = one(e, 23)
            name = raw.decode("utf-8", "surrogateescape") if raw is not None else st["names"][one(e, 10)]
            for fid in many(e, 47):
                flows[fid].append((ts, name, False))
            for fid in many(e, 48):
                flows[fid].append((ts, name, True))
        if typ == 1:
            st["stacks"][track].append((name, ts))
        elif typ == 2:
            name, start = st["stacks"][track].pop()
            slices.append((track, name, start, ts - start))
        elif typ == 3:
            instants.append((track, name, ts))
        elif typ == 4:
            dbl = one(e, 44)  # double_counter_value (fixed64 bits)
            if dbl is not None:
                v = struct.unpack("<d", dbl.to_bytes(8, "little"))[0]
                assert v == int(v), f"counter value {v}"
                counters[track].append((ts, int(v)))
            else:
                counters[track].append((ts, signed(one(e, 30, 0))))
        else:
            raise AssertionError(f"event type {typ}")
        # Extra counter values: for the event's extra_counter_track_uuids, else the defaults'.
        extra_values = many(e, 12)
        if extra_values:
            uuids = many(e, 31) or st.get("extra", [])
            assert len(extra_values) <= len(uuids), "more extra counter values than tracks"
            for u, v in zip(uuids, extra_values):
                counters[u].append((ts, signed(v)))
    for st in seqs.values():
        for track, stack in st["stacks"].items():
            assert not stack, f"unclosed slices on track {track}: {stack[:3]}"
    return tracks, slices, instants, counters, flows, count


def read_records(dirs):
    """{(dir, file): [(name, start, dur)]} of every trace file (hidden sidecars skipped)."""
    out = {}
    pat = re.compile(r"_(worker|main)_pid_(r\d+_)?(\d+)$")
    for d in dirs:
        for n in sorted(os.listdir(d)):
            if n.startswith(".") or not pat.search(n):
                continue
            rows = []
            with open(os.path.join(d, n), "rb") as f:
                for line in f.read().decode("utf-8", "surrogateescape").splitlines():
                    name, start, dur = line.rsplit(",", 2)
                    rows.append((name, int(start), int(dur)))
            out[(d, n)] = rows
    return out


def parts(recs):
    """(dir, file) -> ("rank", r) from the sidecars (a process's rank, else its parent's), or None."""
    out = {}
    for d in {d for d, _ in recs}:
        meta, owner = {}, {}
        for n in os.listdir(d):
            if not (n.startswith(".") and ".lotus-meta_" in n):
                continue
            m = {"ppid": None, "rank": None}
            pid = None
            for line in open(os.path.join(d, n), encoding="utf-8", errors="replace"):
                k, _, v = line.rstrip("\n").partition(" ")
                if k == "pid":
                    pid = int(v)
                elif k == "ppid":
                    m["ppid"] = int(v)
                elif k == "rank":
                    m["rank"] = int(v)
                elif k == "file":
                    owner[v] = n
            if pid is not None:
                meta[pid] = m
                for f, side in list(owner.items()):
                    if side == n:
                        owner[f] = pid
        for (dd, f) in recs:
            if dd != d:
                continue
            pid = owner.get(f)
            if not isinstance(pid, int):
                pid = int(re.search(r"(\d+)$", f).group(1))
            rank, hops = None, 0
            while pid in meta and hops < 10:
                if meta[pid]["rank"] is not None:
                    rank = meta[pid]["rank"]
                    break
                pid, hops = meta[pid]["ppid"], hops + 1
            out[(dd, f)] = ("rank", rank) if rank is not None else None
    return out


def batch(name):
    m = re.match(r"^SBatch(Queued|Preprocessed|Wait|Consumed)_(\d+)$", name)
    return (m.group(1), int(m.group(2))) if m else None


def check(tool, proto, dirs, compress):
    recs = read_records(dirs)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "run.pftrace")
        args = [tool, "viz", *dirs, "-o", out] + (["--compress"] if compress else [])
        r = subprocess.run(args, capture_output=True, text=True)
        assert r.returncode == 0, f"viz failed: {r.stderr}"
        data = open(out, "rb").read()
        if not compress:
            pr = subprocess.run(["protoc", f"--decode=perfetto.protos.Trace",
                                 f"-I{os.path.dirname(proto)}", os.path.basename(proto)],
                                input=data, capture_output=True)
            assert pr.returncode == 0, f"protoc --decode failed: {pr.stderr.decode()}"
            text = pr.stdout.decode("utf-8", "replace")
            assert "\n1: " not in text and not re.search(r"^\s*\d+: ", text, re.M), \
                "protoc found fields the .proto does not declare"
    tracks, slices, instants, counters, flows, count = decode(data)
    if not compress:
        assert text.count("\npacket {") + text.startswith("packet {") == count, "packet counts differ"

    # 1. Every record is exactly one slice (name, start, duration), and on its thread's tracks.
    want = collections.Counter((n, s, d) for rows in recs.values() for n, s, d in rows)
    got = collections.Counter((n, s, d) for _, n, s, d in slices)
    assert want == got, f"records vs slices differ: missing {list((want - got).items())[:5]}, extra {list((got - want).items())[:5]}"
    thread_of_track = {}
    for uuid, t in tracks.items():
        if t["kind"] == "thread":
            thread_of_track[uuid] = t["tid"]
    for uuid, t in tracks.items():
        if t["kind"] == "child" and t["parent"] in thread_of_track:
            thread_of_track[uuid] = thread_of_track[t["parent"]]
    by_tid = collections.defaultdict(collections.Counter)
    for track, n, s, d in slices:
        by_tid[thread_of_track[track]][(n, s, d)] += 1
    for (d, f), rows in recs.items():
        tid = int(re.search(r"(\d+)$", f).group(1))
        missing = collections.Counter(rows) - by_tid[tid]
        assert not missing, f"{f}: records not on thread {tid}: {list(missing)[:3]}"

    # 2. Out-of-order markers: one instant each.
    markers = sum(1 for rows in recs.values() for n, s, d in rows
                  if d == 1000 and (batch(n) or ("",))[0] == "Wait")
    assert len([i for i in instants if i[1] == "out-of-order arrival"]) == markers

    # 3. Flows: each batch record in exactly one flow; a flow holds one index, in life-cycle order,
    # terminating at its SBatchConsumed.
    order = {"Queued": 0, "Preprocessed": 1, "Wait": 2, "Consumed": 3}
    in_flows = 0
    for fid, evs in flows.items():
        evs.sort()
        idxs = {batch(n)[1] for _, n, _ in evs}
        assert len(idxs) == 1, f"flow {fid} joins indices {idxs}"
        kinds = [batch(n)[0] for _, n, _ in evs]
        # Perfetto draws a flow through its slices in time order. The wait often begins before
        # the preprocessing, and a worker may start before the loader's SBatchQueued record is
        # taken, so the one order that always holds is: the batch is consumed last.
        if "Consumed" in kinds:
            assert kinds[-1] == "Consumed", f"flow {fid}: consumed before {kinds}"
        assert len(set(kinds)) == len(kinds), f"flow {fid} repeats a kind: {kinds}"
        for _, n, term in evs:
            assert term == (batch(n)[0] == "Consumed"), (n, term)
        in_flows += len(evs)
    batch_records = sum(1 for rows in recs.values() for n, _, _ in rows if batch(n))
    assert in_flows == batch_records, f"{in_flows} flow events for {batch_records} batch records"

    # 4. Counters equal a brute-force recount from the records (of the whole run: one part).
    names = {uuid: t["name"] for uuid, t in tracks.items() if t["kind"] == "counter"}
    assert len(counters) == len(names)
    rows_all = [(n, s, d) for rows in recs.values() for n, s, d in rows]
    part_of = parts(recs)
    for uuid, values in counters.items():
        name = names[uuid]
        part_rows = rows_all
        if ": " in name:  # several parts: only that part's directory or rank is counted
            label = name.split(": ")[0]
            m = re.search(r"rank (\d+)", label)
            key = ("rank", int(m.group(1))) if m else None
            part_rows = [(n, s, d) for (dd, f), rows in recs.items() for n, s, d in rows
                         if part_of[(dd, f)] == key or (key is None and os.path.basename(dd) in label)]
            assert part_rows, f"no records for counter track {name}"
        # Brute force, but by bisection over the sorted times of each kind.
        def times(kind, at_end):
            return sorted(s + d if at_end else s for n, s, d in part_rows
                          if (batch(n) or ("",))[0] == kind)
        q_t, pe_t, ps_t, c_t = (times("Queued", False), times("Preprocessed", True),
                                times("Preprocessed", False), times("Consumed", False))
        for ts, v in values:
            q, p_end, p_start, c = (bisect.bisect_right(x, ts) for x in (q_t, pe_t, ps_t, c_t))
            expect = {"batches in flight": q - p_end, "batches ready": p_end - c,
                      "busy workers": p_start - p_end}[name.split(": ")[-1].split(" (")[0]]
            assert v == expect, f"{name} at {ts}: {v}, recount {expect}"
    return len(slices), len(data), len(counters), len(flows)


def main():
    args = sys.argv[1:]
    compress = "--compress" in args
    args = [a for a in args if a != "--compress"]
    tool, proto, dirs = args[0], args[1], args[2:]
    n, size, ncounters, nflows = check(tool, proto, dirs, compress)
    print(f"perfetto_check: {n} records = {n} slices, {size} bytes ({size / max(n, 1):.1f} per "
          f"record), {ncounters} counter tracks, {nflows} flows: ok")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print(f"perfetto_check: FAILED: {e}", file=sys.stderr)
        sys.exit(1)
