"""The order-statistic interval on a quantile: what its ranks promise, and what samples give."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tts_bench.measure.ladder.quantile_interval import (
    ConfidenceError,
    binomial_cdf,
    check_confidence,
    coverage,
    order_statistic_ranks,
    quantile_interval,
)

from .synthetic import serial_queue_ttfab_ms

levels = st.floats(min_value=0.9, max_value=0.999)
any_levels = st.floats(min_value=0.5, max_value=0.999)
quantiles = st.floats(min_value=0.01, max_value=0.99)


@settings(max_examples=150, deadline=None)
@given(n=st.integers(1, 600), q=quantiles, level=any_levels)
def test_ranks_promise_at_least_the_level(n, q, level):
    ranks = order_statistic_ranks(n, q, level)
    assert coverage(n, q, ranks) >= level - 1e-9


@settings(max_examples=150, deadline=None)
@given(n=st.integers(1, 600), q=quantiles, level=any_levels)
def test_each_end_is_the_tightest_its_tail_allows(n, q, level):
    # Equal-tailed: one rank further in would leave more than α/2 outside on that side.
    tail = (1 - level) / 2
    cdf = binomial_cdf(n, q)
    lower, upper = order_statistic_ranks(n, q, level)
    if lower is not None:
        assert cdf[lower - 1] <= tail
        assert lower == n or cdf[lower] > tail
    else:
        assert cdf[0] > tail
    if upper is not None:
        assert cdf[upper - 1] >= 1 - tail
        assert upper == 1 or cdf[upper - 2] < 1 - tail
    else:
        assert cdf[n - 1] < 1 - tail
    if lower is not None and upper is not None:
        assert lower < upper


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.floats(0, 1e5, allow_nan=False), min_size=1, max_size=400),
    level=levels,
)
def test_the_interval_holds_the_ladders_own_p95(values, level):
    # So a rung that passes on its interval meets the SLO on its p95, and one that fails does not.
    found = quantile_interval(values, 0.95, level)
    p95 = float(np.percentile(values, 95))
    assert found.samples == len(values)
    assert found.lower is None or found.lower <= p95
    assert found.upper is None or p95 <= found.upper


def test_below_the_floor_a_tiny_window_would_fail_a_p95_that_meets_the_slo():
    # why --confidence starts at 0.9: at 0.5, of [0, 1] the lower end is 1, above the p95 0.95
    assert quantile_interval([0.0, 1.0], 0.95, 0.5).lower == 1.0


@given(n=st.integers(1, 2000))
def test_the_binomial_cdf_ends_at_one_and_never_falls(n):
    cdf = binomial_cdf(n, 0.95)
    assert cdf[-1] == pytest.approx(1.0, abs=1e-9)
    assert all(a <= b + 1e-15 for a, b in itertools.pairwise(cdf))


def test_the_largest_sample_bounds_a_p95_from_72_requests_on():
    # 1 − 0.95^n ≥ 0.975 first holds at n = 72: fewer requests can never pass a rung at 95 %.
    assert order_statistic_ranks(71, 0.95, 0.95)[1] is None
    assert order_statistic_ranks(72, 0.95, 0.95)[1] == 72
    # while a failure is decidable from very few: x_(5) of 7 bounds the p95 from below
    assert order_statistic_ranks(7, 0.95, 0.95)[0] == 5


def test_no_samples_give_no_ends():
    assert quantile_interval([], 0.95, 0.95).lower is None
    assert quantile_interval([], 0.95, 0.95).upper is None


@pytest.mark.parametrize("level", [0.0, 0.5, 0.89, 1.0, math.nan, 2.0])
def test_a_level_outside_half_to_0999_is_refused_in_one_line(level):
    with pytest.raises(ConfidenceError, match="--confidence"):
        check_confidence(level)


@pytest.mark.parametrize(
    ("n", "level", "draw", "true_p95"),
    [
        # exponential, mean 1: p95 = ln 20
        (200, 0.95, lambda rng, shape: rng.exponential(1.0, shape), math.log(20)),
        # lognormal σ = 1: p95 = e^1.6449 (a heavy tail like queueing TTFAB)
        (100, 0.90, lambda rng, shape: rng.lognormal(0.0, 1.0, shape), math.exp(1.6448536)),
    ],
)
def test_coverage_against_a_known_distribution(n, level, draw, true_p95):
    """4,000 windows of n requests from a distribution whose p95 is known: the share of
    intervals holding it is what the ranks promise (at least the level), within sampling."""
    rng = np.random.default_rng(38)
    trials = 4000
    ranks = order_statistic_ranks(n, 0.95, level)
    lower, upper = ranks
    assert lower is not None and upper is not None
    windows = np.sort(draw(rng, (trials, n)), axis=1)
    held = (windows[:, lower - 1] <= true_p95) & (true_p95 <= windows[:, upper - 1])
    promised = coverage(n, 0.95, ranks)
    spread = math.sqrt(promised * (1 - promised) / trials)
    assert held.mean() >= level - 3 * spread
    assert abs(held.mean() - promised) <= 4 * spread


@pytest.mark.parametrize(
    ("users", "window", "naive_below", "at_least"), [(25, 1000, 0.6, 0.9), (8, 300, 0.8, 0.9)]
)
def test_a_closed_loops_dependent_requests_are_counted_at_their_worth(
    users, window, naive_below, at_least
):
    """A serial engine's closed loop: each request waits for the N − 1 before it. The true p95
    from 10^6 requests; windows of `window` requests after a warm-up. Counted as independent,
    the ranks miss it far more often than the level allows; at their effective size they do not."""
    rng = np.random.default_rng(25)
    true_p95 = float(np.percentile(serial_queue_ttfab_ms(users, 1_000_000, rng), 95))
    naive = order_statistic_ranks(window, 0.95, 0.95)
    trials, held, held_naive = 300, 0, 0
    for _ in range(trials):
        ttfab = serial_queue_ttfab_ms(users, window + 200, rng)[200:]
        found = quantile_interval(list(ttfab), 0.95, 0.95)
        held += (found.lower is None or found.lower <= true_p95) and (
            found.upper is None or true_p95 <= found.upper
        )
        ordered = np.sort(ttfab)
        held_naive += ordered[naive[0] - 1] <= true_p95 <= ordered[naive[1] - 1]
    assert held_naive / trials < naive_below
    assert held / trials >= at_least


def test_independent_samples_keep_every_one_and_the_exact_ranks():
    rng = np.random.default_rng(7)
    values = list(rng.exponential(1.0, 500))
    found = quantile_interval(values, 0.95, 0.95)
    ordered = sorted(values)
    lower, upper = order_statistic_ranks(500, 0.95, 0.95)
    if found.effective_samples == 500:
        assert (found.lower, found.upper) == (ordered[lower - 1], ordered[upper - 1])
    assert found.effective_samples >= 400
