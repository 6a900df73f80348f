"""The autoscaling rules the local cloud applies (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tts_bench.local_cloud import scaling_rules as rules

TRACKING = rules.TrackingRule("t", 37.5, 30, 300, disable_scale_in=True)
SCALE_IN = rules.StepRule("s", "ChangeInCapacity", (rules.Step(None, 0.0, -1),), 960)


def _alarm(**kw: object) -> rules.AlarmRule:
    base = dict(
        name="a", statistic="Average", period_s=60, evaluation_periods=3,
        datapoints_to_alarm=3, threshold=25.0, comparison="LessThanOrEqualToThreshold",
        treat_missing="breaching",
    )  # fmt: skip
    base.update(kw)
    return rules.AlarmRule(**base)  # type: ignore[arg-type]


def test_datapoints_group_windows_into_aligned_periods() -> None:
    windows = [rules.Datapoint(t, float(t)) for t in range(0, 180, 10)]
    assert rules.period_datapoints(windows, 60, "Average", 3, 185) == [25.0, 85.0, 145.0]
    assert rules.period_datapoints(windows, 60, "Maximum", 2, 185) == [110.0, 170.0]
    assert rules.period_datapoints(windows, 60, "Average", 4, 185)[0] is None


@pytest.mark.parametrize(
    ("points", "treat", "expected"),
    [
        ([1.0, 2.0, 3.0], "breaching", rules.AlarmState.ALARM),
        ([1.0, 30.0, 3.0], "breaching", rules.AlarmState.OK),
        ([None, None, None], "breaching", rules.AlarmState.ALARM),
        ([None, None, None], "notBreaching", rules.AlarmState.OK),
        ([None, None, None], "missing", rules.AlarmState.INSUFFICIENT_DATA),
        ([None, 1.0, 1.0], "ignore", rules.AlarmState.OK),  # 2 of the needed 3
    ],
)
def test_alarm_state(points: list, treat: str, expected: rules.AlarmState) -> None:
    assert rules.alarm_state(_alarm(treat_missing=treat), points) == expected


def test_tracking_high_alarm_is_three_ten_second_maxima_above_target() -> None:
    high = TRACKING.high_alarm("h")
    assert (high.period_s, high.evaluation_periods, high.statistic) == (10, 3, "Maximum")
    assert rules.alarm_state(high, [38.0, 40.0, 39.0]) == rules.AlarmState.ALARM
    assert rules.alarm_state(high, [38.0, 37.5, 39.0]) == rules.AlarmState.OK


@given(st.integers(1, 50), st.floats(0.01, 500), st.floats(1, 100))
def test_tracking_capacity_brings_the_metric_to_the_target(
    desired: int, value: float, target: float
) -> None:
    capacity = rules.tracking_capacity(desired, value, target)
    assert capacity >= 1
    assert desired * value / capacity <= target * (1 + 1e-9) or (capacity == 1 and value <= target)


def test_step_scale_in_removes_one_at_or_below_the_threshold() -> None:
    assert rules.step_capacity(SCALE_IN, 3, -5.0) == 2
    assert rules.step_capacity(SCALE_IN, 3, 0.0) == 2
    assert rules.step_capacity(SCALE_IN, 3, 1.0) is None


def test_step_adjustment_types() -> None:
    exact = rules.StepRule("e", "ExactCapacity", (rules.Step(0.0, None, 4),), 0)
    percent = rules.StepRule("p", "PercentChangeInCapacity", (rules.Step(0.0, None, 50),), 0)
    assert rules.step_capacity(exact, 1, 3.0) == 4
    assert rules.step_capacity(percent, 3, 3.0) == 5


@given(st.integers(-100, 100), st.integers(1, 10), st.integers(10, 20))
def test_clamp_stays_in_bounds(capacity: int, low: int, high: int) -> None:
    assert low <= rules.clamp(capacity, low, high) <= high
