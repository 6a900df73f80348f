"""Determinism per seed, more instances never shedding more, and the traffic parsers."""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.simulate.conftest import request_for, run_policy, traffic_of
from tts_bench.simulate.from_files import simulate_from_files
from tts_bench.simulate.traffic import TrafficError, load_trace, parse_synthetic


def test_one_seed_gives_one_result_and_another_seed_another(tmp_path: Path) -> None:
    def outcomes(seed: int, out: str) -> list[dict]:
        request = request_for(
            tmp_path / out, synthetic="surge:40:1.25:60", duration_s=400.0, seed=seed,
            policies=("plan", "plan+burst", "fixed:2"),
        )  # fmt: skip
        return [p.model_dump() for p in simulate_from_files(request).artifact.policies]

    first = outcomes(7, "a")
    assert outcomes(7, "b") == first
    assert outcomes(8, "c") != first


@pytest.mark.parametrize("rate", [20, 45, 70])
def test_one_more_instance_never_sheds_more_on_the_same_arrivals(reference, rate) -> None:
    for seed in range(3):
        traffic = traffic_of(f"steady:{rate}", 600, reference, seed)
        shed = [run_policy(reference, f"fixed:{n}", traffic, seed).shed for n in range(1, 7)]
        assert all(b <= a for a, b in itertools.pairwise(shed)), (rate, seed, shed)
        assert shed[0] > 0


def test_the_fleet_model_counts_every_arrival_of_the_traffic(reference) -> None:
    traffic = traffic_of("diurnal:5:40:600", 600, reference, 11)
    run = run_policy(reference, "plan", traffic, 11)
    assert run.requests == traffic.requests == int(run.timeline.offered.sum())


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0, 500, allow_nan=False), min_size=1, max_size=200))
def test_a_timestamp_trace_keeps_every_arrival(tmp_path_factory, times) -> None:
    times = sorted(times)
    path = tmp_path_factory.mktemp("trace") / "t.csv"
    path.write_text("timestamp_s\n" + "".join(f"{t!r}\n" for t in times))
    traffic = load_trace(path, None)
    assert traffic.requests == len(times)
    assert traffic.duration_s > times[-1]
    assert np.array_equal(traffic.arrival_times_s(np.random.default_rng(0)), np.array(times))


@given(
    st.floats(0, 1e4, allow_nan=False),
    st.floats(0, 1e4, allow_nan=False),
    st.floats(2, 1e6, allow_nan=False),
)
def test_diurnal_specs_parse_to_their_trough_and_peak(low, high, period) -> None:
    low, high = min(low, high), max(low, high)
    shape = parse_synthetic(f"diurnal:{low!r}:{high!r}:{period!r}")
    rate = shape.rate_rps(np.array([0.0, period / 2]), surge_hold_s=0)
    assert rate == pytest.approx([low, high])


def test_a_surge_multiplies_the_rate_for_one_hold() -> None:
    shape = parse_synthetic("diurnal:10:5000:86400+surge:1.25:21600")
    before, during, after = shape.rate_rps(np.array([21599.0, 21600.0, 21600.0 + 320.2]), 320.2)
    assert during == pytest.approx(1.25 * (10 + 4990 * (1 - math.cos(math.pi / 2)) / 2))
    assert before == pytest.approx(during / 1.25, rel=1e-3) and after < during
    with pytest.raises(TrafficError, match="cannot carry another surge"):
        parse_synthetic("surge:1:2:3+surge:1.5:10")


@settings(max_examples=50, deadline=None)
@given(
    scale=st.floats(0.01, 10, allow_nan=False),
    second=st.floats(0, 4 * 7 * 86_400 - 1, allow_nan=False),
)
def test_a_weekend_scales_saturday_and_sunday_only(scale: float, second: float) -> None:
    shape = parse_synthetic(f"diurnal:10:500:43200+surge:1.25:3600+weekend:{scale!r}")
    weekday = parse_synthetic("diurnal:10:500:43200+surge:1.25:3600")
    t = np.array([second])
    weekend = int(second // 86_400) % 7 in (5, 6)  # day 0 is a Monday
    expected = weekday.rate_rps(t, 500.0) * (scale if weekend else 1.0)  # ×1 is still a week
    assert shape.rate_rps(t, 500.0) == pytest.approx(expected)
    assert shape.default_duration_s(500.0) == 7 * 86_400


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("steady:5+weekend:0", "the weekend scale must be positive"),
        ("steady:5+weekend:0.3+surge:1.2:5", "any may end in +weekend:SCALE"),
    ],
)
def test_a_bad_weekend_is_refused_in_one_line(spec: str, says: str) -> None:
    with pytest.raises(TrafficError, match=re.escape(says)):
        parse_synthetic(spec)


def test_an_instance_asked_for_serves_one_measured_t_total_after_its_alarm(reference) -> None:
    traffic = traffic_of("surge:30:1.25:60", 900, reference, 5)
    line = run_policy(reference, "plan", traffic, 5).timeline
    asked = int(np.flatnonzero(line.desired > line.desired[0])[0])
    alarm_s = line.end_s[asked]
    # Target tracking waited for three datapoints above the target before it asked.
    (tracking,) = [r for r in reference.shape.rules if r.policy_name == "concurrency-target"]
    assert (line.datapoint[asked - 2 : asked + 1] > tracking.target_value).all()
    serving = int(np.flatnonzero(line.in_service > line.in_service[asked])[0])
    start_delay_s = reference.shape.start_delay_s
    assert line.end_s[serving] - 10 < alarm_s + start_delay_s <= line.end_s[serving]


def test_no_capacity_change_lands_while_the_endpoint_updates_unless_the_reading_accepts_it(
    reference,
) -> None:
    """[SM-update] A scale-out leaves the endpoint Updating until its instances serve: the
    published rule's 30 s cooldown no longer lets it stack scale-outs on a launch (its runaway
    before issue 35), which a reading that accepts the change still does."""
    from dataclasses import replace

    from tts_bench.planning.aws.semantics import DOCUMENTED

    traffic = traffic_of("surge:30:2:60", 900, reference, 3)

    def scale_outs(semantics) -> list[float]:  # type: ignore[no-untyped-def]
        shape = replace(reference.shape, semantics=semantics)
        inputs = replace(reference, shape=shape)
        run = run_policy(inputs, "plan", traffic, 3)
        return [t for t, action in run.actions if action.out]

    refused = scale_outs(DOCUMENTED)
    delay = reference.shape.start_delay_s
    assert refused and all(b - a >= delay for a, b in itertools.pairwise(refused))
    accepted = scale_outs(replace(DOCUMENTED, refuse_while_updating=False))
    assert any(b - a < delay for a, b in itertools.pairwise(accepted))
