# SPDX-License-Identifier: MIT
"""The lotus Python module: scope, decorator, configure, environment, fork, map_region, collector,
BatchTracker and clean exceptions for bad arguments. Tracing tests run in a fresh interpreter."""
import os

import pytest

from conftest import read_trace, run_python

import lotus


def test_scope_decorator_and_stats_exact(tmp_path):
    code = f"""
import lotus, os
lotus.configure(log_file={str(tmp_path / 't' / 'log')!r})
with lotus.scope("A"):
    with lotus.scope("B"):
        pass
@lotus.scope("C")
def f(x):
    "doc of f"
    return x + 1
@lotus.traced
def g():
    raise KeyError("x")
assert f(1) == 2 and f.__name__ == "f" and f.__doc__ == "doc of f"
try:
    g()
except KeyError:
    pass
with lotus.scope("a,b"):
    pass
lotus.flush()
s = lotus.stats()
print(os.getpid(), s.recorded, s.written, s.dropped, s.sanitized)
"""
    pid, rec, wr, drop, san = map(int, run_python(code).stdout.split())
    files = read_trace(tmp_path / "t")
    assert list(files) == [f"log_worker_pid_{pid}"]
    rows = files[f"log_worker_pid_{pid}"]
    assert [r[0] for r in rows] == ["SB", "SA", "SC", "Sg", "Sa_b"]  # inner first, at scope exit
    a, b = rows[1], rows[0]
    assert a[1] <= b[1] and b[1] + b[2] <= a[1] + a[2]
    assert (rec, wr, drop, san) == (5, 5, 0, 1)


def test_environment_variables(tmp_path):
    code = "import lotus\nwith lotus.scope('E'): pass\nprint(lotus.tracing_enabled())"
    r = run_python(code, env={"LOTUS_LOG_FILE": str(tmp_path / "env" / "p")})
    assert r.stdout.strip() == "True"
    (rows,) = read_trace(tmp_path / "env").values()
    assert [x[0] for x in rows] == ["SE"]
    r = run_python(code, env={"LOTUS_LOG_FILE": str(tmp_path / "off" / "p"), "LOTUS_DISABLE": "1"})
    assert r.stdout.strip() == "False" and not (tmp_path / "off").exists()
    # configure() overrides the environment.
    code2 = f"import lotus\nlotus.configure(log_file={str(tmp_path / 'cfg' / 'q')!r})\n" + code
    run_python(code2, env={"LOTUS_LOG_FILE": str(tmp_path / "env2" / "p")})
    assert (tmp_path / "cfg").exists() and not (tmp_path / "env2").exists()


def test_relative_prefix_is_absolute(tmp_path):
    code = """
import lotus, os
lotus.configure("rel/log", ring_capacity=100, overflow="drop", clock="realtime", flush_interval=5)
os.chdir("/")
with lotus.scope("R"):
    pass
lotus.configure(enabled=False)
with lotus.scope("Off"):
    pass
lotus.shutdown()
with lotus.scope("AfterShutdown"):
    pass
print(lotus.stats().recorded, lotus.tracing_enabled())
"""
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        r = run_python(code)
    finally:
        os.chdir(cwd)
    assert r.stdout.split() == ["1", "False"]
    (rows,) = read_trace(tmp_path / "rel").values()
    assert [x[0] for x in rows] == ["SR"]


def test_fork_child_writes_its_own_file(tmp_path):
    code = f"""
import lotus, os
lotus.configure(log_file={str(tmp_path / 'f' / 'log')!r})
with lotus.scope("Parent"):
    pass
pid = os.fork()
if pid == 0:
    with lotus.scope("Child"):
        pass
    lotus.flush()
    os._exit(0)
os.waitpid(pid, 0)
with lotus.scope("ParentAgain"):
    pass
print(os.getpid(), pid)
"""
    parent, child = run_python(code).stdout.split()
    files = read_trace(tmp_path / "f")
    assert [r[0] for r in files[f"log_worker_pid_{parent}"]] == ["SParent", "SParentAgain"]
    assert [r[0] for r in files[f"log_worker_pid_{child}"]] == ["SChild"]


def test_the_writer_starts_with_the_first_event(tmp_path):
    """configure() leaves the process single-threaded (the C library's and libstdc++'s
    single-thread paths stay on for what the program does next, such as `import torch`); the
    first event starts the writer; flight mode starts it at configure() (captures come before
    any event)."""
    code = f"""
import ctypes, os, lotus
single = ctypes.c_int.in_dll(ctypes.CDLL(None), "__libc_single_threaded")
def threads():
    return len(os.listdir("/proc/self/task"))
lotus.configure(log_file={str(tmp_path / 'w' / 'log')!r})
print(threads(), single.value, sorted(os.listdir({str(tmp_path / 'w')!r}))
    if os.path.isdir({str(tmp_path / 'w')!r}) else [])
with lotus.scope("First"):
    pass
lotus.flush()
print(threads(), single.value, lotus.stats().written)
"""
    before, after = run_python(code).stdout.splitlines()
    assert before == "1 1 []"
    assert after == "2 0 1"
    assert [r[0] for r in next(iter(read_trace(tmp_path / "w").values()))] == ["SFirst"]
    flight = f"""
import os, lotus
lotus.configure(log_file={str(tmp_path / 'fl' / 'log')!r}, flight=5)
print(len(os.listdir("/proc/self/task")), lotus.capture("before any event"))
"""
    assert run_python(flight).stdout.split() == ["2", "True"]


def test_threads_get_their_own_files(tmp_path):
    code = f"""
import lotus, threading
lotus.configure(log_file={str(tmp_path / 'th' / 'log')!r})
def work(i):
    for _ in range(100):
        with lotus.scope("T%d" % i):
            pass
ts = [threading.Thread(target=work, args=(i,)) for i in range(3)]
[t.start() for t in ts]
[t.join() for t in ts]
lotus.flush()
print(lotus.stats().written)
"""
    assert run_python(code).stdout.strip() == "300"
    files = read_trace(tmp_path / "th")
    assert len(files) == 3  # one _worker_pid_<tid> file per thread
    per_file = sorted((rows[0][0], len(rows), len({r[0] for r in rows})) for rows in files.values())
    assert per_file == [("ST0", 100, 1), ("ST1", 100, 1), ("ST2", 100, 1)]


def test_map_region_list_mode_and_records(tmp_path):
    listing = tmp_path / "regions.txt"
    code = """
import lotus
for _ in range(3):
    with lotus.map_region("Decode"):
        pass
    with lotus.map_region("Resize"):
        pass
print(lotus.collector.attached(), lotus.collector.depth())
"""
    r = run_python(code, env={"LOTUS_MAP_LIST": str(listing),
                              "LOTUS_LOG_FILE": str(tmp_path / "m" / "log")})
    assert r.stdout.split() == ["none", "0"]
    assert listing.read_text().split() == ["Decode", "Resize"]
    (rows,) = read_trace(tmp_path / "m").values()
    assert [x[0] for x in rows] == ["SDecode", "SResize"] * 3


def test_map_region_selected_with_no_collector_is_harmless(tmp_path):
    code = """
import lotus
lotus.collector.initialize()
for _ in range(3):
    with lotus.map_region("Decode"):
        pass
lotus.collector.resume(); lotus.collector.pause(); lotus.collector.detach()
print(lotus.collector.attached())
"""
    r = run_python(code, env={"LOTUS_MAP_SELECT": "Decode", "LOTUS_COLLECTOR": "none"})
    assert r.stdout.strip() == "none"


def test_batch_tracker_matches_cpp_rules(tmp_path):
    code = f"""
import lotus, os
lotus.configure(log_file={str(tmp_path / 'b' / 'log')!r})
t = lotus.BatchTracker()
for i in range(4):
    t.queued(i)
t.wait_begin()
assert t.arrived(1) is False     # out of order: SBatchWait_1 marker
assert t.arrived(0) is True
t.queued(4)
t.consumed(0)
t.wait_begin()
t.queued(5)
t.consumed(1)                    # cached: no wait record
assert t.expected == 2
t.reset()
assert t.expected == 0
lotus.flush()
print(os.getpid())
"""
    pid = run_python(code).stdout.strip()
    rows = read_trace(tmp_path / "b")[f"log_main_pid_{pid}"]
    assert [r[0] for r in rows] == ["SBatchQueued_0", "SBatchQueued_1", "SBatchQueued_2",
                                    "SBatchQueued_3", "SBatchWait_1", "SBatchQueued_4",
                                    "SBatchWait_0", "SBatchConsumed_0", "SBatchQueued_5",
                                    "SBatchConsumed_1"]
    assert [r[2] for r in rows if r[0] != "SBatchWait_0"] == [1000] * 9


def err(f):
    try:
        f()
    except Exception as e:  # noqa: BLE001 - the type is what is checked
        return type(e)
    return None


@pytest.mark.parametrize("call, exc", [
    (lambda: lotus.configure(ring_capacity=10), ValueError),
    (lambda: lotus.configure(ring_capacity=1 << 27), ValueError),
    (lambda: lotus.configure(ring_capacity="big"), TypeError),
    (lambda: lotus.configure(ring_capacity=True), TypeError),
    (lambda: lotus.configure(flush_interval=0), ValueError),
    (lambda: lotus.configure(flush_interval=1.5), TypeError),
    (lambda: lotus.configure(overflow="lossy"), ValueError),
    (lambda: lotus.configure(clock=3), TypeError),
    (lambda: lotus.configure(enabled="yes"), TypeError),
    (lambda: lotus.configure(log_file=3), TypeError),
    (lambda: lotus.configure(log_file="a\nb"), ValueError),
    (lambda: lotus.configure(log_file="a", unknown=1), TypeError),
    (lambda: lotus._lotus._configure(log_file="a", ring_capacity=1), ValueError),
    (lambda: lotus._lotus._configure(overflow="x"), ValueError),
    (lambda: lotus.scope(), TypeError),
    (lambda: lotus.scope(1), TypeError),
    (lambda: lotus.scope("a", "b"), TypeError),
    (lambda: lotus.scope(name="a"), TypeError),
    (lambda: lotus.scope("a")(3), TypeError),
    (lambda: lotus.scope("\ud800").__enter__(), UnicodeEncodeError),
    (lambda: lotus.scope("a").__exit__(None, None, None), RuntimeError),
    (lambda: lotus.map_region(""), ValueError),
    (lambda: lotus.map_region(None), TypeError),
    (lambda: lotus.map_region("a").__exit__(None, None, None), RuntimeError),
    (lambda: lotus.traced(3), TypeError),
    (lambda: lotus.traced("x")(3), TypeError),
    (lambda: lotus.BatchTracker().queued(-1), TypeError),
    (lambda: lotus.BatchTracker().arrived("0"), TypeError),
    (lambda: lotus._lotus._record("a", -1, 0), ValueError),
    (lambda: lotus._lotus._record(1, 0, 0), TypeError),
    (lambda: lotus._lotus._batch(9, 0), ValueError),
    (lambda: lotus._lotus._batch(0, 0, 1), TypeError),
])
def test_bad_arguments_raise_clean_exceptions(call, exc):
    assert err(call) is exc


def test_double_enter_is_refused():
    s = lotus.scope("D")
    with s:
        with pytest.raises(RuntimeError, match="already entered"):
            s.__enter__()
    m = lotus.map_region("M")
    with m:
        with pytest.raises(RuntimeError, match="already entered"):
            m.__enter__()
    assert repr(s) == "lotus.scope('D')" and s.name == "D"
    assert repr(m) == "lotus.map_region('M')"


def test_package_surface():
    assert lotus.__version__.count(".") == 2
    for name in lotus.__all__:
        assert hasattr(lotus, name), name
    assert lotus.stats()._fields == ("recorded", "written", "dropped", "sanitized")
