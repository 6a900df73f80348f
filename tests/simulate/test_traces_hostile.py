"""Hostile traffic for `simulate`: traces that are huge, malformed or adversarial, values that
would size arrays (a count of 10^12, an epoch timestamp), synthetic specs and flags at the
float limits. Each is refused in one line (`TrafficError`, exit 2) or read in bounded memory.

The fuzzers are pure and cheap: FUZZ_EXAMPLES examples each (default 100), more on request:

    FUZZ_EXAMPLES=5000 python -m pytest tests/simulate/test_traces_hostile.py -q
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import REFERENCE_PLAN, REFERENCE_QMAX, REFERENCE_TTOTAL
from tts_bench.cli import main
from tts_bench.simulate import traffic as traffic_module
from tts_bench.simulate.traffic import (
    MAX_ARRIVALS,
    MAX_DURATION_S,
    MAX_TICK_ARRIVALS,
    Traffic,
    TrafficError,
    load_trace,
    parse_synthetic,
    synthetic_traffic,
)

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "100"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    database=None,
)
REPO = Path(__file__).resolve().parents[2]


def trace(tmp_path: Path, content: str | bytes, name: str = "t.csv") -> Path:
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


def check_traffic(traffic: Traffic) -> None:
    """What any trace the reader accepts must be: counts that fit the bounds, and agree."""
    assert traffic.counts.dtype == np.int64 and (traffic.counts >= 0).all()
    assert 0 < traffic.duration_s <= MAX_DURATION_S + traffic.tick_s
    assert traffic.requests == int(traffic.counts.sum()) <= MAX_ARRIVALS
    assert traffic.counts.max(initial=0) <= MAX_TICK_ARRIVALS
    if traffic.timestamps_s is not None:
        assert len(traffic.timestamps_s) == traffic.requests
        assert (np.diff(traffic.timestamps_s) >= 0).all()


REFUSED = {
    "epoch-timestamps": ("timestamp_s\n1764633600.0\n1764633600.5\n", "an epoch timestamp?"),
    "past-a-month": (f"timestamp_s\n0\n{MAX_DURATION_S + 1}\n", "past the longest run"),
    "minute-10^12": ("minute,count\n0,1\n1000000000000,5\n", "past the longest run"),
    "count-10^12": ("minute,count\n0,1000000000000\n", "in one minute is more than"),
    "count-1e400": ("minute,count\n0,1e400\n", "must be a non-negative number"),
    "timestamp-nan": ("timestamp_s\nnan\n", "must be a non-negative number"),
    "timestamp-inf": ("timestamp_s\n0\ninf\n", "must be a non-negative number"),
    "a-billion-and-one": (
        "minute,count\n" + "".join(f"{m},10000000\n" for m in range(100)) + "100,1\n",
        "more than the 1e+09 one run may hold",
    ),
    "long-line": ("timestamp_s\n" + "1" * 5000 + "\n", "a line longer than 4096 characters"),
    "quoted-lines": ('timestamp_s\n"' + "1\n" * 3000 + '"\n', "is not a number"),
    "huge-quoted-field": ('timestamp_s\n"' + "1\n" * 70000 + '"\n', "not CSV: field larger"),
    "not-utf8": (b"timestamp_s\n\xff\xfe\n", "cannot read the trace"),
    "nul-bytes": ("timestamp_s\n0\x00\n", "not"),
    "only-a-header": ("timestamp_s\n\n\n", "a header but no arrivals"),
    "minute-fraction": ("minute,count\n0.5,3\n", "whole numbers"),
    "unterminated-quote": ('timestamp_s\n"0\n', "not CSV"),
    "text-after-quote": ('timestamp_s\n"0"x\n', "not CSV"),
}


@pytest.mark.parametrize(("content", "expected"), REFUSED.values(), ids=REFUSED.keys())
def test_a_hostile_trace_is_refused_in_one_line(
    tmp_path: Path, content: str | bytes, expected: str
) -> None:
    with pytest.raises(TrafficError) as caught:
        load_trace(trace(tmp_path, content), None)
    message = str(caught.value)
    assert expected in message and "\n" not in message and len(message) < 500


def test_a_stream_with_no_line_breaks_is_refused_at_its_first_line() -> None:
    with pytest.raises(TrafficError, match="a line longer than"):
        load_trace(Path("/dev/zero"), None)


def test_a_billion_arrivals_are_read_as_counts_not_times(tmp_path: Path) -> None:
    rows = "".join(f"{m},{MAX_TICK_ARRIVALS}\n" for m in range(MAX_ARRIVALS // MAX_TICK_ARRIVALS))
    traffic = load_trace(trace(tmp_path, "minute,count\n" + rows), None)
    assert traffic.requests == MAX_ARRIVALS
    assert traffic.counts.nbytes == 8 * 100
    check_traffic(traffic)


ACCEPTED = {
    "byte-order-mark": ("\ufefftimestamp_s\n0.5\n1.5\n", None, 2),
    "blank-lines": ("timestamp_s\n\n0.5\n\n1.5\n\n", None, 2),
    "crlf": ("timestamp_s\r\n0.5\r\n1.5\r\n", None, 2),
    "quoted": ('timestamp_s\n"0.5"\n', None, 1),
    "rows-past-the-duration-unread": ("timestamp_s\n0.5\n99\nnot read, not refused\n", 10.0, 1),
}


@pytest.mark.parametrize(
    ("content", "duration_s", "requests"), ACCEPTED.values(), ids=ACCEPTED.keys()
)
def test_what_a_spreadsheet_writes_is_read(
    tmp_path: Path, content: str, duration_s: float | None, requests: int
) -> None:
    traffic = load_trace(trace(tmp_path, content), duration_s)
    assert traffic.requests == requests
    check_traffic(traffic)


def test_a_large_trace_is_read_in_bounded_memory(tmp_path: Path) -> None:
    """2 million arrivals (28 MB): the reader's peak RSS stays near the interpreter's own (the
    old reader held every row as Python lists, 3.2 GB for a 206 MB trace)."""
    times = np.sort(np.random.default_rng(3).random(2_000_000) * 86400.0)
    path = tmp_path / "big.csv"
    with path.open("w") as handle:
        handle.write("timestamp_s\n")
        np.savetxt(handle, times, fmt="%.6f")
    script = (
        "import re, sys; from pathlib import Path; "
        "import numpy; from tts_bench.simulate.traffic import load_trace; "
        "hwm = lambda: int(re.search(r'VmHWM:\\s+(\\d+)', Path('/proc/self/status').read_text())[1]); "
        "base = hwm(); t = load_trace(Path(sys.argv[1]), None); "
        "print(t.requests, (hwm() - base) // 1024)"
    )  # VmHWM: this process image's own peak (ru_maxrss would start at the parent's)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "container")])}
    done = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, env=env,
        check=True, timeout=300,
    )  # fmt: skip
    requests, grown_mib = map(int, done.stdout.split())
    assert requests == 2_000_000
    assert grown_mib < 64, f"the reader grew by {grown_mib} MiB"


@FUZZ
@given(
    data=st.one_of(
        st.binary(max_size=600),
        st.lists(
            st.one_of(
                st.floats(allow_nan=True, allow_infinity=True).map(repr),
                st.integers(min_value=-(10**20), max_value=10**20).map(str),
                st.text(max_size=12),
            ),
            max_size=40,
        ).map(lambda cells: "\n".join(cells)),
    ),
    header=st.sampled_from(["timestamp_s\n", "minute,count\n", "", "x,timestamp_s\n"]),
    duration_s=st.one_of(st.none(), st.floats(min_value=1e-3, max_value=MAX_DURATION_S)),
)
def test_fuzz_the_trace_reader_returns_bounded_traffic_or_refuses(
    tmp_path: Path, data: bytes | str, header: str, duration_s: float | None
) -> None:
    body = data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass")
    path = trace(tmp_path, header.encode() + body, "fuzz.csv")
    try:
        traffic = load_trace(path, duration_s)
    except TrafficError as exc:
        assert str(exc) and "\n" not in str(exc)
    else:
        check_traffic(traffic)


SPEC_NUMBERS = st.one_of(
    st.floats(min_value=0, allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, 5e-324, 1e-300, 1e300, 1.7976931348623157e308, 1e999]),
).map(lambda x: repr(x) if math.isfinite(x) else "1e999")


@FUZZ
@given(
    kind=st.sampled_from(
        ["steady:{}", "diurnal:{}:{}:{}", "surge:{}:{}:{}", "steady:{}+surge:{}:{}"]
    ),
    numbers=st.lists(SPEC_NUMBERS, min_size=3, max_size=3),
    duration_s=st.one_of(st.just(60.0), st.floats(min_value=1.0, max_value=MAX_DURATION_S)),
)
def test_fuzz_synthetic_specs_at_the_float_limits_give_bounded_traffic_or_refuse(
    kind: str, numbers: list[str], duration_s: float
) -> None:
    spec = kind.format(*numbers)
    try:
        shape = parse_synthetic(spec)
        made = synthetic_traffic(shape, duration_s, 320.0, np.random.default_rng(0))
    except TrafficError as exc:
        assert str(exc) and "\n" not in str(exc)
    else:
        check_traffic(made)


def test_bounds_are_checked_before_anything_is_drawn(monkeypatch: pytest.MonkeyPatch) -> None:
    """A spec past the arrival bound is refused without drawing: the generator is never asked."""

    class NeverDraw:
        def poisson(self, *_: object) -> None:
            raise AssertionError("drew arrivals for a refused spec")

    with pytest.raises(TrafficError, match="one run may hold"):
        synthetic_traffic(parse_synthetic("steady:1e9"), 3600.0, 320.0, NeverDraw())  # type: ignore[arg-type]
    monkeypatch.setattr(traffic_module, "MAX_TICK_ARRIVALS", 100)
    with pytest.raises(TrafficError, match="in one second is more than"):
        synthetic_traffic(parse_synthetic("steady:101"), 10.0, 320.0, NeverDraw())  # type: ignore[arg-type]


SIMULATE = [
    "simulate", "--plan", str(REFERENCE_PLAN), "--qmax", str(REFERENCE_QMAX),
    "--ttotal", str(REFERENCE_TTOTAL),
]  # fmt: skip
FLAGS = {
    "seed-negative": (["--synthetic", "steady:5", "--seed", "-1"], "--seed -1: give 0 or more"),
    "price-huge": (
        ["--synthetic", "steady:5", "--duration-s", "60", "--price-per-hour", "1e308"],
        "--price-per-hour 1e+308: at most 1e+09",
    ),
    "price-inf": (["--synthetic", "steady:5", "--price-per-hour", "inf"], "not a finite number"),
    "duration-huge": (["--synthetic", "steady:5", "--duration-s", "1e300"], "at most 2.6784e+06"),
    "duration-subnormal": (["--synthetic", "steady:5", "--duration-s", "5e-324"], ""),
    "fixed-huge": (
        ["--synthetic", "steady:5", "--duration-s", "60", "--policy", "fixed:" + "9" * 30],
        "policy fixed:N needs N ≤ 1,000,000",
    ),
    "surge-far-away": (["--synthetic", "surge:10:2:1e300"], "give --duration-s or an earlier"),
    "rate-huge": (["--synthetic", "steady:1e9"], "one run may hold"),
    "period-tiny": (["--synthetic", "diurnal:1:2:1e-300"], "the period must be at least 2 s"),
}


@pytest.mark.parametrize(("args", "expected"), FLAGS.values(), ids=FLAGS.keys())
def test_flags_at_the_limits_are_one_line_and_exit_2(
    args: list[str], expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main([*SIMULATE, "--out", str(tmp_path), *args])
    err = capsys.readouterr().err
    if not expected:  # tiny but positive: it runs (one tick), no refusal owed
        assert code == 0, err
        return
    assert code == 2, err
    assert expected in err and len(err.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []  # refused before anything is written
