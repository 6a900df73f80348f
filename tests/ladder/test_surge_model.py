"""The surge's pure parts: Poisson arrivals, occupancy from samples, the loss model."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tts_bench.measure.samples import Outcome, Sample
from tts_bench.measure.surge.figures import (
    SurgeError,
    fluid_shed_share,
    max_occupancy,
    occupancy_at,
    poisson_arrivals,
)
from tts_bench.planning.birth_death import loss_system


@given(st.floats(0.1, 50), st.floats(1, 60), st.integers(0, 2**32))
def test_arrivals_are_ascending_inside_the_run_and_fixed_by_the_seed(rate, duration, seed):
    times = poisson_arrivals(rate, duration, seed)
    assert np.all(np.diff(times) > 0) and np.all((times >= 0) & (times < duration))
    assert np.array_equal(times, poisson_arrivals(rate, duration, seed))


def test_arrival_counts_are_poisson():
    counts = [len(poisson_arrivals(2.0, 10.0, seed)) for seed in range(400)]
    # mean R·S = 20 and variance R·S = 20; 400 runs put the mean within ±0.7 (3σ/√400·√20).
    assert np.mean(counts) == pytest.approx(20, abs=0.7)
    assert np.var(counts) == pytest.approx(20, rel=0.25)


@pytest.mark.parametrize("rate, duration", [(0, 10), (1, 0), (float("nan"), 5), (1, float("inf"))])
def test_a_rate_or_duration_that_is_not_positive_and_finite_is_refused(rate, duration):
    with pytest.raises(SurgeError):
        poisson_arrivals(rate, duration, 1)


@settings(max_examples=20, deadline=None)
@given(st.floats(0.3, 3.0), st.integers(1, 5))
def test_loss_model_matches_the_mm1k_blocking_formula(load, limit):
    """Constant service rate μ = 1: M/M/1/K, blocking = ρ^K (1−ρ) / (1 − ρ^(K+1))."""
    out = loss_system(load, lambda n: np.where(n > 0, 1.0, 0.0), limit, 600.0, np.array([0.0]),
                      trials=200, seed=7)  # fmt: skip
    rho = load
    p = np.array([rho**k for k in range(limit + 1)])
    p /= p.sum()
    assert out.shed_share == pytest.approx(p[-1], abs=0.02)
    assert out.mean_occupancy == pytest.approx(float((np.arange(limit + 1) * p).sum()), abs=0.1)


def test_an_instance_far_below_capacity_sheds_nothing_in_the_model():
    out = loss_system(0.01, lambda n: n * 1.0, 8, 60.0, np.arange(0, 60, 0.5), trials=200)
    assert out.shed_share == 0.0 and max(out.occupancy_at) < 0.1


def admitted(start: float, end: float, outcome: Outcome = Outcome.OK) -> Sample:
    return Sample(None, "h:1", start, end, 10.0, (end - start) * 1000, outcome,
                  intended_start=start - 0.001)  # fmt: skip


def test_occupancy_counts_admitted_requests_only():
    samples = [admitted(0, 2), admitted(1, 3), admitted(1.5, 1.6, Outcome.REJECTED), admitted(2, 4)]
    assert occupancy_at(samples, np.array([0.5, 1.5, 2.0, 3.5, 4.0])) == [1, 2, 2, 1, 0]
    assert max_occupancy(samples) == 2  # the one ending at 2 frees its place for the one at 2


@given(st.lists(st.tuples(st.floats(0, 100), st.floats(0, 10), st.floats(0, 5)), min_size=1))
def test_intended_time_ttfab_is_never_below_send_time_ttfab(rows):
    for intended, lag, ttfab_s in rows:
        s = Sample(None, "h:1", intended + lag, intended + lag + ttfab_s + 1, ttfab_s * 1000,
                   (ttfab_s + 1) * 1000, Outcome.OK, intended_start=intended)  # fmt: skip
        assert s.intended_ttfab_ms >= s.ttfab_ms
        assert s.intended_ttfab_ms == pytest.approx(s.ttfab_ms + lag * 1000, abs=1e-6)


def test_fluid_shed_share():
    # 2 rps served, bound 4, 10 rps for 10 s: at most 2·10 + 4 = 24 of 100 get in.
    assert fluid_shed_share(2.0, 4, 10.0, 10.0) == pytest.approx(0.76)
    assert fluid_shed_share(2.0, 4, 1.0, 10.0) == 0.0
