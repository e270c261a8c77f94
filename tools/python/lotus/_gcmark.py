# SPDX-License-Identifier: MIT
"""How far the program *without lotus* would be from its next full garbage collection when it
forks its workers (LOTUS_FORK_PROBE=1 only). Imports nothing of lotus; the standard library only.

CPython's collector (3.11-3.13, 3.14.5 on) runs a full collection once enough objects have
survived into its oldest generation since the last one. A forked worker inherits that count: the
number of allocations left before the next full collection (the *distance*) decides whether the
worker runs one, and pays for it (a full pass over the heap it inherited, copying every page it
touches). A traced program allocates lotus's own objects too (its modules, instrument()'s
patches), so its distance is not the untraced program's: on bench/zoo's tv_imagefolder lotus's
import made the traced main process run one more full collection, and its forked workers none,
where the untraced ones each ran one in their first batch.

So lotus measures the distance at the edges of its own work (its imports, instrument(), the fork
probe) and sums the program's own use of it in between: the untraced distance is the distance
before lotus's import less what the program used since, where no full collection ran in the
program's own code (else it is not known). `distance()` measures it in a fork of this process,
which allocates (and keeps) empty lists until the collector starts a full collection. A mark
costs a fork of the process (20 ms for a process with torch imported) and the count; a block
that begins where the last one ended (`import lotus.torch` right after `import lotus`) reuses
the last figure. The fork probe's work (what it reads of the loader, its child's report, its
figures) and lotus's own part of the probed iterator's start (its record, its gate) are a block of
their own, ended just before torch's iterator runs: without it, on bench/zoo's pipelines 600-1000
allocations of lotus's own were the program's, the untraced distance at the first worker's fork
that many short of the one its untraced run measured (bench/zoo/fork_gc.py). That fork, where the
program's code (torch's iterator) ran since the block, is an edge of no length (fork_edge).
"""

import gc
import os
import sys

# Allocations a distance is counted to at most (an empty list each: about 25 MB in the child).
LIMIT = 400_000
_TIMEOUT_S = 5.0
# Allocations the program may make between two of lotus's blocks (its collector's count moving
# no more, no collection run) for the interval to count as none (the last figure reused).
_QUIET = 256

_state = {
    "on": None,        # marks are taken (decided at the first mark)
    "depth": 0,        # nesting of lotus's own blocks
    "started": False,  # the first edge (before any of lotus's work) was taken
    "virtual": None,   # the untraced distance at the last edge (None: not known)
    "clipped": 0,      # distances of the chain that reached LIMIT (counted to it, no further)
    "measured": 0,     # distances of the chain
    "last": None,      # (distance, full collections seen) at the end of lotus's last block
    "quiet": None,     # the collector's counts at that end (a cheap look, no fork)
}
_full = [0]  # full collections this process ran since the first mark
_children = []  # counting children not yet reaped (they exit as they report)


def _on_gc(phase, info):
    if phase == "stop" and info.get("generation") == 2:
        _full[0] += 1


def generational():
    """This interpreter's collector is the generational one the distance describes: every CPython
    but 3.14.0-3.14.4, whose incremental collector's automatic collections take the young
    generation and an increment of the old, never a whole pass (3.14.5 restored 3.13's collector,
    cpython gh-148726). There the distance is not measured, and whether a forked worker runs a
    full collection is not decided."""
    return not ((3, 14, 0) <= tuple(sys.version_info[:3]) < (3, 14, 5))


def _wanted():
    if os.environ.get("LOTUS_FORK_PROBE", "") != "1" or not hasattr(os, "fork") \
            or not gc.isenabled() or not generational():
        return False
    # A spawned or forkserver worker importing lotus (unpickling its loader's objects): not the
    # program's main process. Its main module is __mp_main__, and while it unpickles what its
    # parent sent, its process object is `_inheriting` (parent_process() is set only after).
    if getattr(sys.modules.get("__main__"), "__name__", "") == "__mp_main__":
        return False
    # The script's imports run as __mp_main__ (a forkserver's server preloading it, a spawned
    # worker's preparation): lotus imported from there.
    f = sys._getframe(1)
    while f is not None:
        if f.f_globals.get("__name__") == "__mp_main__":
            return False
        f = f.f_back
    mp = sys.modules.get("multiprocessing")
    try:
        if mp is not None and (mp.parent_process() is not None
                               or getattr(mp.current_process(), "_inheriting", False)):
            return False
    except Exception:  # noqa: BLE001
        return False
    return True


def _reap():
    for pid in list(_children):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            _children.remove(pid)


def distance(limit=LIMIT):
    """(allocations to the next full collection, reached): measured in a fork of this process,
    which keeps empty lists until the collector starts a full collection (and leaves there,
    before running it); reached False when `limit` allocations did not get there. None when it
    could not be measured. The child is reaped later (it leaves as it reports)."""
    if not hasattr(os, "fork"):
        return None
    import select
    import signal
    import time
    _reap()
    r, w = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        return None
    if pid == 0:  # the child: count, report, leave without the parent's exit handlers
        try:
            os.close(r)
            keep = []

            def cb(phase, info):
                if phase == "start" and info.get("generation") == 2:
                    os.write(w, b"%d 1" % len(keep))
                    os._exit(0)
            gc.callbacks.append(cb)
            while len(keep) < limit:
                keep.append([])
            os.write(w, b"%d 0" % len(keep))
        finally:
            os._exit(0)
    os.close(w)
    data, deadline = b"", time.monotonic() + _TIMEOUT_S
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([r], [], [], left)[0]:
                os.kill(pid, signal.SIGKILL)
                data = b""
                break
            chunk = os.read(r, 64)
            if not chunk:
                break
            data += chunk
    finally:
        os.close(r)
        _children.append(pid)
        _reap()
    try:
        n, hit = (int(x) for x in data.split())
    except ValueError:
        return None
    return n, bool(hit)


def _look():
    """The collector's counts (no fork): how much the program did since a block's end."""
    return gc.get_count()[0], tuple(s.get("collections", 0) for s in gc.get_stats())


def _count(d):
    """A measured distance into the chain: its figure, or None (the untraced distance is then
    not known from here on)."""
    st = _state
    if d is None:
        st["virtual"] = None
        return None
    st["measured"] += 1
    if not d[1]:
        st["clipped"] += 1
    return d[0]


def _carry(n):
    """From the program's code into lotus's, where this process's distance is now `n`: the
    untraced distance carried over the program's code since lotus's last block (its own use of
    the distance, where it ran no full collection)."""
    st = _state
    if n is None:
        return
    if not st["started"]:  # lotus's first block: nothing of lotus has run yet
        st["started"] = True
        st["virtual"] = n
    elif st["virtual"] is not None and st["last"] is not None:
        before, full = st["last"]
        st["virtual"] -= before - n
        # A full collection in the program's own code (the traced one ran it) or one the
        # untraced program would have run there: its distance is not known after it.
        if _full[0] != full or st["virtual"] < 0:
            st["virtual"] = None
    else:
        st["virtual"] = None


def begin():
    """lotus's own work begins (an import of its package or lotus.torch, instrument())."""
    st = _state
    if st["on"] is None:
        st["on"] = _wanted()
        if st["on"]:
            gc.callbacks.append(_on_gc)
    if not st["on"]:
        return
    st["depth"] += 1
    if st["depth"] != 1:
        return
    if st["started"] and st["quiet"] is not None and st["last"] is not None:
        count0, colls = _look()
        if colls == st["quiet"][1] and abs(count0 - st["quiet"][0]) < _QUIET:
            return  # the program did next to nothing since lotus's last block: one block
    if not st["started"]:
        st["started"] = True
        st["virtual"] = _count(distance())
    else:
        _carry(_count(distance()))


def end(mark=True):
    """lotus's own work ends: the program's code runs from here. mark=False: no distance taken
    (nothing will be carried from here: the untraced distance is not known after it)."""
    st = _state
    if not st["on"] or st["depth"] == 0:
        return
    st["depth"] -= 1
    if st["depth"] == 0:
        n = _count(distance()) if mark else None
        st["last"] = (n, _full[0]) if n is not None else None
        st["quiet"] = _look() if n is not None else None


def full_count():
    """Full collections this process ran since the first mark (for fork_edge)."""
    return _full[0]


def untraced():
    """(distance, exact) of the untraced program at the last edge: exact where no distance of the
    chain reached LIMIT; where every one did, (LIMIT, False): at least that far; else None."""
    st = _state
    if st["virtual"] is None or not st["measured"]:
        return None
    if st["clipped"] == 0:
        return st["virtual"], True
    if st["clipped"] == st["measured"]:
        return LIMIT, False
    return None


def wanted_here():
    """Marks are taken in this process (LOTUS_FORK_PROBE=1, its main process) and lotus's first
    block was marked: a fork probe's child measures its own distance for fork_edge."""
    st = _state
    return bool(st["on"]) and st["started"]


def fork_edge(d, full):
    """A fork probe (lotus's work, a block of no length) whose child measured `d` (distance())
    as it forked, when this process had run `full` full collections: the untraced distance at
    that fork, untraced()'s (distance, exact) or None."""
    st = _state
    if not wanted_here():
        return None
    if st["depth"] > 0:
        # A fork inside lotus's own block (the fork probe's, its work around the fork a block of
        # its own: begin() carried the program's use up to it): what the process allocated since
        # is lotus's, and the untraced distance the block's.
        return untraced()
    if d is None or full != _full[0]:  # (one ran while the probe's child worked: not known)
        st["virtual"] = None
        st["last"] = None
        return None
    n = _count(d)
    _carry(n)
    st["last"] = (n, full)
    st["quiet"] = _look()
    return untraced()
