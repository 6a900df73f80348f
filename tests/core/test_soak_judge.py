"""The soak's bounds over sample series (benchmarks/soak/judge.py): a steady series passes, a
leak that lifts every final sample fails, one transient sample does not, and idle must read 0."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.soak.judge import (
    COUNTS,
    RSS_GROWTH_BOUND,
    count_grew,
    judge_target,
    rss_growth,
)


def sample(rss_mib: float = 100.0, count: int = 10, in_flight: int = 0) -> dict[str, float]:
    return {"rss_mib": rss_mib, **dict.fromkeys(COUNTS, count), "in_flight_server": in_flight}


def words(verdicts: list) -> dict[str, bool | None]:
    return {v.bound: v.passed for v in verdicts}


counts = st.lists(st.integers(0, 10_000), min_size=1, max_size=5)


@given(counts, st.integers(1, 1000))
def test_a_leak_that_lifts_every_final_sample_is_growth(baseline: list[int], leak: int) -> None:
    final = [max(baseline) + leak + i for i in range(3)]
    assert count_grew(baseline, final)


@given(counts, st.integers(0, 1000))
def test_one_transient_sample_is_not_growth(baseline: list[int], spike: int) -> None:
    final = [max(baseline) + spike, min(baseline)]  # a connection still closing in one sample
    assert not count_grew(baseline, final)


@given(
    st.lists(st.floats(1.0, 1e5), min_size=1, max_size=5),
    st.floats(0.0, 0.2),
)
def test_rss_growth_is_the_least_final_over_the_most_baseline(
    baseline: list[float], growth: float
) -> None:
    final = [max(baseline) * (1 + growth), max(baseline) * (1 + growth) * 1.01]
    assert rss_growth(baseline, final) == pytest.approx(growth, abs=1e-9)


@pytest.mark.parametrize(("final_rss", "passed"), [(104.99, True), (105.01, False), (90.0, True)])
def test_rss_bound_is_five_percent(final_rss: float, passed: bool) -> None:
    assert RSS_GROWTH_BOUND == 0.05
    verdicts = judge_target("t", [sample()], [sample(rss_mib=final_rss)], [], faults=0)
    assert words(verdicts)["RSS growth ≤ 5 %"] is passed


def test_a_steady_idle_series_passes_every_bound() -> None:
    verdicts = judge_target(
        "t", [sample(count=12), sample(count=10)], [sample(count=11)] * 3, ["in_flight_server"], 0
    )
    assert all(v.passed for v in verdicts), verdicts


def test_a_counter_not_back_to_zero_fails_even_in_one_sample() -> None:
    final = [sample(), sample(in_flight=1), sample()]
    verdicts = judge_target("t", [sample()], final, ["in_flight_server"], faults=0)
    assert words(verdicts)["in-flight counters 0 when idle"] is False


def test_a_counter_that_could_not_be_read_is_not_zero() -> None:
    final = [{**sample(), "in_flight_cloud": value} for value in (0.0, math.nan, 0.0)]
    verdicts = judge_target("t", [sample()], final, ["in_flight_cloud"], faults=0)
    (idle,) = [v for v in verdicts if v.bound == "in-flight counters 0 when idle"]
    assert idle.passed is False and idle.figure == "in_flight_cloud not read"


def test_a_fault_fails_and_a_run_without_its_final_window_is_not_judged() -> None:
    verdicts = judge_target("t", [sample()], [], ["in_flight_server"], faults=2)
    assert words(verdicts)["0 × 5xx not caused by the client"] is False
    assert [v.passed for v in verdicts[1:]] == [None] * (len(verdicts) - 1)
    assert {v.word for v in verdicts[1:]} == {"NOT JUDGED"}
