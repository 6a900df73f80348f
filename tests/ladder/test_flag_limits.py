"""`surge`, `qmax --endpoint` and `qmax --dry-run` flags at the limits: a schedule that cannot be
built in bounded time and memory is refused in one line (exit 2) before anything is sent: no
socket connects, no process starts, no AWS call is made."""

from __future__ import annotations

import math
import socket
import subprocess
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import REFERENCE_QMAX
from tts_bench.cli import main
from tts_bench.measure.ladder.schedule import MAX_RUNG_USERS, MAX_RUNGS
from tts_bench.measure.samples import mean_in_flight
from tts_bench.measure.surge.figures import (
    MAX_SURGE_ARRIVALS,
    MAX_SURGE_DURATION_S,
    OCCUPANCY_STEP_S,
    SurgeError,
    check_rate,
    check_schedules,
    poisson_arrivals,
)


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_a: object, **_kw: object) -> None:
        raise AssertionError("a refused command touched the network or started a process")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(subprocess, "Popen", refuse)


def refused(capsys: pytest.CaptureFixture[str], argv: list[str], expected: str) -> float:
    """Run `argv`; it must exit 2 with one line holding `expected`. Returns its seconds."""
    started = time.perf_counter()
    code = main(argv)
    took = time.perf_counter() - started
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert expected in err and len(err.splitlines()) == 1, err
    assert "Traceback" not in err
    return took


ENDPOINT = ["--endpoint", "e", "--transport", "response-stream"]
MANY_RUNGS = ",".join(map(str, range(1, 20_001)))
QMAX_CASES = {
    "rung-too-large": (["--dry-run", "--rungs", f"1,{MAX_RUNG_USERS + 1}"], "at most 100 rungs"),
    "rung-10^23": (["--dry-run", "--rungs", "1,99999999999999999999999"], "at most 100 rungs"),
    "too-many-rungs": (["--dry-run", "--rungs", MANY_RUNGS], "20000 rungs up to 20,000 users"),
    "endpoint-rung-10^9": ([*ENDPOINT, "--rungs", "1,1000000000"], "at most 10,000 users"),
    "endpoint-101-rungs": (
        [*ENDPOINT, "--rungs", ",".join(map(str, range(1, MAX_RUNGS + 2)))],
        "101 rungs",
    ),
    "endpoint-processes-0": ([*ENDPOINT, "--processes", "0"], "--processes 0: give 1 to"),
    "endpoint-processes-10^6": ([*ENDPOINT, "--processes", "1000000"], "--processes 1000000"),
    "dry-run-processes-negative": (["--dry-run", "--processes", "-5"], "--processes -5"),
    "endpoint-metric-wait-negative": ([*ENDPOINT, "--metric-wait-s", "-1"], "give 0 to 3600 s"),
    "endpoint-metric-wait-1e300": ([*ENDPOINT, "--metric-wait-s", "1e300"], "give 0 to 3600 s"),
    "endpoint-hold-1e300": ([*ENDPOINT, "--hold-s", "1e300"], "at most 86400 s (a day)"),
}


@pytest.mark.parametrize(("args", "expected"), QMAX_CASES.values(), ids=QMAX_CASES.keys())
def test_qmax_flags_past_the_limits_are_refused_before_anything_is_sent(
    no_network: None, capsys: pytest.CaptureFixture[str], args: list[str], expected: str
) -> None:
    took = refused(capsys, ["qmax", *args], expected)
    assert took < 5.0  # 20,000 rungs once took minutes to describe (each tick a quadratic walk)


SURGE_CASES = {
    "rate-10^9": (["--rate", "1e9"], f"at most {MAX_SURGE_ARRIVALS:,} in one run"),
    "rate-times-duration": (["--rate", "2000", "--duration-s", "60"], "1.2e+05 arrivals"),
    "duration-1e300": (["--rate", "1", "--duration-s", "1e300"], "at most 3600"),
    "duration-past-an-hour": (["--rate", "0.1", "--duration-s", "3601"], "at most 3600"),
    "duration-zero": (["--rate", "1", "--duration-s", "0"], "at least 1 and at most 3600"),
    "duration-1e-9": (
        ["--rate", "1", "--duration-s", "1e-9"],
        "--duration-s 1e-09: seconds, at least 1",
    ),
    "duration-half-a-second": (["--rate", "100", "--duration-s", "0.5"], "at least 1"),
    "rate-draws-nothing": (["--rate", "1e-6"], "--rate 1e-06 for 60 s draws no arrival (seed 1)"),
    "rate-subnormal": (["--rate", "5e-324"], "draws no arrival"),
    "second-rate-draws-nothing": (
        ["--rate", "1", "--rate", "1e-4"],
        "--rate 0.0001 for 60 s draws no arrival (seed 2)",
    ),
    "seed-negative": (["--rate", "1", "--seed", "-1"], "--seed -1: give 0 or more"),
    "endpoint-rate-10^9": ([*ENDPOINT, "--rate", "1e9"], "in one run"),
    "endpoint-seed-negative": ([*ENDPOINT, "--rate", "1", "--seed", "-3"], "--seed -3"),
    "host-rate-10^9": (["--host", "http://127.0.0.1:9", "--rate", "1e9"], "in one run"),
    "second-rate-too-high": (["--rate", "1", "--rate", "1e7"], "1e+07 for 60 s"),
}


@pytest.mark.parametrize(("args", "expected"), SURGE_CASES.values(), ids=SURGE_CASES.keys())
def test_surge_flags_past_the_limits_are_refused_before_anything_is_sent(
    no_network: None, capsys: pytest.CaptureFixture[str], args: list[str], expected: str
) -> None:
    refused(capsys, ["surge", "--qmax", str(REFERENCE_QMAX), *args], expected)


@pytest.mark.parametrize("seconds", ["0", "0.5", "3601", "nan", "inf"])
@pytest.mark.parametrize("path", [["--in-process"], []])
def test_the_main_jobs_surge_seconds_past_the_limits_are_refused_before_anything_starts(
    no_network: None, capsys: pytest.CaptureFixture[str], tmp_path, seconds: str, path: list[str]
) -> None:
    out = tmp_path / "out"
    refused(capsys, ["local-run", *path, "--out", str(out), "--surge-s", seconds], "--surge-s")
    assert not out.exists()


@settings(max_examples=60, deadline=None)
@given(
    rate_rps=st.floats() | st.floats(min_value=0, max_value=2000),
    duration_s=st.floats() | st.floats(min_value=0, max_value=4000),
)
def test_a_surge_schedule_is_refused_or_bounded(rate_rps: float, duration_s: float) -> None:
    """Any rate and duration: refused, or a schedule within the duration and the bound."""
    try:
        check_rate(rate_rps, duration_s)
    except SurgeError as exc:
        assert "\n" not in str(exc)
        return
    assert math.isfinite(rate_rps * duration_s) and duration_s <= MAX_SURGE_DURATION_S
    arrivals = poisson_arrivals(rate_rps, duration_s, seed=1)
    assert len(arrivals) <= MAX_SURGE_ARRIVALS + 10 * math.sqrt(MAX_SURGE_ARRIVALS) + 10
    assert ((arrivals >= 0) & (arrivals < duration_s)).all()
    assert (np.diff(arrivals) >= 0).all()


@settings(max_examples=60, deadline=None)
@given(
    rate_rps=st.floats(min_value=0, max_value=2000) | st.floats(),
    duration_s=st.floats(min_value=0, max_value=5) | st.floats(min_value=0, max_value=4000),
    seed=st.integers(min_value=0, max_value=2**64),
)
def test_an_accepted_surge_has_arrivals_and_a_window(
    rate_rps: float, duration_s: float, seed: int
) -> None:
    """What `check_schedules` lets through draws at least one arrival and has a run window that
    survives epoch rounding, so the run's figures never divide by a zero span."""
    try:
        check_schedules([rate_rps], duration_s, seed)
    except SurgeError as exc:
        assert "\n" not in str(exc)
        return
    assert len(poisson_arrivals(rate_rps, duration_s, seed)) >= 1
    start_epoch = 2.0e9  # later than today's clock: the coarsest rounding a run meets
    assert start_epoch + duration_s > start_epoch
    assert np.arange(0.0, duration_s, OCCUPANCY_STEP_S).size >= 2
    assert mean_in_flight([], start_epoch, start_epoch + duration_s) == 0.0
