"""The fleet model against queueing theory, and the plan's surge finding against the fleet model.

Tolerances are statistical: each check runs R independent seeds and accepts the theory's
figure within 4 standard errors of their mean (a false alarm about once in 16,000 runs), so a
biased model fails while sampling noise does not.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.simulate.conftest import run_policy, traffic_of
from tts_bench.simulate.service import flat_curves

SEEDS = range(8)


def mm1k_blocking(rho: float, k: int) -> float:
    """P(an arrival finds K in the system) for M/M/1/K."""
    if rho == 1:
        return 1 / (k + 1)
    return (1 - rho) * rho**k / (1 - rho ** (k + 1))


def within_standard_errors(samples: list[float], expected: float, sigmas: float = 4.0) -> bool:
    mean = float(np.mean(samples))
    se = float(np.std(samples, ddof=1)) / np.sqrt(len(samples))
    return abs(mean - expected) <= sigmas * se + 1e-12


@pytest.mark.parametrize(
    ("arrival_rps", "service_rps", "k"), [(10, 12, 5), (15, 12, 8), (8, 10, 3)]
)
@pytest.mark.parametrize("model", ["fleet", "requests"])
def test_fixed_one_on_a_flat_curve_is_mm1k(reference, arrival_rps, service_rps, k, model) -> None:
    curves = flat_curves(service_rps, k)
    duration_s = 3000 if model == "fleet" else 600
    shares = []
    for seed in SEEDS:
        traffic = traffic_of(f"steady:{arrival_rps}", duration_s, reference, seed)
        run = run_policy(reference, "fixed:1", traffic, seed, model=model, curves=curves)
        shares.append(run.shed / run.requests)
    expected = mm1k_blocking(arrival_rps / service_rps, k)
    assert within_standard_errors(shares, expected), (np.mean(shares), expected)


def test_nothing_is_shed_when_capacity_far_exceeds_load(reference) -> None:
    # 280 instances serve about 5000 requests/s; offer a tenth of it over a diurnal swing.
    traffic = traffic_of("diurnal:10:500:3600", 3600, reference, 3)
    run = run_policy(reference, "fixed:280", traffic, 3)
    assert run.requests > 500_000
    assert run.shed == 0 and run.over_slo == 0
    assert run.timeline.mean_occupancy.max() < 1


def test_a_surge_at_the_trigger_sheds_as_surge_survival_predicts(reference) -> None:
    """surge_survival: a fleet loaded at X(C_scale_max) per instance, hit by ×surge_ratio, with
    no new capacity for T_total, reaches Q_max (its `shed_probability`, 1.0 on the reference).
    The fleet model of the same situation sheds in as many runs, and sheds the share a full
    queue implies: 1 − X(Q_max) / (ratio · X(C_scale_max)) of the surge's arrivals."""
    plan, shape, curves = reference.plan, reference.shape, reference.curves
    predicted = plan.finding("surge_survival").figure("shed_probability")
    x_trigger = reference.throughput_at_trigger_rps
    ratio, hold_s, at_s = shape.surge_ratio, shape.surge_hold_s, 300.0
    fluid_share = 1 - curves.service_rps[shape.queue_max_depth] / (ratio * x_trigger)
    instances = 3
    hit, shares = [], []
    for seed in SEEDS:
        spec = f"surge:{instances * x_trigger}:{ratio}:{at_s}"
        traffic = traffic_of(spec, at_s + hold_s, reference, seed)
        line = run_policy(reference, f"fixed:{instances}", traffic, seed).timeline
        surge = line.end_s > at_s
        hit.append(float(line.shed[surge].sum() > 0))
        shares.append(line.shed[surge].sum() / line.offered[surge].sum())
    assert np.mean(hit) == pytest.approx(predicted, abs=1 / len(SEEDS))
    assert (
        within_standard_errors(shares, fluid_share, sigmas=4)
        or abs(np.mean(shares) - fluid_share) < 0.02
    )


@pytest.mark.parametrize("instances", [2, 3])
def test_a_pooled_fleet_under_a_surge_sheds_as_the_fleet_rules_surge_finding_says(
    reference, instances
) -> None:
    """The fleet rule's surge_survival: N instances held at λ_out, offered the surge ratio's load
    for good, shed the pooled chain's stationary share. The chain spreads requests evenly; the
    fleet model routes to the least-outstanding instance, which leaves one idle now and then,
    a bias too small to show against 8 seeds' sampling (measured: 9.8e-4 ± 0.9e-4 against 8.8e-4
    for two instances over 4 h)."""
    from tts_bench.planning.birth_death import pooled_stationary
    from tts_bench.planning.curve import throughput_curve

    per_instance_rps = 1.25 * 13.775737741  # the reference fleet plan's surge at λ_out
    shares = []
    for seed in SEEDS:
        traffic = traffic_of(f"steady:{instances * per_instance_rps}", 5400, reference, seed)
        run = run_policy(reference, f"fixed:{instances}", traffic, seed)
        shares.append(run.shed / run.requests)
    curve = throughput_curve(reference.qmax.curve_rungs)
    expected = pooled_stationary(instances, per_instance_rps, curve.at, 50).shed_share
    assert within_standard_errors(shares, expected), (np.mean(shares), expected)


@pytest.mark.parametrize("model", ["fleet", "requests"])
def test_a_refused_request_counts_in_the_concurrency_metric_while_its_container_receives_it(
    reference, model
) -> None:
    """ConcurrentRequestsPerModel counts the requests a container is receiving, and a container
    receives the one it refuses: a window with a shed reads the bound plus that one request
    (what the local cloud's router counts too); a window without one never passes the bound.
    Read as the bound alone, the published rule's runaway grew by 50/37.5 a step instead of
    51/37.5, and its rehearsal and replays parted at 28 instances against 20."""
    k, instances = 4, 2
    curves = flat_curves(5.0, k)  # 10 requests/s of capacity, offered 40
    traffic = traffic_of("steady:40", 120, reference, 5)
    run = run_policy(reference, f"fixed:{instances}", traffic, 5, model=model, curves=curves)
    line = run.timeline
    shedding = line.shed > 0
    assert shedding.sum() >= 10
    assert np.all(line.datapoint[shedding] == (instances * k + 1) / instances)
    assert np.all(line.datapoint[~shedding] <= k)
