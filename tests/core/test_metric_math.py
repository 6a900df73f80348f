"""The fleet-aware scale-in alarm (`planning.aws.metric_math`): its value, its expression read
back, and the engine acting on it as a step scale-in."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tts_bench.planning.aws import metric_math
from tts_bench.planning.aws import scaling as aws

MATH = metric_math.FleetMath(min_fleet=20)
TARGET = 826.54426446


@given(
    n=st.integers(min_value=20, max_value=2000),
    per_instance=st.floats(min_value=0.5, max_value=5000, allow_nan=False),
)
def test_a_large_fleets_value_is_the_load_per_instance_with_one_instance_fewer(
    n: int, per_instance: float
) -> None:
    # n instances each counting `per_instance` requests: n · per_instance invocations in all.
    value = metric_math.value(n * per_instance, per_instance, MATH, TARGET)
    assert value == pytest.approx(per_instance * n / (n - 1))


@given(
    n=st.integers(min_value=1, max_value=19),
    per_instance=st.floats(min_value=0.5, max_value=5000, allow_nan=False),
)
def test_a_fleet_below_the_minimum_never_breaches(n: int, per_instance: float) -> None:
    value = metric_math.value(n * per_instance, per_instance, MATH, TARGET)
    assert value == TARGET  # the alarm is LessThanThreshold: the threshold is not below it


def test_a_period_without_invocations_has_no_datapoint() -> None:
    assert metric_math.value(0.0, 0.0, MATH, TARGET) is None


@given(
    min_fleet=st.integers(min_value=2, max_value=500),
    threshold=st.floats(min_value=0.001, max_value=1e7, allow_nan=False),
    period=st.sampled_from([10, 60, 300]),
)
def test_the_deployed_queries_read_back_as_what_was_deployed(
    min_fleet: int, threshold: float, period: int
) -> None:
    math = metric_math.FleetMath(min_fleet)
    queries = metric_math.queries(math, threshold, "speech", "AllTraffic", period)
    assert metric_math.parse(queries) == (math, period)
    assert [q["Id"] for q in queries if q["ReturnData"]] == ["e"]


@pytest.mark.parametrize(
    ("edit", "what"),
    [
        (lambda q: q[3].update(Expression="IF(n >= 2, m1 / (n - 1), 826.5)") or q, "expression"),
        (lambda q: q[0]["MetricStat"].update(Stat="Average") or q, "statistic"),
        (lambda q: q[1]["MetricStat"]["Metric"].update(MetricName="Invocations") or q, "metric"),
        (lambda q: q[2].update(ReturnData=True) or q, "a second returned series"),
        (lambda q: [*q[:3], dict(q[3], Expression="m1 / n")], "another formula"),
    ],
)
def test_an_alarm_that_is_not_exactly_the_deployed_expression_is_not_recognised(
    edit: object, what: str
) -> None:
    queries = metric_math.queries(MATH, TARGET, "speech", "AllTraffic", 60)
    edited = edit(queries)  # type: ignore[operator]
    parsed = metric_math.parse(edited)
    # The first edit keeps the template, with other numbers: read back as those, never as ours.
    assert parsed is None or parsed[0] != MATH, what


SCALE_IN = aws.StepRule(
    "fleet-scale-in",
    "PercentChangeInCapacity",
    tuple(
        aws.Step(None if k == 50 else -k * TARGET / 100, -(k - 1) * TARGET / 100, -k)
        for k in range(1, 51)
    ),
    240,
    aws.AlarmRule(
        "fleet-scale-in-alarm",
        "InvocationsPerInstance",
        "Sum",
        60,
        3,
        3,
        TARGET,
        "LessThanThreshold",
        "missing",
        after_one_less=MATH,
    ),
)


def _minutes(instances: int, per_instance: float, minutes: int = 4):
    """Both series as a 10 s publisher writes them: six windows a minute."""
    per_window = per_instance / 6
    ipi = [aws.Datapoint(t, per_window) for t in range(0, 60 * minutes, 10)]
    invocations = [aws.Datapoint(t, per_window * instances) for t in range(0, 60 * minutes, 10)]
    return ipi, invocations


@pytest.mark.parametrize(
    ("instances", "after"),
    [
        (100, 85),  # 700/min each; one fewer: 707, 14.5 % below the target: −15 %
        (19, 19),  # the same load per instance on a fleet of 19: target tracking's to act
    ],
)
def test_the_engine_scales_a_large_fleet_in_to_the_target_and_leaves_a_small_one(
    instances: int, after: int
) -> None:
    ipi, invocations = _minutes(instances, 700.0)
    engine = aws.ScalingEngine((SCALE_IN,))
    reading = aws.read_alarm(SCALE_IN.alarm, ipi, 240.0, invocations)
    action = engine.decide(240.0, {SCALE_IN.alarm.name: reading}, instances, (1, 1000))
    assert (action.after if action else instances) == after
    if action is not None:  # the survivors serve at or under the target
        assert 700.0 * instances / action.after <= TARGET
