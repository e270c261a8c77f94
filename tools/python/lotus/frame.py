# lotus — trace frames: Lotus trace directories as pandas and dask DataFrames
# SPDX-License-Identifier: MIT
"""Lotus traces as DataFrames (pure Python; pandas, and dask for ``read_dask``).

    import lotus.frame
    df = lotus.frame.read("run/trace")                  # pandas: one row per record
    ddf = lotus.frame.read_dask(["r0/trace", "r1/trace"])  # dask: one partition per trace file

Columns (``COLUMNS``): ``host`` (the sidecar's, else NA), ``rank`` (Int64: the sidecar's ``rank``,
else its parent's on the same host, else NA), ``pid`` and ``tid`` (the writer process and thread:
the file id, FORMAT.md §1), ``role`` (``"worker"`` or ``"main"``), ``op`` (the record name as in
the trace, ``S``-prefixed, without a batch index: ``SRandomResizedCrop``, ``SBatchWait``), ``batch``
(Int64: the index of ``SBatchPreprocessed_<i>``, ``SBatchQueued_<i>``, ``SBatchWait_<i>``,
``SBatchConsumed_<i>``; NA for op records), ``epoch`` (Int64: for those batch records the k-th
occurrence of index i of that kind in time order within one host and rank, as lotus-tool counts
epochs; NA for op records), ``start_ns``, ``dur_ns`` (int64). Malformed lines are skipped, as
lotus-tool skips them, and counted in ``df.attrs["skipped_lines"]`` (``read``): a number past
int64 (2^63 - 1) is malformed. Files are opened as lotus-tool opens them, so nothing can block: a
trace or sidecar name that is not a regular file (a FIFO, a device, a symbolic link: not
followed) is skipped with a ``UserWarning`` naming it.

``read_dask`` counts epochs within each partition (file): exact for main files (one per rank),
NA for ``SBatchPreprocessed`` (whose epochs span worker files); use ``read`` per directory for those.

pandas, dask and distributed are optional: ``import lotus`` works without them, and a frame
function raises ImportError naming the Debian package to install.
"""

import errno as _errno
import importlib as _importlib
import os as _os
import stat as _stat
import warnings as _warnings

__all__ = ["COLUMNS", "client", "files", "read", "read_dask"]

COLUMNS = ["host", "rank", "pid", "tid", "role", "op", "batch", "epoch", "start_ns", "dur_ns"]
_BATCH_KINDS = ("SBatchPreprocessed", "SBatchQueued", "SBatchWait", "SBatchConsumed")


def _need(module, debian):
    try:
        return _importlib.import_module(module)
    except ImportError as e:
        raise ImportError(
            f"lotus.frame needs {module}: install the Debian package {debian} "
            f"(apt-get install {debian})") from e


def _pandas():
    return _need("pandas", "python3-pandas")


_INT64_MAX = (1 << 63) - 1


def _open_regular(path):
    """A binary file object for `path` when it is a regular file, else None with a warning.

    Opened with O_NOFOLLOW | O_NONBLOCK (a FIFO's open cannot wait for a writer, a symbolic link
    is not followed) and checked with fstat, as lotus-tool does: a FIFO, /dev/zero or a link
    planted under a trace name is skipped instead of blocking or reading for ever."""
    flags = _os.O_RDONLY | _os.O_NOFOLLOW | _os.O_NONBLOCK | getattr(_os, "O_CLOEXEC", 0)
    try:
        fd = _os.open(path, flags)
    except OSError as e:
        why = "a symbolic link (not followed)" if e.errno == _errno.ELOOP else e.strerror
        _warnings.warn(f"lotus.frame: {path!r}: {why}: skipped", stacklevel=3)
        return None
    try:
        if not _stat.S_ISREG(_os.fstat(fd).st_mode):
            _warnings.warn(f"lotus.frame: {path!r}: not a regular file: skipped", stacklevel=3)
            _os.close(fd)
            return None
        _os.set_blocking(fd, True)
        return _os.fdopen(fd, "rb")
    except BaseException:
        _os.close(fd)
        raise


def _sidecars(directory):
    """{file name: (pid, host, rank)} from the directory's sidecars (FORMAT.md §5)."""
    procs = {}  # (pid) -> dict
    files = {}
    try:
        names = _os.listdir(directory)
    except OSError:
        return {}
    for name in names:
        if not name.startswith(".") or ".lotus-meta_" not in name:
            continue
        meta = {"pid": None, "ppid": None, "host": None, "rank": None, "files": []}
        try:
            f = _open_regular(_os.path.join(directory, name))
            if f is None:
                continue
            with f:
                for raw in f:
                    line = raw.decode("utf-8", "surrogateescape")
                    key, _, value = line.rstrip("\n").partition(" ")
                    if key in ("pid", "ppid", "rank") and value.isdigit():
                        meta[key] = int(value)
                    elif key == "host":
                        meta["host"] = value
                    elif key == "file":
                        meta["files"].append(value)
        except OSError:
            continue
        if meta["pid"] is not None:
            procs[(meta["pid"], meta["host"])] = meta
    for meta in procs.values():
        # A worker's rank is its own, else that of its parent chain on the same host.
        rank, cur, seen = meta["rank"], meta, set()
        while rank is None and cur is not None and cur["ppid"] is not None:
            if (cur["pid"], cur["host"]) in seen:
                break
            seen.add((cur["pid"], cur["host"]))
            cur = procs.get((cur["ppid"], cur["host"]))
            rank = cur["rank"] if cur is not None else None
        for fname in meta["files"]:
            files[fname] = (meta["pid"], meta["host"], rank)
    return files


def files(directory):
    """The trace files of a directory: [(path, role, tid, pid, host, rank)], sorted by name."""
    directory = _os.fspath(directory)
    owners = _sidecars(directory)
    out = []
    for name in sorted(_os.listdir(directory)):
        if name.startswith("."):
            continue
        role = "worker" if "_worker_pid_" in name else "main" if "_main_pid_" in name else None
        tid = name.rsplit("_", 1)[-1]
        if role is None or not tid.isdigit():
            continue
        pid, host, rank = owners.get(name, (int(tid), None, None))
        out.append((_os.path.join(directory, name), role, int(tid), pid, host, rank))
    return out


def _number(text):
    """A record's number (ASCII digits, at most int64), else None."""
    if not text.isdigit() or len(text) > 19:
        return None
    v = int(text)
    return v if v <= _INT64_MAX else None


def _parse(path):
    """(op, batch, start, dur) lists of one trace file and the count of malformed lines skipped
    (a file that is not a regular one: nothing read, a warning)."""
    ops, batches, starts, durs = [], [], [], []
    skipped = 0
    f = _open_regular(path)
    if f is None:
        return ops, batches, starts, durs, skipped
    with f:
        for raw in f:
            parts = raw.rstrip(b"\n").split(b",")
            if len(parts) != 3 or not parts[0].startswith(b"S"):
                skipped += 1 if raw.strip() else 0
                continue
            start, dur = _number(parts[1]), _number(parts[2])
            if start is None or dur is None:
                skipped += 1
                continue
            name = parts[0].decode("utf-8", "surrogateescape")
            batch = None
            if name.startswith("SBatch"):
                head, sep, idx = name.rpartition("_")
                if sep and idx.isdigit() and head in _BATCH_KINDS:
                    name, batch = head, int(idx)
            ops.append(name)
            batches.append(batch)
            starts.append(start)
            durs.append(dur)
    return ops, batches, starts, durs, skipped


def _frame(path, role, tid, pid, host, rank):
    pd = _pandas()
    ops, batches, starts, durs, skipped = _parse(path)
    n = len(ops)
    df = pd.DataFrame({
        "host": pd.Series([host] * n, dtype="object"),
        "rank": pd.Series([rank] * n, dtype="Int64"),
        "pid": pd.Series([pid] * n, dtype="int64"),
        "tid": pd.Series([tid] * n, dtype="int64"),
        "role": pd.Series([role] * n, dtype="object"),
        "op": pd.Series(ops, dtype="object"),
        "batch": pd.Series(batches, dtype="Int64"),
        "epoch": pd.Series([None] * n, dtype="Int64"),
        "start_ns": pd.Series(starts, dtype="int64"),
        "dur_ns": pd.Series(durs, dtype="int64"),
    })
    df.attrs["skipped_lines"] = skipped
    return df


def _epochs(df, kinds=_BATCH_KINDS):
    """Fills `epoch` of the batch records of `kinds`: the k-th occurrence of an index in time
    order, per host, rank and kind."""
    mask = df["batch"].notna() & df["op"].isin(list(kinds))
    if not mask.any():
        return df
    sub = df.loc[mask, ["host", "rank", "op", "batch", "start_ns"]].sort_values(
        "start_ns", kind="stable")
    keys = [sub["host"].fillna("\0"), sub["rank"].fillna(-1), sub["op"], sub["batch"]]
    df.loc[sub.index, "epoch"] = sub.groupby(keys, sort=False).cumcount().astype("Int64")
    return df


def read(directory):
    """One trace directory as a pandas DataFrame (COLUMNS), rows in file-name then file order."""
    pd = _pandas()
    parts = [_frame(*f) for f in files(directory)]
    skipped = sum(p.attrs.get("skipped_lines", 0) for p in parts)
    if not parts:
        df = _empty()
    else:
        df = _epochs(pd.concat(parts, ignore_index=True))
    df.attrs["skipped_lines"] = skipped
    return df


def _empty():
    pd = _pandas()
    return pd.DataFrame({
        "host": pd.Series([], dtype="object"), "rank": pd.Series([], dtype="Int64"),
        "pid": pd.Series([], dtype="int64"), "tid": pd.Series([], dtype="int64"),
        "role": pd.Series([], dtype="object"), "op": pd.Series([], dtype="object"),
        "batch": pd.Series([], dtype="Int64"), "epoch": pd.Series([], dtype="Int64"),
        "start_ns": pd.Series([], dtype="int64"), "dur_ns": pd.Series([], dtype="int64")})


def _file_frame(path, role, tid, pid, host, rank):
    df = _frame(path, role, tid, pid, host, rank)
    if role == "main":  # one main file holds all of a rank's Queued/Wait/Consumed records
        df = _epochs(df, ("SBatchQueued", "SBatchWait", "SBatchConsumed"))
    return df


def read_dask(paths):
    """Trace directories (one path or several) as one dask DataFrame, one partition per trace
    file. Listing and sidecars are read here; the records when the graph is computed."""
    _pandas()
    dd = _need("dask.dataframe", "python3-dask")
    from dask import delayed

    if isinstance(paths, (str, bytes)) or hasattr(paths, "__fspath__"):
        paths = [paths]
    specs = [f for p in paths for f in files(p)]
    meta = _empty()
    if not specs:
        return dd.from_pandas(meta, npartitions=1)
    parts = [delayed(_file_frame)(*f) for f in specs]
    return dd.from_delayed(parts, meta=meta, verify_meta=False)


def client(n_workers=2, processes=True, **kwargs):
    """A dask.distributed Client of a LocalCluster (n_workers processes by default), for
    computing read_dask frames in parallel; close it (``with`` or ``.close()``) when done."""
    distributed = _need("distributed", "python3-distributed")
    # The Client starts the LocalCluster and closes it with itself.
    return distributed.Client(n_workers=n_workers, processes=processes, threads_per_worker=1,
                              **kwargs)
