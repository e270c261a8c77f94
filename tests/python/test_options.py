# SPDX-License-Identifier: MIT
"""The option table (lotus/runtime/option_table.hpp) from Python: lotus.configure takes every option
of it, refuses a value out of its range with the table's text, and a bad environment variable gives
the one documented message and the default."""
import inspect

import pytest

from conftest import run_python

import lotus

OPTIONS = lotus._OPTIONS
TABLE_VARS = [r[1] for r in lotus._lotus._option_table()]


def clean_env(**extra):
    """Every variable of the table unset (the test's own environment must not leak in)."""
    env = {name: "" for name in TABLE_VARS}
    env.update(extra)
    return env


def test_configure_takes_every_option_of_the_table():
    params = inspect.signature(lotus.configure).parameters
    assert set(OPTIONS) == set(params)
    assert {"max_bytes", "min_free_bytes"} <= set(OPTIONS)
    for name, row in OPTIONS.items():
        assert row.env.startswith("LOTUS_") and row.doc, name
        assert name in lotus.configure.__doc__ and row.env in lotus.configure.__doc__
    f = OPTIONS["flush_interval"]
    assert (f.env, f.min, f.max, f.default, f.expected) == (
        "LOTUS_FLUSH_INTERVAL_MS", 1, 60000, 100, "an integer from 1 to 60000")


def int_cases():
    for name, row in OPTIONS.items():
        if row.kind in ("uint", "bytes"):
            if row.min > 0:
                yield name, row.min - 1
            yield name, row.max + 1
            yield name, -1


@pytest.mark.parametrize("name, value", list(int_cases()))
def test_out_of_range_int_raises_the_table_message(name, value):
    row = OPTIONS[name]
    with pytest.raises(ValueError) as e:
        lotus.configure(**{name: value})
    assert str(e.value) == (f"lotus.configure: {name}='{value}' "
                            f"(expected an integer from {row.min} to {row.max})")


@pytest.mark.parametrize("name", [n for n, r in OPTIONS.items() if r.kind == "choice"])
def test_bad_choice_raises_the_table_message(name):
    with pytest.raises(ValueError) as e:
        lotus.configure(**{name: "sundial"})
    assert str(e.value) == (f"lotus.configure: {name}='sundial' "
                            f"(expected {'|'.join(OPTIONS[name].choices)})")


def test_extension_checks_the_same_table():
    # lotus._lotus._configure checks again, with the same text (callers that skip __init__).
    with pytest.raises(ValueError, match=r"^lotus.configure: flush_interval='0' \(expected an "
                                         r"integer from 1 to 60000\)$"):
        lotus._lotus._configure(flush_interval=0)
    with pytest.raises(ValueError, match=r"^lotus.configure: max_bytes='4611686018427387905'"):
        lotus._lotus._configure(max_bytes=(1 << 62) + 1)


def test_a_refused_value_changes_nothing(tmp_path):
    code = f"""
import lotus
lotus.configure(log_file={str(tmp_path / 't' / 'log')!r}, max_bytes=0)
for bad in (dict(flush_interval=0), dict(flush_interval=60001), dict(max_bytes=-1),
            dict(min_free_bytes=1 << 63), dict(ring_capacity=1 << 27)):
    try:
        lotus.configure(**bad)
    except ValueError:
        pass
    else:
        raise SystemExit("accepted " + repr(bad))
for i in range(100):
    with lotus.scope("S"):
        pass
lotus.flush()
s = lotus.stats()
print(s.recorded, s.written, s.dropped, lotus.tracing_enabled())
"""
    r = run_python(code, env=clean_env())
    assert r.stdout.split() == ["100", "100", "0", "True"]
    assert r.stderr == ""


def test_max_bytes_and_min_free_bytes_reach_the_runtime(tmp_path):
    code = f"""
import lotus
lotus.configure(log_file={str(tmp_path / 'a' / 'log')!r}, min_free_bytes=1 << 62)
for i in range(100):
    with lotus.scope("S"):
        pass
lotus.flush()
print(*lotus.stats()[:3])
lotus.configure(log_file={str(tmp_path / 'b' / 'log')!r}, max_bytes=300, min_free_bytes=0)
for i in range(1000):
    with lotus.scope("S"):
        pass
lotus.flush()
print(*lotus.stats()[:3])
"""
    r = run_python(code, env=clean_env())
    first, second = (list(map(int, line.split())) for line in r.stdout.splitlines())
    assert first == [100, 0, 100]  # the reserve is larger than any file system: all dropped
    assert second[0] == 1100 and second[2] > 100 and second[1] + second[2] == 1100


ENV_CASES = [
    ("LOTUS_FLUSH_INTERVAL_MS", "0", "an integer from 1 to 60000", "100"),
    ("LOTUS_FLUSH_INTERVAL_MS", "60001", "an integer from 1 to 60000", "100"),
    ("LOTUS_RING_CAPACITY", "63", "an integer from 64 to 67108864", "32768"),
    ("LOTUS_DISABLE", "maybe", "0|false|no|off|1|true|yes|on", "0"),
    ("LOTUS_OVERFLOW", "lossy", "block|drop", "block"),
    ("LOTUS_CLOCK", "sundial", "auto|tsc|realtime", "auto"),
    ("LOTUS_MAX_BYTES", "lots", "an integer from 0 to 4611686018427387904",
     "1073741824, the fail-closed limit for a malformed value"),
    ("LOTUS_MIN_FREE_BYTES", "-1", "an integer from 0 to 4611686018427387904", "max(1 GiB, 5 %)"),
    ("LOTUS_NVTX", "2", "0|false|no|off|1|true|yes|on", "0"),
    ("LOTUS_ITT", "sure", "0|false|no|off|1|true|yes|on", "0"),
    ("LOTUS_FLIGHT", "4s", "an integer from 0 to 86400", "0 (off)"),
    ("LOTUS_FLIGHT_BYTES", "100", "an integer from 4096 to 4611686018427387904", "64 MiB"),
    ("LOTUS_RESOURCES", "sometimes", "0|false|no|off|1|true|yes|on|ops", "1"),
    ("LOTUS_MEMORY_READINGS", "always", "budget|eager", "budget"),
    ("LOTUS_LIVE", "maybe", "0|false|no|off|1|true|yes|on", "1"),
]


def test_env_cases_cover_every_checked_option():
    checked = {r.env for r in OPTIONS.values() if r.kind not in ("prefix", "path")}
    assert checked == {c[0] for c in ENV_CASES}


@pytest.mark.parametrize("var, value, expected, default", ENV_CASES)
def test_bad_environment_value_gives_the_one_message_and_the_default(tmp_path, var, value,
                                                                    expected, default):
    code = """
import lotus
for i in range(100):
    with lotus.scope("S"):
        pass
lotus.flush()
print(*lotus.stats()[:3], lotus.tracing_enabled())
"""
    r = run_python(code, env=clean_env(LOTUS_LOG_FILE=str(tmp_path / "t" / "log"), **{var: value}))
    assert r.stderr == f"lotus: ignoring {var}='{value}' (expected {expected}); using {default}\n"
    assert r.stdout.split() == ["100", "100", "0", "True"]  # the defaults still trace


def test_resources_option_reaches_the_runtime(tmp_path):
    """configure(resources=False) writes no `batchres` line for a worker batch; resources=True
    (the default) writes one, keyed by the batch index; a non-bool is refused."""
    code = f"""
import os
import lotus
from lotus import _lotus
for name, on in (("off", False), ("on", True)):
    lotus.configure(log_file=os.path.join({str(tmp_path)!r}, name, "log"), resources=on)
    _lotus._res_begin()
    t0 = _lotus._now()
    sum(range(100000))
    _lotus._batch(_lotus.BATCH_PREPROCESSED, 7, t0, _lotus._now())
    lotus.flush()
for bad in ("yes", 2):
    try:
        lotus.configure(resources=bad)
    except (TypeError, ValueError) as e:
        print(type(e).__name__)
"""
    r = run_python(code, env=clean_env())
    assert r.stdout.split() == ["ValueError", "TypeError"]

    def lines(name):
        out = []
        for p in (tmp_path / name).iterdir():
            if p.name.startswith("."):
                out += [ln for ln in p.read_text().splitlines() if ln.startswith("batchres ")]
        return out

    assert lines("off") == []
    on = lines("on")
    assert len(on) == 1 and on[0].split()[2] == "7", on


def test_resources_ops_option_reaches_the_runtime(tmp_path):
    """configure(resources="ops") also sums each lotus.scope's figures per thread and op: the
    sidecar's `opres` lines count exactly the op's records; resources=True (per batch) and
    resources=False write none."""
    code = f"""
import os
import lotus
for name, value in (("ops", "ops"), ("batch", True), ("off", False)):
    lotus.configure(log_file=os.path.join({str(tmp_path)!r}, name, "log"), resources=value)
    for _ in range(5):
        with lotus.scope("py op"):
            sum(range(1000))
    lotus.flush()
"""
    run_python(code, env=clean_env())

    def read(name):
        ops, records = [], 0
        for p in (tmp_path / name).iterdir():
            text = p.read_text()
            if p.name.startswith("."):
                ops += [ln.split(" ", 10) for ln in text.splitlines() if ln.startswith("opres ")]
            else:
                records += sum(1 for ln in text.splitlines() if ln.startswith("Spy op,"))
        return ops, records

    ops, records = read("ops")
    assert records == 5
    assert ops and all(f[10] == "py op" and len(f) == 11 for f in ops), ops
    assert sum(int(f[2]) for f in ops) == records
    for name in ("batch", "off"):
        ops, records = read(name)
        assert records == 5
        assert ops == []


def test_configure_keywords_are_the_tables_fields():
    """lotus.configure and the extension's _configure both take exactly the table's fields: a row
    added to option_table.hpp appears in both without editing _lotus.cpp or __init__.py."""
    params = inspect.signature(lotus.configure).parameters
    fields = [r[0] for r in lotus._lotus._option_table() if r[0] is not None]
    assert list(params) == fields  # in table order (the prefix first: it is positional too)
    assert params["log_file"].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    code = f"import lotus; lotus._lotus._configure(**dict.fromkeys({fields!r})); print('taken')"
    assert run_python(code, env=clean_env()).stdout.split() == ["taken"]  # each a keyword of it
    with pytest.raises(TypeError, match="unexpected keyword argument 'fake_knob'"):
        lotus._lotus._configure(fake_knob=3)
    with pytest.raises(TypeError, match="unexpected keyword argument 'fake_knob'"):
        lotus.configure(fake_knob=3)


def test_a_fake_row_is_checked_and_signed_like_the_others():
    """configure's checks and signature are loops over the rows: one more row (a fake knob, uint
    1..10) is a keyword, checked with the table's message."""
    rows = dict(OPTIONS)
    rows["fake_knob"] = OPTIONS["flush_interval"]._replace(
        field="fake_knob", env="LOTUS_FAKE_KNOB", min=1, max=10, default=3,
        default_text="3", expected="an integer from 1 to 10", doc="a knob of this test only")
    given = []
    fake_configure = lotus._configure_function(rows, given.append)
    assert list(inspect.signature(fake_configure).parameters)[-1] == "fake_knob"
    fake_configure(fake_knob=4)
    assert given[0]["fake_knob"] == 4 and given[0]["max_bytes"] is None
    assert lotus._checked_options(rows, {"fake_knob": 7, "max_bytes": 0, "nvtx": None}) == {
        "max_bytes": 0, "fake_knob": 7}
    with pytest.raises(ValueError) as e:
        lotus._checked_options(rows, {"fake_knob": 11})
    assert str(e.value) == "lotus.configure: fake_knob='11' (expected an integer from 1 to 10)"
    with pytest.raises(TypeError):
        lotus._checked_options(rows, {"fake_knob": "7"})
    with pytest.raises(TypeError):
        lotus._checked_options(OPTIONS, {"fake_knob": 7})
