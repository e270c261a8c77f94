# lotus — trace frames: Lotus trace directories as pandas and dask DataFrames
# SPDX-License-Identifier: MIT
"""Lotus traces as DataFrames (pandas, and dask for ``read_dask``), parsed by the native reader.

    import lotus.frame
    df = lotus.frame.read("run/trace")                     # pandas: one row per record
    ddf = lotus.frame.read_dask(["r0/trace", "r1/trace"])  # dask: whole directories, <= 16 MiB each

Columns (``COLUMNS``): ``host`` (the sidecar's, else NA), ``rank`` (Int64: the sidecar's ``rank``,
else its parent's on the same host, else NA), ``pid`` and ``tid`` (the writer process and thread:
the file id, FORMAT.md §1), ``role`` (``"worker"`` or ``"main"``), ``op`` (the record name as in
the trace, ``S``-prefixed, without a batch index: ``SRandomResizedCrop``, ``SBatchWait``), ``batch``
(Int64: the index of ``SBatchPreprocessed_<i>``, ``SBatchQueued_<i>``, ``SBatchWait_<i>``,
``SBatchConsumed_<i>``; NA for op records), ``epoch`` (Int64: a batch record's epoch by lotus-tool's
definition, the one ``diff`` and ``summarize`` cut: a main file's records from a DataLoader
iterator's first ``SBatchQueued`` (or its ``iter(loader)``, the sidecar's ``startup`` line) to its
last ``SBatchConsumed``, numbered from 0 in that file; a batch record of another file (a worker's
``SBatchPreprocessed``) takes the epoch of its host and rank's main files begun last at or before
its start; NA for op records, for the records of an epoch lotus-tool drops (nothing consumed) and
where no main file has epochs), ``start_ns``, ``dur_ns`` (int64). Nothing is parsed in Python:
the directory listing, the sidecars' identity lines, the records and the epochs are lotus-tool's
format library, compiled into the module (``lotus._lotus._trace_files``, ``_read_traces``).
Blanks around a number and a CRLF line end are accepted; every line ``lotus-tool stats
--skip-invalid`` skips is skipped and counted in ``df.attrs["skipped_lines"]`` (``read``): an
empty line, a number past int64 (2^63 - 1), a batch record without a decimal index, a last line
without its newline (a writer still writing). Files are opened as lotus-tool opens them, so
nothing can block: a trace or sidecar name that is not a regular file (a FIFO, a device, a
symbolic link to one) is skipped with a ``UserWarning`` naming it.

``read_dask`` packs whole directories into partitions of at most ``partition_bytes`` of trace
files (``partitions``: only the directories are listed when the frame is made; each partition
reads its sidecars and parses its files in one native call when computed), and counts epochs as
``read`` does, per directory. A directory larger than ``partition_bytes`` is split by files; its
epochs are then counted per main file (exact: one a rank) and NA in its worker files.

pandas, dask and distributed are optional: ``import lotus`` works without them, and a frame
function raises ImportError naming the Debian package to install.
"""

import importlib as _importlib
import os as _os
import warnings as _warnings

from . import _lotus

__all__ = ["COLUMNS", "PARTITION_BYTES", "client", "files", "partitions", "read", "read_dask"]

COLUMNS = ["host", "rank", "pid", "tid", "role", "op", "batch", "epoch", "start_ns", "dur_ns"]


def _need(module, debian):
    try:
        return _importlib.import_module(module)
    except ImportError as e:
        raise ImportError(
            f"lotus.frame needs {module}: install the Debian package {debian} "
            f"(apt-get install {debian})") from e


def _pandas():
    return _need("pandas", "python3-pandas")


def _listing(directory, sidecars=True):
    """The trace files of `directory` by lotus-tool's rules (its format library, in the module):
    [(path, role, tid, pid, host, rank, startups, size)], sorted by name. A sidecar that cannot
    be read (not a regular file, ...) is skipped with a warning naming it."""
    directory = _os.fspath(directory)
    rows, unread = _lotus._trace_files(_os.fsencode(directory), sidecars)
    for name, why in unread:
        path = _os.path.join(directory, _os.fsdecode(name))
        _warnings.warn(f"lotus.frame: {path!r}: {why}: skipped", stacklevel=3)
    return [(_os.path.join(directory, _os.fsdecode(name)), role, tid, pid, host, rank, startups,
             size) for name, role, tid, size, pid, host, rank, startups in rows]


def files(directory):
    """The trace files of a directory: [(path, role, tid, pid, host, rank)], sorted by name."""
    return [f[:6] for f in _listing(directory)]


class _Partition:
    """One partition of read_dask: whole directories (names None) or some files of one
    directory, as (directory, names) pairs. An object of its own, so that dask passes it to the
    reader as it is (it reads a tuple or a string in a task as keys to look up)."""

    __slots__ = ("parts",)

    def __init__(self, parts):
        self.parts = tuple(parts)

    def __reduce__(self):
        return (_Partition, (self.parts,))

    def __dask_tokenize__(self):
        return self.parts

    def __repr__(self):
        return f"_Partition({len(self.parts)} directories)"


def _columns(specs, groups):
    """The records of the files `specs` (_listing's) as one pandas DataFrame (COLUMNS), parsed by
    the native reader; a worker file's `epoch` taken from the main files of its group (groups:
    one int per file, -1: NA). attrs["skipped_lines"]: the malformed lines skipped."""
    pd = _pandas()
    import numpy as np

    (names, code, batch, epoch, start, dur, rows, skipped,
     why) = _lotus._read_traces([_os.fsencode(s[0]) for s in specs], groups,
                                [s[1] == "main" for s in specs], [s[6] for s in specs])
    for s, w in zip(specs, why):
        if w is not None:
            _warnings.warn(f"lotus.frame: {s[0]!r}: {w}: skipped", stacklevel=3)
    rows = np.frombuffer(rows, np.int64)

    def per_file(values, dtype):
        return np.repeat(np.array(values, dtype=dtype), rows)

    ranks = [s[5] for s in specs]
    batch = np.frombuffer(batch, np.int64)
    epoch = np.frombuffer(epoch, np.int64)
    df = pd.DataFrame({
        "host": per_file([s[4] for s in specs], object),
        "rank": pd.arrays.IntegerArray(per_file([r or 0 for r in ranks], np.int64),
                                       per_file([r is None for r in ranks], bool)),
        "pid": per_file([s[3] for s in specs], np.int64),
        "tid": per_file([s[2] for s in specs], np.int64),
        "role": per_file([s[1] for s in specs], object),
        "op": np.array(names, dtype=object)[np.frombuffer(code, np.int32)],
        "batch": pd.arrays.IntegerArray(batch, batch < 0),
        "epoch": pd.arrays.IntegerArray(epoch, epoch < 0),
        "start_ns": np.frombuffer(start, np.int64),
        "dur_ns": np.frombuffer(dur, np.int64),
    })
    df.attrs["skipped_lines"] = int(np.frombuffer(skipped, np.int64).sum())
    return df


def _rank_groups(specs, first=0):
    """One epoch group per (host, rank) of the files, numbered from `first`."""
    ids = {}
    return [ids.setdefault((s[4], s[5]), first + len(ids)) for s in specs]


def read(directory):
    """One trace directory as a pandas DataFrame (COLUMNS), rows in file-name then file order."""
    _pandas()
    specs = _listing(directory)
    return _columns(specs, _rank_groups(specs))


def _empty():
    pd = _pandas()
    return pd.DataFrame({
        "host": pd.Series([], dtype="object"), "rank": pd.Series([], dtype="Int64"),
        "pid": pd.Series([], dtype="int64"), "tid": pd.Series([], dtype="int64"),
        "role": pd.Series([], dtype="object"), "op": pd.Series([], dtype="object"),
        "batch": pd.Series([], dtype="Int64"), "epoch": pd.Series([], dtype="Int64"),
        "start_ns": pd.Series([], dtype="int64"), "dur_ns": pd.Series([], dtype="int64")})


def _read_partition(part):
    """One read_dask partition: its directories' sidecars and listing read here (in the dask
    worker), every file parsed by one call of the native reader."""
    specs, groups, first = [], [], 0
    for directory, names in part.parts:
        fs = _listing(directory)
        if names is None:  # a whole directory: epochs per host and rank, as read() counts them
            mine = _rank_groups(fs, first)
        else:  # a directory split by files: each main file's own epochs, NA elsewhere
            wanted = set(names)
            fs = [f for f in fs if _os.path.basename(f[0]) in wanted]
            mine = [first + i if f[1] == "main" else -1 for i, f in enumerate(fs)]
        first = max([first - 1, *mine]) + 1
        specs += fs
        groups += mine
    return _columns(specs, groups)


PARTITION_BYTES = 16 << 20


def partitions(paths, partition_bytes=PARTITION_BYTES):
    """read_dask's plan: the trace directories `paths` packed, in order, into partitions of at most
    `partition_bytes` of trace files each. A directory is never split unless it alone is larger,
    and then it is split by files (a single file larger than the bound is a partition of its own).
    Only the directories are listed here (names and sizes): sidecars and records are read by the
    partitions. Returns a list of partitions, each a tuple of (directory, names) pairs, names None
    for a whole directory."""
    if isinstance(paths, (str, bytes)) or hasattr(paths, "__fspath__"):
        paths = [paths]
    out, cur, cur_bytes = [], [], 0

    def close():
        nonlocal cur, cur_bytes
        if cur:
            out.append(tuple(cur))
        cur, cur_bytes = [], 0

    for directory in paths:
        directory = _os.fspath(directory)
        sizes = [(_os.path.basename(f[0]), f[7]) for f in _listing(directory, sidecars=False)]
        total = sum(n for _, n in sizes)
        if total <= partition_bytes:
            if cur_bytes + total > partition_bytes:
                close()
            cur.append((directory, None))
            cur_bytes += total
            continue
        close()
        names, nbytes = [], 0
        for name, n in sizes:
            if names and nbytes + n > partition_bytes:
                out.append(((directory, tuple(names)),))
                names, nbytes = [], 0
            names.append(name)
            nbytes += n
        out.append(((directory, tuple(names)),))
    close()
    return out


def read_dask(paths, partition_bytes=PARTITION_BYTES):
    """Trace directories (one path or several) as one dask DataFrame: partitions of at most
    `partition_bytes` of trace files (``partitions``), each parsed by the native reader when the
    graph is computed. Only the directories are listed here."""
    _pandas()
    dd = _need("dask.dataframe", "python3-dask")
    plan = partitions(paths, partition_bytes)
    meta = _empty()
    if not plan:
        return dd.from_pandas(meta, npartitions=1)
    return dd.from_map(_read_partition, [_Partition(p) for p in plan], meta=meta,
                       enforce_metadata=False,
                       label="lotus-frame-read")


def client(n_workers=2, processes=True, **kwargs):
    """A dask.distributed Client of a LocalCluster (n_workers processes by default), for
    computing read_dask frames in parallel; close it (``with`` or ``.close()``) when done."""
    distributed = _need("distributed", "python3-distributed")
    # The Client starts the LocalCluster and closes it with itself.
    return distributed.Client(n_workers=n_workers, processes=processes, threads_per_worker=1,
                              **kwargs)
