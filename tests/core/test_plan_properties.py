"""Invariants of the plan arithmetic and the surge simulation, for any valid ladder."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.core.ladders import SOURCES, qmax_artifact, rung, ttotal_artifact
from tts_bench.planning.birth_death import shed_probability
from tts_bench.planning.curve import Curve
from tts_bench.planning.plan import PlanRequest, ceil9, derive_plan, floor9

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def ladders(draw, cw: float | None = None):
    """A ladder with c=1, ascending rungs, rps that may rise then flatten, and TTFAB rising."""
    levels = sorted(set(draw(st.lists(st.integers(2, 80), min_size=1, max_size=6))) | {1})
    base_ms = draw(st.floats(20, 400))
    rps_c1 = 1000 / base_ms
    speedup = draw(st.floats(1.0, 4.0))
    rungs = []
    for n in levels:
        rps = rps_c1 * min(n, speedup)
        ttfab = base_ms * n / min(n, speedup)
        rungs.append(rung(n, rps, ttfab, cw=cw))
    return rungs


surges = st.floats(1.01, 1.49)


def plan_for(rungs, surge: float, peak: float = 500.0, t_total: float = 30.0, trials: int = 200):
    qmax = qmax_artifact(rungs)
    assume(qmax.q_max is not None)
    return derive_plan(
        qmax,
        ttotal_artifact(measured_total_s=t_total, lag_s=0.0),
        PlanRequest(
            peak_rps=peak, trough_rps=5.0, surge_ratio=surge, surge_trials=trials, rule="published"
        ),
        SOURCES,
    )


@FAST
@given(ladders(), surges)
def test_scale_in_below_scale_out_at_or_below_qmax(rungs, surge) -> None:
    plan = plan_for(rungs, surge)
    assert plan.c_scale_min < plan.c_scale_max <= plan.queue_max_depth


@FAST
@given(ladders(), surges, st.floats(0.5, 3.0))
def test_thresholds_scale_linearly_with_the_cloudwatch_ratio(rungs, surge, ratio) -> None:
    plain = plan_for(rungs, surge)
    scaled = plan_for([r.model_copy(update={"cloudwatch_ratio": ratio}) for r in rungs], surge)
    assert scaled.scaling_target_value == pytest.approx(
        plain.scaling_target_value * ratio, abs=2e-9
    )
    assert scaled.scale_in_threshold == pytest.approx(plain.scale_in_threshold * ratio, abs=2e-9)


@FAST
@given(ladders(), surges, st.floats(1.0, 10.0), st.floats(5, 5000))  # trough is 5 rps
def test_more_measured_throughput_never_raises_max_instances(rungs, surge, factor, peak) -> None:
    faster = [r.model_copy(update={"achieved_rps": r.achieved_rps * factor}) for r in rungs]
    assert plan_for(faster, surge, peak).max_instances <= plan_for(rungs, surge, peak).max_instances


@FAST
@given(ladders(), surges)
def test_surge_probability_is_a_repeatable_probability(rungs, surge) -> None:
    first = plan_for(rungs, surge).finding("surge_survival").figure("shed_probability")
    again = plan_for(rungs, surge).finding("surge_survival").figure("shed_probability")
    assert 0.0 <= first <= 1.0
    assert first == again


SERVICE = Curve(xs=(0.0, 1.0, 5.0, 50.0), ys=(0.0, 10.0, 20.0, 20.0))


@FAST
@given(
    st.floats(1, 40),
    st.integers(1, 30),
    st.integers(1, 30),
    st.floats(0.1, 30),
    st.floats(0.0, 30),
    st.integers(0, 2**31),
)
def test_probability_never_lower_for_a_longer_t_total(arrival, start, gap, t1, extra, seed) -> None:
    limit = start + gap
    short = shed_probability(arrival, SERVICE.at, start, limit, t1, trials=200, seed=seed)
    long = shed_probability(arrival, SERVICE.at, start, limit, t1 + extra, trials=200, seed=seed)
    assert long.probability >= short.probability


def test_near_zero_when_capacity_far_exceeds_the_surge() -> None:
    fast = Curve(xs=(0.0, 1.0, 100.0), ys=(0.0, 200.0, 200.0))
    outcome = shed_probability(5.0, fast.at, start=10, limit=40, horizon_s=300, trials=200)
    assert outcome.probability < 0.01


def test_near_one_when_the_surge_far_exceeds_capacity() -> None:
    slow = Curve(xs=(0.0, 1.0, 100.0), ys=(0.0, 2.0, 2.0))
    outcome = shed_probability(20.0, slow.at, start=10, limit=40, horizon_s=30, trials=200)
    assert outcome.probability > 0.99


def test_a_start_at_the_limit_has_already_shed() -> None:
    assert shed_probability(1.0, SERVICE.at, start=5, limit=5, horizon_s=1).probability == 1.0


@pytest.mark.parametrize(
    ("value", "rounded_up", "rounded_down"),
    [
        ((0.1 + 0.2) * 10, 3, 3),  # 3.0000000000000004: a bare ceil gives 4
        ((1.2 - 1) * 5, 1, 1),  # 0.9999999999999998: a bare floor gives 0
        (2.5, 3, 2),
    ],
)
def test_ceil_and_floor_ignore_float_noise(value, rounded_up, rounded_down) -> None:
    assert (ceil9(value), floor9(value)) == (rounded_up, rounded_down)


def test_throughput_curve_interpolates_linearly_between_rungs() -> None:
    curve = Curve(xs=(0.0, 30.0, 40.0), ys=(0.0, 17.9, 17.883))
    assert curve(37.5) == pytest.approx(17.88725)
    assert curve(0) == 0.0 and curve(100) == 17.883
    assert np.allclose(curve.at(np.array([15.0])), [8.95])
